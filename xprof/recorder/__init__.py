"""The in-process side: hooks into torch_xla that write a run file. No pandas here."""

from xprof.recorder.watch import XprofUsageError, active, watch

__all__ = ["XprofUsageError", "active", "watch"]
