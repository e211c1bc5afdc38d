"""The recorder: turns barriers, host reads and inputs into run-file records.

Everything here runs inside the user's training process, on the hot path of their
loop. It must stay cheap (a few counter reads and one short JSON line a step), must
never raise into the user's code (its own errors are caught, logged once and written
to the run as ``error`` records), and must not change what torch_xla compiles or runs.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from typing import Any

from xprof.recorder import metrics as m
from xprof.recorder.frames import FrameClassifier, Site
from xprof.recorder.inputs import dtype_name
from xprof.runfile import RunWriter

log = logging.getLogger("xprof")

SAMPLE_BATCH = 256
"""Executions between two reads of the ExecuteTime / TensorsGraphSize sample lists.

Their ring buffers keep 1024 samples (XLA_METRICS_SAMPLES), so reading every 256
executions loses nothing in a loop with up to four syncs a step, and costs about
0.2 µs a step instead of 25-40 µs."""


FLUSH_INTERVAL = 0.25
"""Seconds between two writes of the run file. Encoding and writing every step's record
on the training thread cost about 0.1-0.2 ms of a 2 ms CPU step here (a write syscall,
and the kernel work it starts), so records are queued and a background thread encodes
and writes them every 0.25 s; a step that compiled, an error and the end are written at
once. A process killed with SIGKILL loses at most the last quarter second."""


QUEUE_LIMIT = 1024
"""Records queued at most before the training thread writes them itself."""


class _Local(threading.local):
    depth = 0
    """Inside a hooked host read: nested reads (``__format__`` calling ``item``) are one."""
    closures = 0
    """Inside an ``xm.add_step_closure`` callback: reads there are deferred, not syncs."""


InputEntry = tuple[str, tuple[int, ...], str, str]


class Recorder:
    """Keeps the state of one ``watch()``: the step in progress and what is interned."""

    def __init__(self, writer: RunWriter, source: m.MetricsSource) -> None:
        self.writer = writer
        self.counters = m.CounterReader(source)
        self.tls = _Local()
        self.lock = threading.RLock()
        self.owner = threading.get_ident()
        self.frames = FrameClassifier()
        self.active = False
        self.step = 0
        self.syncs = 0
        self.errors = 0
        self._error_keys: set[str] = set()
        self._compile_cursor = m.SampleCursor(source, m.COMPILE_TIME)
        self._exec_cursor = m.SampleCursor(source, m.EXECUTE_TIME)
        self._size_cursor = m.SampleCursor(source, m.GRAPH_SIZE)
        self._xfer_cursor = m.SampleCursor(source, m.TRANSFER_FROM)
        self._exec_pending = 0
        self._xfer_pending = 0
        self._inputs: list[InputEntry] = []
        self._input_names: dict[str, int] = {}
        self._dtypes: dict[Any, str] = {}
        self._batch_ids: set[int] = set()
        self._sigs: dict[tuple[InputEntry, ...], int] = {}
        self._sites: dict[tuple[str, str, int, str, str | None, str | None], int] = {}
        self._prev: dict[str, int] = {}
        self._opt_steps = 0
        self._dynamo_graphs = 0
        """Graphs torch.compile's XLA bridge extracted since the last barrier."""
        """Optimizer steps (``torch.optim`` post hook) since the last barrier."""
        self.barrier_frame: Any = None
        """The caller of the barrier in progress (set by the barrier hook): its site is
        recorded only when the barrier compiled, so the stack is walked only then."""
        self.grad_enabled: Any = None
        """``torch.is_grad_enabled``, set by ``watch()``: read once per barrier."""
        self._t0 = 0.0
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None
        self._queue: deque[dict[str, Any]] = deque()
        self._drain_lock = threading.Lock()
        """Held from popping a batch to writing it, so batches reach the file in queue order."""

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        for cursor in (self._compile_cursor, self._exec_cursor, self._size_cursor, self._xfer_cursor):
            self.guard("start", cursor.start)
        self._prev = self.guard("start", lambda: self.counters.snapshot(refresh=True)) or {}
        self._t0 = time.time()
        self.active = True
        self._flusher = threading.Thread(target=self._flush_loop, name="xprof-flush", daemon=True)
        self._flusher.start()

    def _flush_loop(self) -> None:
        while not self._stopped.wait(FLUSH_INTERVAL):
            self._drain(flush=True)

    def _drain(self, flush: bool) -> None:
        """Write every queued record, in order, in one call; never raises."""
        with self._drain_lock:
            batch = []
            queue = self._queue
            while queue:
                batch.append(queue.popleft())
            if (not batch and not flush) or self.writer.failed is not None:
                return
            try:
                self.writer.write_many(batch, flush=flush)
            except Exception as exc:
                self.error("write", exc)

    def stop(self, status: str, exception: str | None) -> None:
        """Write what is pending and the ``end`` record; never raises."""
        self.active = False
        self._stopped.set()
        if self._flusher is not None:
            self._flusher.join(timeout=5)
        with self.lock:
            self.guard("stop", self._flush_samples)
            self._drain(flush=False)
            tail = self.guard("stop", lambda: m.delta(self.counters.snapshot(refresh=True), self._prev))
            end: dict[str, Any] = {
                "type": "end",
                "t": time.time(),
                "status": status,
                "exception": exception,
                "steps": self.step,
                "syncs": self.syncs,
                "errors": self.errors,
            }
            if tail:
                end["tail"] = tail
            if self._inputs:
                end["tail_inputs"] = [[name, list(shape), dt, src] for name, shape, dt, src in self._inputs]
            dropped = [c.name for c in (self._exec_cursor, self._size_cursor, self._xfer_cursor) if c.dropped]
            if dropped:
                end["samples_dropped"] = dropped
            try:
                self.writer.write(end)
            except Exception as exc:  # disk full at the very end: say so, do not raise
                self.error("write", exc)
            self.writer.close()

    # -- errors ----------------------------------------------------------------------

    def error(self, where: str, exc: BaseException) -> None:
        """Record one of the profiler's own failures; log the first of each kind."""
        self.errors += 1
        key = f"{where}:{type(exc).__name__}"
        first = key not in self._error_keys
        self._error_keys.add(key)
        if first:
            log.warning("xprof: %s failed (%s: %s); training continues, recording what it can",
                        where, type(exc).__name__, exc)
        if self.writer.failed is None and (first or self.errors <= 100):
            try:
                self.writer.write({
                    "type": "error",
                    "t": time.time(),
                    "where": where,
                    "error": f"{type(exc).__name__}: {exc}",
                    "trace": "".join(traceback.format_exception(exc)[-3:]) if first else None,
                })
            except Exception:
                pass

    def guard(self, where: str, fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:
            self.error(where, exc)
            return None

    def _write(self, record: dict[str, Any], flush: bool) -> None:
        """Queue a record; ``flush`` writes it and everything queued before it now."""
        if self.writer.failed is not None:
            return
        queue = self._queue
        queue.append(record)
        if flush:
            self._drain(flush=True)
        elif len(queue) >= QUEUE_LIMIT:
            self._drain(flush=False)  # steps faster than the flush thread: bound the memory

    # -- marks -----------------------------------------------------------------------

    def mark(self, kind: str, **fields: Any) -> None:
        """Add a ``debug`` record of ``kind`` to the step in progress (integrations' marks).

        Safe from any thread: the record takes the recorder's lock, is stamped with the step
        in progress and goes through the same ordered queue as the step records, so it lands
        in the file between the step before it and the step it belongs to. Never raises.
        """
        try:
            with self.lock:
                self._write({"type": "debug", "kind": kind, "i": self.step, "t": time.time(), **fields},
                            flush=False)
        except Exception as exc:
            self.error(f"mark {kind}", exc)

    # -- barriers --------------------------------------------------------------------

    def on_barrier(self, tb: float, before: tuple[int, int], kind: str) -> None:
        """A step barrier just finished: close the step in progress and start the next."""
        t1 = time.time()
        frame, self.barrier_frame = self.barrier_frame, None  # never keep the user's frame alive
        with self.lock:
            snap = self.counters.snapshot()
            if snap.get(m.UNCACHED, 0) != self._prev.get(m.UNCACHED, 0):
                snap = self.counters.snapshot(refresh=True)  # a new fallback op compiles too
            d = m.delta(snap, self._prev)
            self._prev = snap
            rec: dict[str, Any] = {"type": "step", "i": self.step, "t0": self._t0, "tb": tb,
                                   "t1": t1, "barrier": kind}
            if d:
                rec["c"] = d
            bu = m.increase(snap.get(m.UNCACHED, 0), before[0])
            bc = m.increase(snap.get(m.CACHED, 0), before[1])
            if bu:
                rec["bu"] = bu
            if bu or d.get(m.UNCACHED):
                self._barrier_site(rec, frame)
            if bc:
                rec["bc"] = bc
            self._step_evidence(rec, kind)
            if self._inputs and (bu or bc) and kind != "dynamo":
                # An empty barrier (torch_xla.compile's entry sync, a loader's first next())
                # runs nothing: the inputs moved before it feed the next barrier's graph.
                rec["sig"] = self._intern_sig()
            if d.get(m.UNCACHED):
                for ts, ns in self._compile_cursor.new():
                    self._write({"type": "compile", "i": self.step, "t": ts, "ns": ns,
                                 "at": "barrier" if ts >= tb else "step"}, flush=False)
            self._exec_pending += d.get(m.EXECUTE, 0)
            self._xfer_pending += d.get(m.TO_CPU, 0) + d.get(m.LOCAL_SCALAR, 0)
            if bu or self._exec_pending >= SAMPLE_BATCH or self._xfer_pending >= SAMPLE_BATCH:
                self._flush_samples()
            # Steps that compiled are flushed at once; others by the flush thread.
            self._write(rec, flush=bool(bu))
            self.step += 1
            self._t0 = t1

    def on_dynamo_graph(self) -> None:
        self._dynamo_graphs += 1

    def write_dynamo_guards(self, failures: list[dict[str, Any]]) -> None:
        """torch._dynamo's failed guards, once at the end of the run."""
        if failures:
            with self.lock:
                self._write({"type": "dynamo", "t": time.time(), "guard_failures": failures}, flush=False)

    def on_optimizer_step(self) -> None:
        """An ``optimizer.step()`` finished (any optimizer, any caller): one counter bump."""
        self._opt_steps += 1

    def _barrier_site(self, rec: dict[str, Any], frame: Any) -> None:
        """Where a barrier that compiled was asked for (a library's logging, the user's line)."""
        if frame is not None:
            rec["site"] = self._intern_site("barrier", self.frames.user_site(frame))

    def _step_evidence(self, rec: dict[str, Any], kind: str) -> None:
        """What tells a training step from the other barriers: optimizer steps since the
        last barrier (``o``) and grad mode at the barrier (``ng`` when disabled)."""
        if self._opt_steps:
            rec["o"] = self._opt_steps
            self._opt_steps = 0
        if self._dynamo_graphs:
            rec["dz"] = self._dynamo_graphs
            self._dynamo_graphs = 0
        self._dynamo_graphs = 0
        """Graphs torch.compile's XLA bridge extracted since the last barrier."""
        grad = self.grad_enabled
        if grad is not None and not grad():
            rec["ng"] = 1

    def _flush_samples(self) -> None:
        self._exec_pending = 0
        execs = self._exec_cursor.new()
        if execs:
            self._write({"type": "exec", "samples": [list(s) for s in execs]}, flush=False)
        if self._xfer_pending:
            self._xfer_pending = 0
            xfer = self._xfer_cursor.new()
            if xfer:
                self._write({"type": "xfer", "samples": [list(s) for s in xfer]}, flush=False)
        sizes = self._size_cursor.new()
        if sizes:
            self._write({"type": "graph_sizes", "samples": [list(s) for s in sizes]}, flush=False)

    # -- inputs ----------------------------------------------------------------------

    def on_batch(self, leaves: list[tuple[str, Any]], source: str) -> None:
        with self.lock:
            if not self._inputs:
                self._batch_ids.clear()
            for name, t in leaves:
                self._add_input(name, t, source)
                self._batch_ids.add(id(t))

    def on_call_args(self, leaves: list[tuple[str, Any]]) -> None:
        """The tensor arguments of a ``torch_xla.compile`` call: inputs of the step it runs.

        A tensor already recorded under the same name and shape (moved just before the
        call) is not added twice."""
        with self.lock:
            have = {(name, shape) for name, shape, _, _ in self._inputs}
            for name, t in leaves:
                if (name, tuple(t.shape)) not in have:
                    self._add_input(name, t, "arg")

    def is_batch_leaf(self, tensor: Any) -> bool:
        """Already recorded as a leaf of this step's loader batch (so ``.to`` adds nothing)."""
        return id(tensor) in self._batch_ids

    def on_to_device(self, tensor: Any, name: str) -> None:
        with self.lock:
            if id(tensor) not in self._batch_ids:
                self._add_input(name, tensor, "to")

    def _add_input(self, name: str, t: Any, source: str) -> None:
        if len(self._inputs) >= 256:
            return
        taken = self._input_names.get(name, 0)
        self._input_names[name] = taken + 1
        if taken:
            name = f"{name}#{taken + 1}"
        dtype = t.dtype
        dt = self._dtypes.get(dtype)
        if dt is None:
            dt = self._dtypes[dtype] = dtype_name(dtype)
        self._inputs.append((name, tuple(t.shape), dt, source))

    def _intern_sig(self) -> int:
        key = tuple(self._inputs)
        self._inputs = []
        self._input_names.clear()
        self._batch_ids.clear()
        sid = self._sigs.get(key)
        if sid is None:
            sid = len(self._sigs)
            self._sigs[key] = sid
            self._write({"type": "sig", "id": sid, "inputs": [
                {"name": n, "shape": list(s), "dtype": dt, "src": src} for n, s, dt, src in key
            ]}, flush=False)
        return sid

    # -- host reads ------------------------------------------------------------------

    def on_host_read(self, kind: str, site: Site | None, t0: float, t1: float,
                     before: tuple[int, int, int], after: tuple[int, int, int],
                     deferred: bool) -> None:
        with self.lock:
            self.syncs += 1
            rec: dict[str, Any] = {"type": "sync", "i": self.step - 1 if deferred else self.step,
                                   "site": self._intern_site(kind, site), "t0": t0, "t1": t1}
            du, dc, dx = (m.increase(a, b) for a, b in zip(after, before))
            if du:
                rec["u"] = du
            if dc:
                rec["c"] = dc
            if dx:
                rec["x"] = dx
            if deferred:
                rec["deferred"] = True
            if threading.get_ident() != self.owner:
                rec["thread"] = threading.current_thread().name
            self._write(rec, flush=False)

    def _intern_site(self, kind: str, site: Site | None) -> int:
        file, line, func, via, inner = ((site.file, site.line, site.func, site.via, site.inner) if site
                                        else ("?", 0, "?", None, None))
        key = (kind, file, line, func, via, inner)
        sid = self._sites.get(key)
        if sid is None:
            sid = len(self._sites)
            self._sites[key] = sid
            rec = {"type": "site", "id": sid, "kind": kind, "file": file, "line": line,
                   "func": func, "via": via, "code": site.code() if site else ""}
            if inner:
                rec["inner"] = inner
            if site is not None and site.chain:
                rec["chain"] = list(site.chain)
            self._write(rec, flush=False)
        return sid
