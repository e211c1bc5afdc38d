"""The ``end`` record: how the run ended, what ran after the last barrier, and what the
recorder could not keep (written by the writer thread once ``watch()`` stops)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xprof.recorder import metrics as m
from xprof.runfile import CACHED, UNCACHED


class Ending:
    """The ``end`` record's part of the :class:`~xprof.recorder.core.Recorder` (a base class
    of it, as :class:`~xprof.recorder.arms.ArmedHooks` is; its state is the recorder's)."""

    counters: m.CounterReader
    guard: Callable[..., Any]
    step: int
    syncs: int
    errors: int
    events_dropped: int
    dropped_from: int | None
    _read_compiles: int
    _opt_steps: int
    _backwards: int
    _inputs: list[Any]
    _prev_snapshot: Callable[[], dict[str, int]]
    _name_inputs: Callable[[list[Any]], list[Any]]
    _op_compile_cursor: Any
    _exec_cursor: Any
    _rexec_cursor: Any
    _size_cursor: Any
    _xfer_cursor: Any

    def end_record(self, status: str, exception: str | None, t: float) -> dict[str, Any]:
        """The ``end`` record of the run, at time ``t`` (docs/run-format.md)."""
        rec = self
        tail = rec.guard("stop", lambda: m.delta(rec.counters.snapshot(refresh=True), rec._prev_snapshot()))
        end: dict[str, Any] = {"type": "end", "t": t, "status": status, "exception": exception,
                               "steps": rec.step, "syncs": rec.syncs, "errors": rec.errors}
        if tail:
            end["tail"] = tail
            graphs = tail.get(UNCACHED, 0) + tail.get(CACHED, 0) - rec._read_compiles
            if graphs > 0:
                end["tail_graphs"] = graphs  # ops run after the last barrier (eager mode)
        if rec._opt_steps:
            end["tail_opt"] = rec._opt_steps
        if rec._backwards:
            end["tail_bw"] = rec._backwards  # (backward passes after the last barrier: training without one)
        if rec._inputs:
            end["tail_inputs"] = [[e[0], list(e[1]), e[2], e[3]] for e in rec._name_inputs(rec._inputs)]
        dropped = [c.name for c in (rec._op_compile_cursor, rec._exec_cursor, rec._rexec_cursor,
                                    rec._size_cursor, rec._xfer_cursor) if c.dropped]
        if dropped:
            end["samples_dropped"] = dropped
        if rec.events_dropped:
            end["events_dropped"] = rec.events_dropped  # the writer thread was stuck on the disk
            end["dropped_from"] = rec.dropped_from
        return end
