"""The recorder: turns barriers, host reads and inputs into run-file records.

Everything here runs inside the user's training process. It is split in two:

- the **hooks' side** (the training thread, and any thread that reads a tensor) only
  takes what cannot wait: the clock, the counters, the input shapes, the user's line of
  a host read. It appends that as one tuple to a queue (``deque.append`` is atomic, so no
  lock is taken) and returns;
- the **writer thread** turns the queued tuples into records a few times a second:
  counter deltas, signature and site interning, compile and sample reads, naming, JSON,
  the write itself, and the live notices (:mod:`xprof.recorder.live`).

It must never raise into the user's code (its own errors are caught, logged once and
written to the run as ``error`` records), and must not change what torch_xla compiles or
runs. The records are the same as when they were built on the training thread.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from operator import sub
from typing import Any, Protocol

from xprof.recorder import metrics as m
from xprof.recorder.frames import FrameClassifier, Site
from xprof.recorder.inputs import dtype_name
from xprof.recorder.spmd import ShardingsOf, mesh_facts, shardings_reader, spmd_enabled, spmd_meta
from xprof.runfile import EncodedRecord, RunWriter, encode_record

log = logging.getLogger("xprof")

SAMPLE_BATCH = 256
"""Executions between two reads of the ExecuteTime / TensorsGraphSize sample lists.

