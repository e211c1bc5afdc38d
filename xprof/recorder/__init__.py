"""The in-process side: hooks into torch_xla that write a run file. No pandas here."""

from xprof import openxla as _openxla
from xprof.recorder.watch import XprofUsageError, active, watch

_openxla.check()  # here too: after `pip install xprof`, `import xprof` may be OpenXLA's

__all__ = ["XprofUsageError", "active", "watch"]
