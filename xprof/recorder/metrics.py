"""Reading torch_xla's metrics cheaply.

Counters cost a fraction of a microsecond each, but reading a metric copies its whole
sample ring buffer (tens of microseconds once it is full). So the recorder reads
counters at every barrier, and sample lists only when a counter says there is something
new in them, or in batches for the metrics that grow every step.

The recorder talks to a :class:`MetricsSource`, so tests can drive it with exact numbers.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

# The counter names are the run file's (a step record's ``c`` holds them): defined there,
# read back by the analysis under the same names.
from xprof.runfile import (
    CACHED,
    EXECUTE,
    LOCAL_SCALAR,
    MARK_STEP,
    REPLICATED,
    TO_CPU,
    UNCACHED,
    is_fallback_counter,
)

__all__ = ["BASE_COUNTERS", "CACHED", "EXECUTE", "LOCAL_SCALAR", "MARK_STEP", "REPLICATED", "TO_CPU", "UNCACHED",
           "CounterReader", "MetricsSource", "SampleCursor", "XlaMetrics", "delta", "is_fallback_counter"]

# Counters read at every barrier (when present) and written as per-step deltas.
# ExecuteReplicated counts the executions of an SPMD run (ExecuteComputation stays 0 there).
BASE_COUNTERS = (UNCACHED, CACHED, EXECUTE, REPLICATED, MARK_STEP, LOCAL_SCALAR, TO_CPU)

COMPILE_TIME = "CompileTime"
EXECUTE_TIME = "ExecuteTime"
EXECUTE_REPLICATED_TIME = "ExecuteReplicatedTime"
TRANSFER_FROM = "TransferFromDeviceTime"
GRAPH_SIZE = "TensorsGraphSize"

Sample = tuple[float, float]


class MetricsSource(Protocol):
    """What the recorder needs of ``torch_xla.debug.metrics``."""

    def counter_names(self) -> Sequence[str]: ...

    def counter_value(self, name: str) -> int | None: ...

    def samples(self, name: str) -> Sequence[Sample]:
        """The kept ``(unix_seconds, value)`` samples of a metric, oldest first."""
        ...


class XlaMetrics:
    """The real source: torch_xla's metrics API.

    ``counter_value`` is bound straight to the C function behind
    ``torch_xla.debug.metrics.counter_value`` (which only forwards to it): the recorder
    reads several counters a step, and each Python layer costs about as much as the read.
    """

    def __init__(self) -> None:
        import torch_xla.debug.metrics as met

        self._met = met
        xlac = getattr(__import__("torch_xla"), "_XLAC", None)
        direct = getattr(xlac, "_xla_counter_value", None)
        self.counter_value = direct if callable(direct) else met.counter_value  # type: ignore[method-assign]

    def counter_names(self) -> Sequence[str]:
        return list(self._met.counter_names())

    def counter_value(self, name: str) -> int | None:
        return self._met.counter_value(name)  # replaced per instance in __init__

    def samples(self, name: str) -> Sequence[Sample]:
        data: Any = self._met.metric_data(name)
        if not data:
            return ()
        return data[2]


REFRESH_EVERY = 32
"""Snapshots between two looks for new ``aten::`` fallback counters. Listing the counter
names costs several times a counter read, and a new fallback op shows up at most this many
steps late (its whole count still lands in one step's delta)."""


class CounterReader:
    """Snapshots the counters that matter, tracking fallback counters as they appear."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self._names: list[str] = list(BASE_COUNTERS)
        self._seen_count = -1
        self._until_refresh = 0

    def _refresh_names(self) -> None:
        names = self.source.counter_names()
        if len(names) != self._seen_count:
            self._seen_count = len(names)
            extra = sorted(n for n in names if is_fallback_counter(n))
            self._names = list(BASE_COUNTERS) + [n for n in extra if n not in BASE_COUNTERS]

    def snapshot(self, refresh: bool = False) -> dict[str, int]:
        """Current values of the tracked counters; ``refresh`` looks for new fallback counters now."""
        self._until_refresh -= 1
        if refresh or self._until_refresh <= 0:
            self._until_refresh = REFRESH_EVERY
            self._refresh_names()
        value = self.source.counter_value
        out: dict[str, int] = {}
        for name in self._names:
            v = value(name)
            if v:
                out[name] = v
        return out

    def compile_counts(self) -> tuple[int, int]:
        """(uncached, cached) compiles so far: two counter reads, for a barrier's start."""
        value = self.source.counter_value
        return value(UNCACHED) or 0, value(CACHED) or 0

    def sync_counts(self) -> tuple[int, int, int]:
        """(uncached, cached, executions) so far, read around a host read (executions of
        both kinds: one process's own, and SPMD's replicated ones)."""
        value = self.source.counter_value
        return value(UNCACHED) or 0, value(CACHED) or 0, (value(EXECUTE) or 0) + (value(REPLICATED) or 0)


def delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """Counter increases since ``before``; counters that did not move are left out."""
    out = {}
    for name, v in now.items():
        d = v - before.get(name, 0)
        if d:
            out[name] = d
    return out


class SampleCursor:
    """New samples of one metric since the last read, by timestamp.

    The ring buffer forgets old samples, so a cursor keeps the newest timestamp it has
    returned and hands out only what came after.
    """

    def __init__(self, source: MetricsSource, name: str) -> None:
        self.source = source
        self.name = name
        self.last_ts = 0.0
        self.dropped = False

    def start(self) -> None:
        kept = self.source.samples(self.name)
        self.last_ts = float(kept[-1][0]) if kept else 0.0

    def new(self) -> list[Sample]:
        kept = self.source.samples(self.name)
        last = self.last_ts
        out: list[Sample] = []
        # Walk back from the newest: usually only a few are new.
        for i in range(len(kept) - 1, -1, -1):
            ts, value = kept[i]
            if ts <= last:
                break
            out.append((float(ts), float(value)))
        else:
            if kept and last and len(out) == len(kept):
                self.dropped = True  # the ring wrapped past what we had seen
        out.reverse()
        if out:
            self.last_ts = out[-1][0]
        return out