Their ring buffers keep 1024 samples (XLA_METRICS_SAMPLES), so reading every 256
executions loses nothing in a loop with up to four syncs a step. The writer thread reads
them (copying a full ring costs 25-40 µs)."""


FLUSH_INTERVAL = 0.25
"""Seconds between two passes of the writer thread. A step that compiled wakes it at
once; a process killed with SIGKILL loses at most the last quarter second."""


DRAIN_CHUNK = 512
"""Events turned into records and written per write call (bounds the text built at once)."""

WAKE_AT = 512
"""Events queued before the writer thread is woken early (a loop faster than 2k steps a
second; a 1 ms step queues ~250 between two passes)."""

QUEUE_LIMIT = 4096
"""Events queued at most before the thread that queues one converts them itself (the
writer thread cannot keep up: bound the memory, ~2 MB at most)."""

NO_BARRIER_AFTER = 3
"""Optimizer steps with no step barrier yet in the run after which a ``no_barrier`` debug
record is written (a loop that never calls ``torch_xla.sync()``; the live notice)."""

RAW_SIG_LIMIT = 65536
"""Raw signatures remembered for a fast lookup (a run with more still interns correctly)."""

STEADY_LIMIT = 4096
"""Kinds of steady step remembered with their encoded line (see ``Recorder._steady_step``)."""

_STEP_HEAD = '{"type":"step","i":%d,"t0":%s,"tb":%r,"t1":%s'


class _Local(threading.local):
    depth = 0
    """Inside a hooked host read: nested reads (``__format__`` calling ``item``) are one."""
    closures = 0
    """Inside an ``xm.add_step_closure`` callback: reads there are deferred, not syncs."""


InputEntry = tuple[str, tuple[int, ...], str, str] | tuple[str, tuple[int, ...], str, str, str]
"""``(name, shape, dtype, source)``, and in an SPMD run the sharding spec last."""
RawInput = tuple[str, Any, Any, str] | tuple[str, Any, Any, str, str]
"""``(name, shape, dtype, source)`` as the hook saw it: ``torch.Size`` and ``torch.dtype``
objects, named and deduplicated on the writer thread; an SPMD run adds the sharding spec
read at the barrier."""

_MESH_KEYS = ("mesh_shape", "axis_names")

_STEP = 0
_SYNC = 1
_MARK = 2
_RECORD = 3


class Observer(Protocol):
    """Sees every record the writer thread writes, in file order (the live notices)."""

    def feed(self, records: list[dict[str, Any]]) -> None: ...


class Recorder:
    """Keeps the state of one ``watch()``: the step in progress, what is queued and interned."""

    def __init__(self, writer: RunWriter, source: m.MetricsSource,
                 observer: Observer | None = None) -> None:
        self.writer = writer
        self.counters = m.CounterReader(source)
        self.tls = _Local()
        self.owner = threading.get_ident()
        self.frames = FrameClassifier()
        self.observer = observer
        self.active = False
        self.step = 0
        """Barriers seen so far (the index of the step in progress)."""
        self.syncs = 0
        self.errors = 0
        self.ended: float | None = None
        """When the ``end`` record was written."""
        self.lost_at: int | None = None
        """The step at which the run file was found removed (see :meth:`_check_file`)."""
        self.tail_step = False
        """The ``end`` record counts a last training step after the last barrier (its ops ran
        one by one and no barrier followed: ``tail_opt`` and ``tail_graphs``)."""
        self.tail_opt = 0
        """Optimizer steps after the last barrier (set by :meth:`stop`)."""
        self.tail_compile_s: list[float] = []
        """Seconds of each compile after the last barrier (set by :meth:`stop`)."""
        self._error_lock = threading.Lock()
        self._error_keys: set[str] = set()
        # -- the hooks' side (the training thread) --
        self._events: deque[tuple[Any, ...]] = deque()
        self._inputs: list[RawInput] = []
        self._eval_cut = 0
        """Inputs before this index fed an evaluation whose graph ran at a host read mid-step
        (an eval loop with no barrier of its own, its accuracy read with ``.item()``): not
        the barrier graph's inputs, when the step moved more after it."""
        self._batch_ids: set[int] = set()
        self._extra: dict[str, Any] | None = None
        self._opt_steps = 0
        """Optimizer steps (``torch.optim`` post hook) since the last barrier."""
        self._dynamo_graphs = 0
        """Graphs torch.compile's XLA bridge extracted since the last barrier."""
        self._backwards = 0
        """Backward passes (``torch.autograd.backward``/``grad``) since the last barrier."""
        self.eval_mode = False
        """The last outermost ``Module.train(mode)`` call set eval mode (``model.eval()``)."""
        self.barrier_frame: Any = None
        """The caller of the barrier in progress (set by the barrier hook): its site is
        recorded only when the barrier compiled, so the stack is walked only then."""
        self.grad_enabled: Any = None
        """``torch.is_grad_enabled``, set by ``watch()``: read once per barrier."""
        self.grad_turned_off = False
        """``torch.no_grad()`` / ``torch.inference_mode()`` entered since the last barrier (an
        eval forward under no_grad whose barrier, the next batch's, is outside it)."""
        self._t0 = 0.0
        self._last_uncached = 0
        self._end_compiles = 0
        """Compiles (uncached + cached) counted when the last barrier ended."""
        self._read_compiles = 0
        """Compiles inside host reads and step closures since the last barrier (any thread)."""
        self._exec_due = False
        """The last barrier launched a graph whose execution the counter may not have counted
        yet when it returned (torch_xla runs it asynchronously): a read that begins before it
        is counted sees it inside its window, and it is the barrier's, not the read's."""
        self._exec_mark = 0
        """The execution count when the last barrier returned."""
        # -- SPMD (the hooks' side) --
        self.spmd = False
        """An SPMD run: set once, by ``watch()`` or at the barrier that finds it on."""
        self.keep_devices = False
        """Keep the device tensors of the step's inputs for a sharding read at the barrier:
        in an SPMD run that records inputs, and, while it is not known yet whether the run
        is one (``xprof run`` starts before the script calls ``xr.use_spmd()``), until the
        first graph runs."""
        self._want_inputs = False
        self._spmd_undecided = False
        self._read_shardings: ShardingsOf | None = None
        self._devices: list[tuple[int, Any]] = []
        """(index in ``_inputs``, the device tensor whose sharding is read at the barrier)."""
        self._batch_index: dict[int, int] = {}
        """id of a CPU batch leaf -> its index in ``_inputs`` (its ``.to`` result is sharded)."""
        # -- the writer thread's side --
        self._mesh: dict[str, Any] = {}
        """SPMD: the mesh last written (header or ``spmd`` record)."""
        self._compile_cursor = m.SampleCursor(source, m.COMPILE_TIME)
        self._op_compile_cursor = m.SampleCursor(source, m.EAGER_COMPILE_TIME)
        self._exec_cursor = m.SampleCursor(source, m.EXECUTE_TIME)
        self._rexec_cursor = m.SampleCursor(source, m.EXECUTE_REPLICATED_TIME)
        self._size_cursor = m.SampleCursor(source, m.GRAPH_SIZE)
        self._xfer_cursor = m.SampleCursor(source, m.TRANSFER_FROM)
        self._compile_buf: list[tuple[float, float, str]] = []
        """Compile samples not written yet: (end, ns, ``at``; "" until the step is known)."""
        self._steps_written = 0
        """Step events turned into records: the index of the step a read or mark belongs to."""
        self._exec_pending = 0
        self._xfer_pending = 0
        self._dtypes: dict[Any, str] = {}
        self._sigs: dict[tuple[InputEntry, ...], int] = {}
        self._raw_sigs: dict[tuple[Any, ...], int] = {}
        """The same signatures keyed by the raw inputs the hooks queued (writer thread)."""
        self._sites: dict[tuple[Any, ...], int] = {}
        self._prev: dict[str, int] = {}
        """The counters at the last step written (those not zero), by name."""
        self._prev_names: tuple[str, ...] = ()
        self._prev_vals: list[int] = []
        """The same, as the barrier read them; ``_prev`` is rebuilt from these when stale."""
        self._prev_stale = False
        self._steady: dict[tuple[Any, ...], tuple[str, dict[str, Any], int, int]] = {}
        """Steady steps seen (see :meth:`_steady_step`), for the counter names in ``_steady_names``."""
        self._steady_names: tuple[str, ...] = ()
        self._t_text: tuple[float, str] = (-1.0, "")
        """The last ``t1`` written and its text: the next step's ``t0`` is the same time."""
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._flusher: threading.Thread | None = None
        self._drain_lock = threading.Lock()
        """Held from popping events to writing their records, so the file keeps queue order."""
        # -- hooks installed once a counter shows they can matter (either thread) --
        self._arms: list[tuple[str, str, Callable[[], None]]] = []
        self._arm_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        for cursor in (self._compile_cursor, self._op_compile_cursor, self._exec_cursor, self._rexec_cursor,
                       self._size_cursor, self._xfer_cursor):
            self.guard("start", cursor.start)
        self._prev = self.guard("start", lambda: self.counters.snapshot(refresh=True)) or {}
        self._last_uncached = self._prev.get(m.UNCACHED, 0)
        self._end_compiles = self._last_uncached + self._prev.get(m.CACHED, 0)
        self._check_arms(at_start=True)
        self._t0 = time.time()
        self.active = True
        self._flusher = threading.Thread(target=self._flush_loop, name="xprof-writer", daemon=True)
        self._flusher.start()

    def _flush_loop(self) -> None:
        wake, stopped = self._wake, self._stopped
        while not stopped.is_set():
            wake.wait(FLUSH_INTERVAL)
            wake.clear()
            if stopped.is_set():
                break
            if self.guard("counters", self.counters.refresh):  # new fallback counters, off the hot path
                self._check_arms()
            self._drain(flush=True)
            self._check_file()

    def _check_file(self) -> None:
        """Say at once when the run file was removed (its folder deleted mid-run): writes
        into it would still succeed, into a file nobody can open. From then on nothing is
        written, and ``watch()`` ends by saying the run file was not written."""
        if self.lost_at is not None or self.writer.failed is not None or not self.writer.gone():
            return
        self.lost_at = self.step
        self.writer.failed = FileNotFoundError(f"{self.writer.path} was removed")
        log.warning("xprof: the run file %s was removed during the run (at step %d): nothing more is "
                    "recorded and the run file will not be written; training continues",
                    self.writer.path, self.step)

    def forget_in_child(self) -> None:
        """In a process forked while recording (``os.fork()``, a DataLoader worker): record
        nothing and never write the parent's run file, whatever the child does on its way out."""
        self.active = False
        self._stopped.set()
        self._events.clear()
        self._drain_lock = threading.Lock()
        self._error_lock = threading.Lock()
        self.observer = None
        self.writer.forget_in_child()

    def _drain(self, flush: bool) -> None:
        """Turn the events queued when it is called into records and write them, in order;
        never raises. Events queued meanwhile wait for the next drain, so a thread that
        keeps queueing cannot keep the caller here."""
        steady = self._steady_step
        with self._drain_lock:
            events = self._events
            left = len(events)
            while True:
                records: list[dict[str, Any]] = []
                n = 0
                while left and n < DRAIN_CHUNK:
                    ev = events.popleft()
                    n += 1
                    left -= 1
                    try:
                        if ev[0] == _STEP:
                            if not steady(ev, records):
                                self._step_records(ev, records)
                        elif ev[0] == _SYNC:
                            self._sync_records(ev, records)
                        else:
                            record = ev[1]
                            if ev[0] == _MARK:
                                record["i"] = self._steps_written
                            records.append(record)
                    except Exception as exc:
                        self.error(("barrier", "sync hook", "mark", "write")[ev[0]], exc)
                last = not left
                if self.writer.failed is not None:
                    return
                if records or (flush and last):
                    try:
                        self.writer.write_many(records, flush=flush and last)
                    except Exception as exc:
                        self.error("write", exc)
                if self.observer is not None and records:
                    try:
                        self.observer.feed(records)
                    except Exception as exc:
                        self.error("live notices", exc)
                if last:
                    return

    def flush(self) -> None:
        """Write everything queued now (the writer thread does it a few times a second)."""
        self._drain(flush=True)

    def stop(self, status: str, exception: str | None) -> None:
        """Write what is pending and the ``end`` record; never raises."""
        self.active = False
        self._stopped.set()
        self._wake.set()
        if self._flusher is not None:
            self._flusher.join(timeout=5)
        self._drain(flush=False)
        self._check_file()
        with self._drain_lock:
            records: list[dict[str, Any]] = []
            samples: list[dict[str, Any]] = []
            self.guard("stop", lambda: self._tail_compiles(records))
            self.guard("stop", lambda: self._flush_samples(samples))
            records += samples
            self.guard("stop", lambda: self._spmd_at_stop(records))
            if records and self.writer.failed is None:
                try:
                    self.writer.write_many(records, flush=False)
                except Exception as exc:
                    self.error("write", exc)
            if self.observer is not None and samples:
                # (the last execution samples: what the reads of the last steps cost; the tail's
                # compiles reach the exit summary apart, see Recorder.tail_compile_s)
                try:
                    self.observer.feed(samples)
                except Exception as exc:
                    self.error("live notices", exc)
            tail = self.guard("stop", lambda: m.delta(self.counters.snapshot(refresh=True), self._prev_snapshot()))
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
                graphs = tail.get(m.UNCACHED, 0) + tail.get(m.CACHED, 0) - self._read_compiles
                if graphs > 0:
                    end["tail_graphs"] = graphs  # ops run after the last barrier (eager mode)
            if self._opt_steps:
                end["tail_opt"] = self._opt_steps
            self.tail_step = bool(end.get("tail_opt") and end.get("tail_graphs"))
            self.tail_opt = int(end.get("tail_opt") or 0)
            if self._inputs:
                end["tail_inputs"] = [[e[0], list(e[1]), e[2], e[3]] for e in self._name_inputs(self._inputs)]
            dropped = [c.name for c in (self._op_compile_cursor, self._exec_cursor, self._rexec_cursor,
                                        self._size_cursor, self._xfer_cursor) if c.dropped]
            if dropped:
                end["samples_dropped"] = dropped
            self.ended = end["t"]
            try:
                if self.writer.failed is None:
                    self.writer.write(end)
            except Exception as exc:  # disk full at the very end: say so, do not raise
                self.error("write", exc)
            self.writer.close()

    # -- errors ----------------------------------------------------------------------

    def error(self, where: str, exc: BaseException) -> None:
        """Record one of the profiler's own failures; log the first of each kind."""
        key = f"{where}:{type(exc).__name__}"
        with self._error_lock:
            self.errors += 1
            first = key not in self._error_keys
            self._error_keys.add(key)
            count = self.errors
        if first:
            log.warning("xprof: %s failed (%s: %s); training continues, recording what it can",
                        where, type(exc).__name__, exc)
        if self.writer.failed is None and (first or count <= 100):
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

    # -- marks -----------------------------------------------------------------------

    def mark(self, kind: str, **fields: Any) -> None:
        """Add a ``debug`` record of ``kind`` to the step in progress (integrations' marks).

        Safe from any thread: the mark goes through the same ordered queue as the steps,
        and the writer thread stamps it with the index of the next step it writes, so it
        lands in the file between the step before it and the step it belongs to (taken
        from the queue order, not from a counter another thread may be moving). Never raises.
        """
        try:
            self._events.append((_MARK, {"type": "debug", "kind": kind, "i": -1, "t": time.time(), **fields}))
            if len(self._events) >= WAKE_AT:
                self._queue_full()  # a thread marking faster than the writer waits for it
        except Exception as exc:
            self.error(f"mark {kind}", exc)

    # -- hooks armed by evidence -------------------------------------------------------

    def arm_on_counter(self, counter: str, hook: str, install: Callable[[], None]) -> None:
        """Call ``install`` once torch_xla's ``counter`` exists (now, if it does at start).

        For a hook on a call so common that wrapping it would cost every training step
        (``Tensor.__getitem__``: a data loader indexes each sample) and that only matters
        after torch_xla has run a given op (``aten::nonzero``, which boolean-mask indexing
        of an XLA tensor runs on the CPU). The counter appears when that op first runs; the
        barrier that follows (or the writer thread, within a quarter second) installs the
        hook, and a ``debug`` record of kind ``hook`` says from which step it is on."""
        with self._arm_lock:
            self._arms.append((counter, hook, install))

    def _check_arms(self, at_start: bool = False) -> None:
        """Install the armed hooks whose counter the counter reader now tracks; never raises.
        Not once the recording has stopped: its patches are being restored."""
        if self._stopped.is_set():
            return
        names = self.counters.names
        with self._arm_lock:
            due = [a for a in self._arms if a[0] in names]
            if not due:
                return
            self._arms = [a for a in self._arms if a[0] not in names]
        for counter, hook, install in due:
            try:
                install()
            except Exception as exc:
                self.error(f"{hook} hook", exc)
                continue
            if not at_start:
                self.mark("hook", hook=hook, counter=counter)

    # -- the hooks' side: barriers ---------------------------------------------------

    def on_barrier(self, tb: float, before: tuple[int, ...], kind: str) -> None:
        """A step barrier just finished: queue the step in progress and start the next.

        Training thread only. Reads the clock and the counters; everything else waits.
        """
        t1 = time.time()
        frame, self.barrier_frame = self.barrier_frame, None  # never keep the user's frame alive
        counters = self.counters
        names = counters.names
        vals = counters.read(names)
        uncached = vals[0]
        site = None
        if uncached != self._last_uncached:
            # This step compiled: a new fallback op compiles too, so look for its counter
            # now, to put its first calls in this step (the cause of the compile).
            self._last_uncached = uncached
            if counters.refresh():
                names = counters.names
                vals = counters.read(names)
                if self._arms:
                    self._check_arms()
            if frame is not None:
                site = self.frames.user_site(frame)  # who asked for a barrier that compiled
        ran = uncached != before[0] or vals[1] != before[1]
        # Graphs run between the last barrier and this one, outside the host reads: ops run
        # one by one (eager mode), or a sync xprof does not hook. (Compiles are counted on
        # the calling thread, so, unlike executions, they never spill into the next step.)
        mid = before[0] + before[1] - self._end_compiles - self._read_compiles
        self._end_compiles = uncached + vals[1]
        self._read_compiles = 0
        k = len(m.BASE_COUNTERS)  # (an SPMD run counts its executions in ExecuteReplicated too)
        self._exec_mark = vals[2] + (vals[k] if len(names) > k and names[k] == m.REPLICATED else 0)
        # Its graph ran (was compiled or looked up) but no execution was counted by now.
        self._exec_due = ran and len(before) > 2 and self._exec_mark == before[2]
        if mid < 0:
            mid = 0  # a counter reset (torch.compile's bridge clears them)
        if self._spmd_undecided:
            self._decide_spmd(ran)
        inputs: list[RawInput] | None = self._inputs
        if inputs and (ran or mid) and kind not in ("dynamo", "compile_entry"):
            self._inputs = []
            self._batch_ids.clear()
            cut, self._eval_cut = self._eval_cut, 0
            if 0 < cut < len(inputs):
                inputs = inputs[cut:]
                self._devices = [(k - cut, t) for k, t in self._devices if k >= cut]
            if self._devices:
                self._read_input_shardings(inputs)
        else:
            # An empty barrier (a loader's first next()) in a step that ran nothing: the
            # inputs moved before it feed the next graph. So do those moved before
            # torch_xla.compile's entry sync, whatever it ran (ops left pending before the
            # call, or eager ones): they are the compiled function's, whose graph runs at
            # its exit ("compile").
            inputs = None
        extra, self._extra = self._extra, None
        opt, self._opt_steps = self._opt_steps, 0
        graphs, self._dynamo_graphs = self._dynamo_graphs, 0
        backwards, self._backwards = self._backwards, 0
        grad = self.grad_enabled
        no_grad = grad is not None and not grad()
        turned_off, self.grad_turned_off = self.grad_turned_off, False
        self._events.append((_STEP, self.step, self._t0, tb, t1, kind, before, names, vals,
                             inputs, extra, site, opt, graphs, no_grad, self.eval_mode, backwards, mid,
                             turned_off))
        self.step += 1
        self._t0 = t1
        if uncached != before[0]:
            self._wake.set()  # a step that compiled reaches the file at once
        elif len(self._events) >= WAKE_AT:
            self._queue_full()

    def note_step(self, key: str, value: Any) -> None:
        """Attach a field to the step in progress (written into its ``step`` record)."""
        extra = self._extra
        if extra is None:
            extra = self._extra = {}
        extra[key] = value

    def on_optimizer_step(self) -> None:
        """An ``optimizer.step()`` finished (any optimizer, any caller): one counter bump."""
        self._opt_steps += 1
        if self._opt_steps == NO_BARRIER_AFTER and self.step == 0:
            self._no_barrier_yet()

    def _no_barrier_yet(self) -> None:
        """The third optimizer step and no barrier yet: unless graphs ran outside host reads
        (eager mode: each op runs as it comes, nothing waits for a barrier), say so at once
        (a ``no_barrier`` mark for the live notices). Never raises."""
        try:
            uncached, cached = self.counters.compile_counts()
            if uncached + cached - self._end_compiles - self._read_compiles <= 0:
                self.mark("no_barrier", opt=self._opt_steps)
        except Exception as exc:
            self.error("optimizer hook", exc)

    def on_backward(self) -> None:
        """A backward pass started (any thread: one counter bump)."""
        self._backwards += 1

    def on_dynamo_graph(self) -> None:
        self._dynamo_graphs += 1

    def write_dynamo_guards(self, failures: list[dict[str, Any]]) -> None:
        """torch._dynamo's failed guards, once at the end of the run (in queue order)."""
        if failures:
            self._events.append((_RECORD, {"type": "dynamo", "t": time.time(), "guard_failures": failures}))

    # -- the hooks' side: inputs -----------------------------------------------------

    def on_batch(self, leaves: list[tuple[str, Any]], source: str) -> None:
        """Training thread only: the named tensor leaves of a loader batch."""
        inputs = self._inputs
        if not inputs:
            self._batch_ids.clear()
        ids = self._batch_ids
        room = 256 - len(inputs)
        first = len(inputs)
        for name, t in leaves[:room] if room < len(leaves) else leaves:
            inputs.append((name, t.shape, t.dtype, source))
            ids.add(id(t))
        if self.keep_devices:
            self._keep_batch_devices(leaves[:room], source, first)

    def on_call_args(self, leaves: list[tuple[str, Any]]) -> None:
        """Training thread only: the tensor arguments of a ``torch_xla.compile`` call,
        inputs of the step it runs. A tensor already recorded under the same name and
        shape (moved just before the call), or as a leaf of this step's loader batch (an
        ``MpDeviceLoader`` batch passed on as ``fn(data, target)``), is not added twice."""
        inputs = self._inputs
        have = {(e[0], tuple(e[1])) for e in inputs}
        batch = self._batch_ids if inputs else ()
        keep = self.keep_devices
        for name, t in leaves:
            if len(inputs) >= 256:
                break
            if (name, tuple(t.shape)) not in have and id(t) not in batch:
                if keep:
                    self._devices.append((len(inputs), t))
                inputs.append((name, t.shape, t.dtype, "arg"))

    def is_batch_leaf(self, tensor: Any) -> bool:
        """Already recorded as a leaf of this step's loader batch (so ``.to`` adds nothing)."""
        return id(tensor) in self._batch_ids

    def on_to_device(self, tensor: Any, name: str, moved: Any = None) -> None:
        """Training thread only: a CPU tensor moved to the device (as ``moved``) outside a batch."""
        if len(self._inputs) < 256 and id(tensor) not in self._batch_ids:
            if self.keep_devices and moved is not None:
                self._devices.append((len(self._inputs), moved))
            self._inputs.append((name, tensor.shape, tensor.dtype, "to"))

    def on_batch_leaf_moved(self, tensor: Any, moved: Any) -> None:
        """Training thread only, SPMD: a CPU batch leaf was moved to the device as ``moved``,
        the tensor ``mark_sharding`` shards (read at the barrier)."""
        k = self._batch_index.get(id(tensor))
        if k is not None:
            self._devices.append((k, moved))

    # -- the hooks' side: SPMD -------------------------------------------------------

    def enable_spmd(self, inputs: bool, meta: dict[str, Any]) -> None:
        """Before :meth:`start`: an SPMD run, whose header (``meta``) is written already;
        each input's sharding is read at the barrier when ``inputs`` are recorded."""
        self.spmd = True
        self._spmd_undecided = False
        self.counters.count_replicated()
        self._mesh = {k: meta[k] for k in _MESH_KEYS if k in meta}
        self._read_shardings = shardings_reader() if inputs else None
        self.keep_devices = self._read_shardings is not None

    def watch_for_spmd(self, inputs: bool) -> None:
        """Before :meth:`start`: SPMD is off now, but the script may switch it on before
        its first device use (``xprof run``): look again at each barrier until a graph runs,
        keeping the inputs' device tensors meanwhile."""
        self._spmd_undecided = True
        self._want_inputs = inputs
        self.keep_devices = inputs

    def _decide_spmd(self, ran_graph: bool) -> None:
        if spmd_enabled():
            self.spmd = True
            self._spmd_undecided = False
            # From the next barrier on (this one's counters are read already): the graphs
            # that ran before it count in the next step's ExecuteReplicated delta.
            self.counters.count_replicated()
            meta = spmd_meta() or {}
            # The mesh is the writer thread's to write (with the step's signature).
            self._events.append((_RECORD, {"type": "spmd", **{k: v for k, v in meta.items()
                                                              if k not in _MESH_KEYS}}))
            self._read_shardings = shardings_reader() if self._want_inputs else None
            self.keep_devices = self._read_shardings is not None
            if not self.keep_devices:
                self._devices.clear()
                self._batch_index.clear()
        elif ran_graph:  # use_spmd() comes before any device use: this run is not SPMD
            self._spmd_undecided = False
            self.keep_devices = False
            self._devices.clear()
            self._batch_index.clear()

    def _keep_batch_devices(self, leaves: list[tuple[str, Any]], source: str, first: int) -> None:
        if not first:
            self._batch_index.clear()
        if source == "batch":  # CPU tensors: their .to(device) results get sharded
            for k, (_, t) in enumerate(leaves):
                self._batch_index[id(t)] = first + k
        else:  # MpDeviceLoader's batches are on the device, sharded by its input_sharding
            self._devices.extend((first + k, t) for k, (_, t) in enumerate(leaves))

    def _read_input_shardings(self, inputs: list[RawInput]) -> None:
        """SPMD: each input's sharding spec, read now that ``mark_sharding`` has run.

        One private call for all of the step's inputs (2.4 µs for 3 on the CPU); the spec
        joins the input's signature, so it reaches the file only when it changes."""
        devices, self._devices = self._devices, []
        self._batch_index.clear()
        read = self._read_shardings
        if read is None:
            return
        try:
            specs = read([t for _, t in devices])
        except Exception as exc:
            self._read_shardings = None
            self.keep_devices = False
            self.error("sharding read", exc)
            return
        n = len(inputs)
        for (k, _), spec in zip(devices, specs):
            if k < n:
                e = inputs[k]
                inputs[k] = (e[0], e[1], e[2], e[3], spec)

    # -- the hooks' side: host reads -------------------------------------------------

    def on_host_read(self, kind: str, site: Site | None, t0: float, t1: float,
                     before: tuple[int, int, int], after: tuple[int, int, int],
                     deferred: bool) -> None:
        """Any thread: one host read of an XLA tensor, with the counters around it."""
        thread = None if threading.get_ident() == self.owner else threading.current_thread().name
        if self._exec_due and after[2] != before[2]:
            self._exec_due = False
            if before[2] == self._exec_mark:
                # The barrier's graph was counted while this read waited: not a graph it ran.
                after = (after[0], after[1], after[2] - 1)
        if not deferred:  # (a step closure's are counted by the closure: see on_closure_compiles)
            self._read_compiles += after[0] - before[0] + after[1] - before[1]
            if after[2] != before[2] and thread is None and self._inputs and not self._backwards:
                # A graph ran at a read before any backward pass of the step, in eval mode or
                # with grad turned off: an evaluation's (see _eval_cut).
                grad = self.grad_enabled
                if self.eval_mode or self.grad_turned_off or (grad is not None and not grad()):
                    self._eval_cut = len(self._inputs)
        self._events.append((_SYNC, kind, site, t0, t1, before, after, deferred, thread))
        if len(self._events) >= WAKE_AT:
            self._queue_full()

    def on_closure_compiles(self, n: int) -> None:
        """Any thread: a step closure compiled or looked up ``n`` graphs (its reads' and the
        ops it ran eagerly): not graphs of the step in progress."""
        self._read_compiles += n

    def _queue_full(self) -> None:
        if len(self._events) >= QUEUE_LIMIT:
            self._drain(flush=False)
        elif not self._wake.is_set():
            # Until the writer wakes, every event past WAKE_AT lands here: Event.set takes a
            # lock and notifies each time, is_set is one attribute read.
            self._wake.set()

    # -- the writer thread's side ----------------------------------------------------

    def _prev_snapshot(self) -> dict[str, int]:
        if self._prev_stale:
            self._prev = {n: v for n, v in zip(self._prev_names, self._prev_vals) if v}
            self._prev_stale = False
        return self._prev

    def _steady_step(self, ev: tuple[Any, ...], out: list[dict[str, Any]]) -> bool:
        """Write a step like one already written (same barrier, counter increases, inputs
        and evidence; nothing compiled) from that step's encoded parts: only its index and
        times are new. Most steps of a training loop are such a step. False when it is not
        one seen before (the caller builds it field by field, and :meth:`_learn_steady`
        keeps its parts). The writer's hot path: every step of a steady loop comes here."""
        names = ev[7]
        if ev[10] is not None or ev[11] is not None or names is not self._steady_names \
                or names is not self._prev_names:
            return False  # a step with notes or a site, or the counter names changed
        inputs = ev[9]
        sid = None
        if inputs:
            sid = self._raw_sigs.get(tuple(inputs))
            if sid is None:
                return False
        vals = ev[8]
        known = self._steady.get(_steady_key(ev, tuple(map(sub, vals, self._prev_vals)), sid))
        if known is None:
            return False
        tail, fields, executions, transfers = known
        i, t0, tb, t1 = ev[1], ev[2], ev[3], ev[4]
        self._steps_written = i + 1
        self._prev_vals = vals
        self._prev_stale = True
        last_t, t0_text = self._t_text
        if t0 != last_t:
            t0_text = repr(t0)
        t1_text = repr(t1)
        self._t_text = (t1, t1_text)
        rec = EncodedRecord(fields)
        rec["i"], rec["t0"], rec["tb"], rec["t1"] = i, t0, tb, t1
        rec.line = _STEP_HEAD % (i, t0_text, tb, t1_text) + tail
        rec.steady = fields
        if executions or transfers:
            self._exec_pending += executions
            self._xfer_pending += transfers
            if self._exec_pending >= SAMPLE_BATCH or self._xfer_pending >= SAMPLE_BATCH:
                self._flush_samples(out)
        out.append(rec)
        return True

    def _learn_steady(self, ev: tuple[Any, ...], rec: dict[str, Any], executions: int, transfers: int) -> None:
        """Keep the parts of a step written field by field that a later step like it reuses:
        its fields after the times, encoded, and what it adds to the pending sample reads."""
        names, vals, prev = ev[7], ev[8], self._prev_vals
        if ev[10] is not None or ev[11] is not None or names is not self._prev_names:
            return  # (the same names: the values line up)
        increases = tuple(map(sub, vals, prev))
        if min(increases) < 0 or increases[0] or rec.get("bu") or len(self._steady) >= STEADY_LIMIT:
            return  # a counter reset (read as counting from 0), or a compile: not reusable
        fields = {k: v for k, v in rec.items() if k not in ("type", "i", "t0", "tb", "t1")}
        if names is not self._steady_names:
            self._steady = {}
            self._steady_names = names
        self._steady[_steady_key(ev, increases, rec.get("sig"))] = (
            "," + encode_record(fields)[1:] + "\n", {"type": "step", **fields}, executions, transfers)

    def _step_records(self, ev: tuple[Any, ...], out: list[dict[str, Any]]) -> None:
        """A step that is not one already written (see :meth:`_steady_step`), field by field."""
        (_, i, t0, tb, t1, kind, before, names, vals, inputs, extra, site, opt, graphs, no_grad, eval_mode,
         backwards, mid, turned_off) = ev
        self._steps_written = i + 1
        snap = {n: v for n, v in zip(names, vals) if v}
        d = m.delta(snap, self._prev_snapshot())
        rec: dict[str, Any] = {"type": "step", "i": i, "t0": t0, "tb": tb, "t1": t1, "barrier": kind}
        if d:
            rec["c"] = d
        bu = m.increase(snap.get(m.UNCACHED, 0), before[0])
        bc = m.increase(snap.get(m.CACHED, 0), before[1])
        if bu:
            rec["bu"] = bu
        if site is not None and (bu or d.get(m.UNCACHED)):
            rec["site"] = self._intern_site("barrier", site, out)
        if bc:
            rec["bc"] = bc
        # What tells a training step from the other barriers: optimizer steps since the
        # last barrier (``o``), graphs torch.compile extracted (``dz``), grad mode (``ng``),
        # modules in eval mode (``ev``), backward passes (``bw``).
        if opt:
            rec["o"] = opt
        if graphs:
            rec["dz"] = graphs
        if no_grad:
            rec["ng"] = 1
        if eval_mode:
            rec["ev"] = 1
        if backwards:
            rec["bw"] = backwards
        if mid:
            rec["mg"] = mid
        if turned_off:
            rec["gd"] = 1
        if inputs:
            rec["sig"] = self._intern_sig(inputs, out)
        if extra:
            rec.update(extra)
        if d.get(m.UNCACHED):
            buf = self._compile_buf
            buf.extend((ts, ns, "") for ts, ns in self._compile_cursor.new())
            # An op run eagerly (eager mode) compiles on its own, timed in another metric.
            op = self._op_compile_cursor.new()
            if op:
                buf.extend((ts, ns, "op") for ts, ns in op)
                buf.sort()
            kept = []
            for ts, ns, at in buf:
                if ts <= t1:
                    out.append({"type": "compile", "i": i, "t": ts, "ns": ns,
                                "at": at or ("barrier" if ts >= tb else "step")})
                else:
                    kept.append((ts, ns, at))  # a later step's (the writer runs behind)
            self._compile_buf = kept
        executions = d.get(m.EXECUTE, 0) + d.get(m.REPLICATED, 0)
        transfers = d.get(m.TO_CPU, 0) + d.get(m.LOCAL_SCALAR, 0)
        self._exec_pending += executions
        self._xfer_pending += transfers
        if bu or d.get(m.UNCACHED) or self._exec_pending >= SAMPLE_BATCH or self._xfer_pending >= SAMPLE_BATCH:
            # (a step that compiled: its graphs' sizes come before it, for the live notices)
            self._flush_samples(out)
        out.append(rec)
        self._learn_steady(ev, rec, executions, transfers)
        self._prev = snap
        self._prev_names = names
        self._prev_vals = vals
        self._t_text = (-1.0, "")

    def _tail_compiles(self, out: list[dict[str, Any]]) -> None:
        """Compiles after the last barrier (a final print's graph; every graph of a loop that
        never reached a barrier): ``compile`` records of step ``self.step``, which has no step
        record (the ``end`` record's ``tail`` counts them)."""
        buf = self._compile_buf
        buf.extend((ts, ns, "") for ts, ns in self._compile_cursor.new())
        buf.extend((ts, ns, "op") for ts, ns in self._op_compile_cursor.new())
        buf.sort()
        self._compile_buf = []
        out.extend({"type": "compile", "i": self.step, "t": ts, "ns": ns, "at": at or "step"} for ts, ns, at in buf)
        self.tail_compile_s = [ns / 1e9 for _, ns, _ in buf]

    def _flush_samples(self, out: list[dict[str, Any]]) -> None:
        self._exec_pending = 0
        execs = self._exec_cursor.new()
        replicated = self._rexec_cursor.new()
        if replicated:  # SPMD: one sample per execution over all of the process's devices
            execs = sorted(execs + replicated) if execs else replicated
        if execs:
            out.append({"type": "exec", "samples": [list(s) for s in execs]})
        if self._xfer_pending:
            self._xfer_pending = 0
            xfer = self._xfer_cursor.new()
            if xfer:
                out.append({"type": "xfer", "samples": [list(s) for s in xfer]})
        sizes = self._size_cursor.new()
        if sizes:
            out.append({"type": "graph_sizes", "samples": [list(s) for s in sizes]})

    def _name_inputs(self, inputs: list[RawInput]) -> list[InputEntry]:
        """The step's inputs as recorded: a name taken twice gets ``#2``, dtypes as text."""
        taken: dict[str, int] = {}
        dtypes = self._dtypes
        out: list[InputEntry] = []
        for e in inputs:
            name, shape, dtype, src = e[0], e[1], e[2], e[3]
            n = taken.get(name, 0)
            taken[name] = n + 1
            if n:
                name = f"{name}#{n + 1}"
            dt = dtypes.get(dtype)
            if dt is None:
                dt = dtypes[dtype] = dtype_name(dtype)
            out.append((name, tuple(shape), dt, src) if len(e) == 4 else (name, tuple(shape), dt, src, e[4]))
        return out

    def _intern_sig(self, inputs: list[RawInput], out: list[dict[str, Any]]) -> int:
        # Steps repeat a few signatures: the raw tuples (names, torch.Size, dtypes) are looked
        # up first, so naming and converting happen once per distinct signature, not per step.
        raw = tuple(inputs)
        sid = self._raw_sigs.get(raw)
        if sid is not None:
            return sid
        key = tuple(self._name_inputs(inputs))
        sid = self._sigs.get(key)
        if sid is None:
            sid = len(self._sigs)
            self._sigs[key] = sid
            out.append({"type": "sig", "id": sid, "inputs": [_input_record(e) for e in key]})
            if self.spmd:
                self._note_mesh(out)
        if len(self._raw_sigs) < RAW_SIG_LIMIT:
            self._raw_sigs[raw] = sid
        return sid

    def _note_mesh(self, out: list[dict[str, Any]]) -> None:
        """SPMD: write the global mesh when it differs from the one written last (it is
        often set after ``watch()`` started). Looked at with each new signature and at the end."""
        facts = mesh_facts()
        if facts and facts != self._mesh:
            self._mesh = facts
            out.append({"type": "spmd", **facts})

    def _spmd_at_stop(self, out: list[dict[str, Any]]) -> None:
        """The mesh as it is at the end; and a run that switched SPMD on after its first
        graph (``use_spmd()`` forces it then) is said to be one, late."""
        if not self.spmd and spmd_enabled():
            self.spmd = True
            self.counters.count_replicated()
            out.append({"type": "spmd", **{k: v for k, v in (spmd_meta() or {}).items() if k not in _MESH_KEYS}})
        if self.spmd:
            self._note_mesh(out)

    def _sync_records(self, ev: tuple[Any, ...], out: list[dict[str, Any]]) -> None:
        _, kind, site, t0, t1, before, after, deferred, thread = ev
        # The step a read belongs to is where it sits in the queue, after the barriers of
        # the steps before it. A read in a step closure runs inside a barrier, before that
        # barrier's step is queued, and belongs to the step before.
        i = self._steps_written - 1 if deferred else self._steps_written
        self.syncs += 1
        rec: dict[str, Any] = {"type": "sync", "i": i, "site": self._intern_site(kind, site, out),
                               "t0": t0, "t1": t1}
        increase = m.increase  # a counter reset (torch.compile's bridge) counts from 0
        du, dc, dx = (increase(after[0], before[0]), increase(after[1], before[1]),
                      increase(after[2], before[2]))
        if du:
            rec["u"] = du
        if dc:
            rec["c"] = dc
        if dx:
            rec["x"] = dx
        if deferred:
            rec["deferred"] = True
        if thread is not None:
            rec["thread"] = thread
        out.append(rec)

    def _intern_site(self, kind: str, site: Site | None, out: list[dict[str, Any]]) -> int:
        file, line, func, via, inner, chain, inner_file, inner_line, caller_file, caller_line = (
            site if site is not None else ("?", 0, "?", None, None, (), None, 0, None, 0))
        # The chain is part of a site's identity: the same user line reaches a barrier or a
        # read through different library paths (the HF Trainer's logging and its evaluation
        # both run under ``trainer.train()`` and both end in xm.mark_step's wrapper).
        key = (kind, file, line, func, via, inner, chain, inner_file, inner_line, caller_file, caller_line)
        sid = self._sites.get(key)
        if sid is None:
            sid = len(self._sites)
            self._sites[key] = sid
            rec: dict[str, Any] = {"type": "site", "id": sid, "kind": kind, "file": file, "line": line,
                                   "func": func, "via": via, "code": site.code() if site else ""}
            if inner:
                rec["inner"] = inner
            if chain:
                rec["chain"] = list(chain)
            if inner_file and site is not None:
                rec["inner_at"] = [inner_file, inner_line, site.inner_code()]
            if caller_file and site is not None:
                rec["caller"] = [caller_file, caller_line, site.caller_code()]
            out.append(rec)
        return sid


def _steady_key(ev: tuple[Any, ...], increases: tuple[int, ...], sid: int | None) -> tuple[Any, ...]:
    """What makes a step written like another: its barrier kind, counter increases,
    compiles at the barrier (uncached, cached), optimizer steps, dynamo graphs, grad and
    eval mode, backward passes, graphs run mid-step outside host reads, grad turned off
    (``ev[12:19]``) and input signature."""
    vals, before = ev[8], ev[6]
    return (ev[5], increases, vals[0] - before[0], vals[1] - before[1], ev[12:19], sid)


def _input_record(entry: InputEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"name": entry[0], "shape": list(entry[1]), "dtype": entry[2], "src": entry[3]}
    if len(entry) > 4:
        out["sharding"] = entry[4]  # type: ignore[misc]
    return out
