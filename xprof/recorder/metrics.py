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

__all__ = ["BASE_COUNTERS", "CounterReader", "MetricsSource", "SampleCursor", "XlaMetrics", "delta"]

# Counters read at every barrier (when present) and written as per-step deltas.
BASE_COUNTERS = (UNCACHED, CACHED, EXECUTE, MARK_STEP, LOCAL_SCALAR, TO_CPU)
SPMD_COUNTERS = BASE_COUNTERS + (REPLICATED,)
"""An SPMD run's: ExecuteReplicated counts its executions (ExecuteComputation stays 0).
Read only once the run is known to be one, so other runs pay nothing for it."""

COMPILE_TIME = "CompileTime"
EAGER_COMPILE_TIME = "EagerOpCompileTime"
"""Compiles of ops run one by one (``torch_xla.experimental.eager_mode``): not in CompileTime."""
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




class CounterReader:
    """Reads the counters that matter, tracking fallback counters as they appear.

    ``names`` is the tuple of counters a barrier reads (``UncachedCompile`` first). The
    training thread reads it at every barrier; :meth:`refresh` (called by the recorder's
    writer thread a few times a second, and at a barrier whose step compiled, since a new
    fallback op compiles too) replaces it when new ``aten::`` counters exist. Listing the
    counter names costs several times a counter read, so the barrier never does it for
    a step that did not compile.
    """

    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self.base: tuple[str, ...] = BASE_COUNTERS
        self.names: tuple[str, ...] = BASE_COUNTERS
        self.value = source.counter_value
        """The counter read itself (the C function, for the real source)."""
        self.spmd = False
        """Executions are counted in ExecuteReplicated too (see :meth:`count_replicated`)."""
        self._seen_count = -1

    def count_replicated(self) -> None:
        """An SPMD run: read ExecuteReplicated too, at barriers and around host reads."""
        self.spmd = True
        self.base = SPMD_COUNTERS
        self.names = SPMD_COUNTERS + tuple(n for n in self.names if n not in SPMD_COUNTERS)
        self._seen_count = -1  # a refresh running meanwhile rebuilds from the new base

    def refresh(self) -> bool:
        """Look for new fallback counters; True when ``names`` changed."""
        names = self.source.counter_names()
        if len(names) == self._seen_count:
            return False
        self._seen_count = len(names)
        extra = sorted(n for n in names if is_fallback_counter(n))
        base = self.base
        new = base + tuple(n for n in extra if n not in base)
        if new == self.names:
            return False
        self.names = new
        return True

    def read(self, names: tuple[str, ...]) -> list[int]:
        """The values of ``names`` now, in order (0 for a counter not created yet)."""
        value = self.value
        return [value(n) or 0 for n in names]

    def snapshot(self, refresh: bool = False) -> dict[str, int]:
        """Current values of the tracked counters that are not zero; ``refresh`` looks
        for new fallback counters first."""
        if refresh:
            self.refresh()
        names = self.names
        return {n: v for n, v in zip(names, self.read(names)) if v}

    def compile_counts(self) -> tuple[int, int]:
        """(uncached, cached) compiles so far: two counter reads, for a barrier's start."""
        value = self.value
        return value(UNCACHED) or 0, value(CACHED) or 0

    def sync_counts(self) -> tuple[int, int, int]:
        """(uncached, cached, executions) so far, read around a host read (in an SPMD run,
        executions of either kind)."""
        value = self.value
        if self.spmd:
            return value(UNCACHED) or 0, value(CACHED) or 0, (value(EXECUTE) or 0) + (value(REPLICATED) or 0)
        return value(UNCACHED) or 0, value(CACHED) or 0, value(EXECUTE) or 0

    def sync_counts_after(self, before: tuple[int, int, int]) -> tuple[int, int, int]:
        """:meth:`sync_counts` at the end of a host read that began at ``before``.

        A read compiles only to run what it compiles: when no graph ran (most reads: a
        value already on the device copied back), the compile counters are ``before``'s,
        and only the execution counter is read (one counter read instead of three)."""
        value = self.value
        executed = value(EXECUTE) or 0
        if self.spmd:
            executed += value(REPLICATED) or 0
        if executed == before[2]:
            return before
        return value(UNCACHED) or 0, value(CACHED) or 0, executed


def eager_mode() -> bool:
    """torch_xla runs each op as it comes (``torch_xla.experimental.eager_mode(True)``); False
    where that cannot be asked (no torch_xla, another version)."""
    try:
        import torch_xla

        return bool(torch_xla._XLAC._get_use_eager_mode())
    except Exception:
        return False


def increase(now: int, before: int) -> int:
    """How much a counter rose; never negative.

    torch_xla's counters can go down: ``torch.compile``'s XLA bridge calls
    ``metrics.clear_counters()`` while it compiles. A counter below its last value was
    reset, so it counts from 0 again.
    """
    return now - before if now >= before else now


def delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """Counter increases since ``before`` (a reset counts from 0); counters that did not
    move are left out."""
    out = {}
    for name, v in now.items():
        b = before.get(name, 0)
        d = v - b if v >= b else v
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
