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
from xprof.recorder.spmd import ShardingOf, mesh_facts, sharding_reader, spmd_enabled, spmd_meta
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


InputEntry = tuple[str, tuple[int, ...], str, str] | tuple[str, tuple[int, ...], str, str, str]
"""(name, shape, dtype, src), and the sharding spec last in an SPMD run."""


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
        self._rexec_cursor = m.SampleCursor(source, m.EXECUTE_REPLICATED_TIME)
        self._size_cursor = m.SampleCursor(source, m.GRAPH_SIZE)
        self._xfer_cursor = m.SampleCursor(source, m.TRANSFER_FROM)
        self._exec_pending = 0
        self._xfer_pending = 0
        self._inputs: list[InputEntry] = []
        self._input_names: dict[str, int] = {}
        self._dtypes: dict[Any, str] = {}
        self._batch_ids: set[int] = set()
        self._sigs: dict[tuple[InputEntry, ...], int] = {}
        self._sites: dict[tuple[str, str, int, str, str | None], int] = {}
        self._prev: dict[str, int] = {}
        self.sharding_of: ShardingOf | None = None
        """Set by ``watch()`` in an SPMD run: reads a device tensor's sharding spec."""
        self._mesh: dict[str, Any] | None = None
        """The mesh last written (header or ``spmd`` record); None outside SPMD runs."""
        self.shardings_wanted = False
        """Device tensors of the step's inputs are kept for a sharding read at the barrier:
        in an SPMD run, and until the first graph runs while it is not known yet (``xprof
        run`` starts before the script calls ``xr.use_spmd()``)."""
        self._spmd_undecided = False
        self._shard_tensors: dict[int, Any] = {}
        """Index in ``_inputs`` -> the device tensor whose sharding is read at the barrier."""
        self._batch_index: dict[int, int] = {}
        """id of a CPU batch leaf -> its index in ``_inputs`` (SPMD: its ``.to`` result is sharded)."""
        self._t0 = 0.0
        self._stopped = threading.Event()
        self._flusher: threading.Thread | None = None
        self._queue: deque[dict[str, Any]] = deque()
        self._drain_lock = threading.Lock()
        """Held from popping a batch to writing it, so batches reach the file in queue order."""

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        for cursor in (self._compile_cursor, self._exec_cursor, self._rexec_cursor, self._size_cursor,
                       self._xfer_cursor):
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
            if self._mesh is not None:
                self.guard("stop", self._note_mesh)
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
                end["tail_inputs"] = [[e[0], list(e[1]), e[2], e[3]] for e in self._inputs]
            dropped = [c.name for c in (self._exec_cursor, self._rexec_cursor, self._size_cursor, self._xfer_cursor)
                       if c.dropped]
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
            bu = snap.get(m.UNCACHED, 0) - before[0]
            bc = snap.get(m.CACHED, 0) - before[1]
            if bu:
                rec["bu"] = bu
            if bc:
                rec["bc"] = bc
            if self._spmd_undecided:
                self._decide_spmd(bool(bu or bc))
            if self._shard_tensors:
                self._attach_shardings()
            if self._inputs:
                rec["sig"] = self._intern_sig()
            if d.get(m.UNCACHED):
                for ts, ns in self._compile_cursor.new():
                    self._write({"type": "compile", "i": self.step, "t": ts, "ns": ns,
                                 "at": "barrier" if ts >= tb else "step"}, flush=False)
            self._exec_pending += d.get(m.EXECUTE, 0) + d.get(m.REPLICATED, 0)
            self._xfer_pending += d.get(m.TO_CPU, 0) + d.get(m.LOCAL_SCALAR, 0)
            if bu or self._exec_pending >= SAMPLE_BATCH or self._xfer_pending >= SAMPLE_BATCH:
                self._flush_samples()
            # Steps that compiled are flushed at once; others by the flush thread.
            self._write(rec, flush=bool(bu))
            self.step += 1
            self._t0 = t1

    def _flush_samples(self) -> None:
        self._exec_pending = 0
        execs = self._exec_cursor.new()
        replicated = self._rexec_cursor.new()
        if replicated:  # SPMD: one sample per execution across all the process's devices
            execs = sorted(execs + replicated) if execs else replicated
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

    def enable_spmd(self, sharding_of: ShardingOf | None, meta: dict[str, Any]) -> None:
        """An SPMD run: read each input's sharding at the barrier; ``meta`` was written already."""
        self.sharding_of = sharding_of
        self._mesh = {k: meta[k] for k in ("mesh_shape", "axis_names") if k in meta}
        self.shardings_wanted = sharding_of is not None
        self._spmd_undecided = False

    def watch_for_spmd(self, inputs: bool) -> None:
        """SPMD is not on yet: look again at each barrier until the first graph runs."""
        self._spmd_undecided = True
        self.shardings_wanted = inputs

    def _decide_spmd(self, ran_graph: bool) -> None:
        if spmd_enabled():
            meta = spmd_meta() or {}
            self._write({"type": "spmd", **meta}, flush=False)
            self.enable_spmd(sharding_reader() if self.shardings_wanted else None, meta)
        elif ran_graph:  # use_spmd() must come before any device use: this run is not SPMD
            self._spmd_undecided = False
            self.shardings_wanted = False
            self._shard_tensors.clear()
            self._batch_index.clear()

    def on_batch(self, leaves: list[tuple[str, Any]], source: str) -> None:
        with self.lock:
            if not self._inputs:
                self._batch_ids.clear()
            for name, t in leaves:
                if self.shardings_wanted and source == "batch":
                    self._batch_index[id(t)] = len(self._inputs)
                self._add_input(name, t, source, t if source == "loader" else None)
                self._batch_ids.add(id(t))

    def is_batch_leaf(self, tensor: Any) -> bool:
        """Already recorded as a leaf of this step's loader batch (so ``.to`` adds nothing)."""
        return id(tensor) in self._batch_ids

    def on_to_device(self, tensor: Any, name: str, moved: Any = None) -> None:
        """``tensor`` (on the CPU) was moved to the device as ``moved``."""
        with self.lock:
            if id(tensor) not in self._batch_ids:
                self._add_input(name, tensor, "to", moved)

    def on_batch_leaf_moved(self, tensor: Any, moved: Any) -> None:
        """SPMD: a CPU batch leaf was moved to the device; its sharding is ``moved``'s."""
        with self.lock:
            k = self._batch_index.get(id(tensor))
            if k is not None:
                self._shard_tensors[k] = moved

    def _add_input(self, name: str, t: Any, source: str, device_tensor: Any = None) -> None:
        if len(self._inputs) >= 256:
            return
        if device_tensor is not None and self.shardings_wanted:
            self._shard_tensors[len(self._inputs)] = device_tensor
        taken = self._input_names.get(name, 0)
        self._input_names[name] = taken + 1
        if taken:
            name = f"{name}#{taken + 1}"
        dtype = t.dtype
        dt = self._dtypes.get(dtype)
        if dt is None:
            dt = self._dtypes[dtype] = dtype_name(dtype)
        self._inputs.append((name, tuple(t.shape), dt, source))

    def _attach_shardings(self) -> None:
        """SPMD: each input's sharding spec, read now that ``mark_sharding`` has run.

        One private call a sharded input a step (about 1 µs); the spec joins the signature,
        so it is written only when it changes for that input (a new ``sig`` record)."""
        read = self.sharding_of
        tensors, self._shard_tensors = self._shard_tensors, {}
        self._batch_index.clear()
        if read is None:
            return
        inputs = self._inputs
        for k, t in tensors.items():
            if k < len(inputs):
                try:
                    spec = str(read(t))
                except Exception as exc:
                    self.error("sharding", exc)
                    self.sharding_of = None
                    return
                name, shape, dt, src = inputs[k][:4]
                inputs[k] = (name, shape, dt, src, spec)

    def _note_mesh(self) -> None:
        """SPMD: write the global mesh when it differs from the one written last (it is set
        after ``watch()`` started, or replaced). Looked at with each new signature only."""
        facts = mesh_facts()
        if facts and facts != self._mesh:
            self._mesh = facts
            self._write({"type": "spmd", **facts}, flush=False)

    def _intern_sig(self) -> int:
        key = tuple(self._inputs)
        self._inputs = []
        self._input_names.clear()
        self._batch_ids.clear()
        self._batch_index.clear()
        self._shard_tensors.clear()
        sid = self._sigs.get(key)
        if sid is None:
            sid = len(self._sigs)
            self._sigs[key] = sid
            self._write({"type": "sig", "id": sid, "inputs": [_input_record(e) for e in key]}, flush=False)
            if self._mesh is not None:
                self._note_mesh()
        return sid

    # -- host reads ------------------------------------------------------------------

    def on_host_read(self, kind: str, site: Site | None, t0: float, t1: float,
                     before: tuple[int, int, int], after: tuple[int, int, int],
                     deferred: bool) -> None:
        with self.lock:
            self.syncs += 1
            rec: dict[str, Any] = {"type": "sync", "i": self.step - 1 if deferred else self.step,
                                   "site": self._intern_site(kind, site), "t0": t0, "t1": t1}
            du, dc, dx = (a - b for a, b in zip(after, before))
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
        file, line, func, via = (site.file, site.line, site.func, site.via) if site else ("?", 0, "?", None)
        key = (kind, file, line, func, via)
        sid = self._sites.get(key)
        if sid is None:
            sid = len(self._sites)
            self._sites[key] = sid
            self._write({"type": "site", "id": sid, "kind": kind, "file": file, "line": line,
                         "func": func, "via": via, "code": site.code() if site else ""}, flush=False)
        return sid


def _input_record(entry: InputEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"name": entry[0], "shape": list(entry[1]), "dtype": entry[2], "src": entry[3]}
    if len(entry) > 4:
        out["sharding"] = entry[4]  # type: ignore[misc]
    return out
