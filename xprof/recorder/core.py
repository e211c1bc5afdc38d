"""The recorder: turns barriers, host reads and inputs into run-file records.

Everything here runs inside the user's training process. It is split in two:

- the **hooks' side** (the training thread, and any thread that reads a tensor) only
  takes what cannot wait: the clock, the counters, the input shapes, the user's line of
  a host read. It appends that as one tuple to a queue (``deque.append`` is atomic, so no
  lock is taken) and returns: the barriers and host reads here, the step's inputs and SPMD
  shardings in :mod:`xprof.recorder.stepinputs`, the queued tuples' kinds in
  :mod:`xprof.recorder.events`;
- the **writer thread** (this module's queue, thread and writes) turns the queued tuples
  into records a few times a second: counter deltas, signature and site interning, compile
  and sample reads, naming (:mod:`xprof.recorder.encoder`), JSON, the write itself, and the
  live notices (:mod:`xprof.recorder.live`).

``Recorder`` holds the state of both sides; ``StepInputs`` and ``RecordEncoder`` are its base
classes, so a hook calls the same bound method as before, with no call in between.

It must never raise into the user's code (its own errors are caught, logged once and
written to the run as ``error`` records), and must not change what torch_xla compiles or
runs. The records are the same as when they were built on the training thread.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from xprof.recorder import metrics as m
from xprof.recorder.arms import ArmedHooks
from xprof.recorder.encoder import RecordEncoder
from xprof.recorder.ending import Ending
from xprof.recorder.events import EVENT_KINDS, RawInput
from xprof.recorder.fallback_sites import BackwardFallbacks
from xprof.recorder.frames import FrameClassifier, Site
from xprof.recorder.stepinputs import StepInputs
from xprof.runfile import CACHED, REPLICATED, UNCACHED, RunWriter

log = logging.getLogger("xprof")
_STEP, _SYNC, _MARK, _RECORD, _LAZY = EVENT_KINDS  # (the kinds of queued event: events.py)

FLUSH_INTERVAL = 0.25
"""Seconds between two passes of the writer thread. A step that compiled wakes it at
once; a process killed with SIGKILL loses at most the last quarter second."""


DRAIN_CHUNK = 512
"""Events turned into records and written per write call (bounds the text built at once)."""

WAKE_AT = 512
"""Events queued before the writer thread is woken early (a loop faster than 2k steps a
second; a 1 ms step queues ~250 between two passes)."""

QUEUE_CAP = 16384
"""Events queued at most (~8 MB of tuples): past it the training thread drops the event it
queued and counts it, never writing it itself. Only a writer thread stuck on a disk that does
not take its writes (a hung NFS or FUSE mount, a full disk that blocks) falls this far behind;
the training thread never waits on the disk. The count is in the ``end`` record
(``events_dropped``) and the summary. Another thread that queues past half of it (a logging
thread marking as fast as it can) writes the queue itself, as before."""

EXIT_WAIT = 3.0
"""Seconds ``stop()`` waits for the writer thread to write what is queued and the ``end``
record; past it training leaves without them, and says the run file may be incomplete."""

_BASE = len(m.BASE_COUNTERS)
"""Index of the first counter a barrier reads after the base ones (ExecuteReplicated in an
SPMD run)."""

NO_BARRIER_AFTER = 3
"""Optimizer steps with no step barrier yet in the run after which a ``no_barrier`` debug
record is written (a loop that never calls ``torch_xla.sync()``; the live notice)."""


class _Local(threading.local):
    depth = 0
    """Inside a hooked host read: nested reads (``__format__`` calling ``item``) are one."""
    closures = 0
    """Inside an ``xm.add_step_closure`` callback: reads there are deferred, not syncs."""


class Observer(Protocol):
    """Sees every record the writer thread writes, in file order (the live notices)."""

    def feed(self, records: list[dict[str, Any]]) -> None: ...


class Recorder(StepInputs, RecordEncoder, ArmedHooks, Ending):
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
        self.events_dropped = 0
        """Events dropped because the queue was full (see :data:`QUEUE_CAP`)."""
        self.dropped_from: int | None = None
        """The step in progress when the first was dropped."""
        self.abandoned = False
        """``stop()`` left before the writer thread wrote the end of the run file."""
        self._final: tuple[str, str | None] | None = None
        """What ``stop()`` asks the writer thread to end the run file with."""
        self._flusher: threading.Thread | None = None
        self._init_hooks_side()
        self._init_spmd()
        self._init_encoder(source)
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._drain_lock = threading.Lock()
        """Held from popping events to writing their records, so the file keeps queue order."""
        # -- hooks installed once a counter shows they can matter (either thread) --
        self._arms: list[tuple[str, str, Callable[[], None]]] = []
        self._arm_lock = threading.Lock()

    def _init_hooks_side(self) -> None:
        """The state the hooks keep on the training thread between two barriers."""
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
        self.explain: Any = None
        """``--explain``'s state (:class:`xprof.recorder.explain.Explain`) while the mode is on:
        the barrier hook calls it when it is not None, and only then."""
        self.optimizers: weakref.WeakSet[Any] | None = None
        """The optimizers seen stepping (their parameters, gradients and state are the tensors
        ``--explain`` hashes); None when the mode can never be on."""
        self.barrier_frame: Any = None
        """The caller of the barrier in progress (set by the barrier hook): its site is
        recorded only when the barrier compiled, so the stack is walked only then."""
        self.fallback_sites = BackwardFallbacks(self.frames, self.mark, self.error)
        """The forward lines of backward ops that fell back to the CPU (one step each)."""
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

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        for cursor in (self._compile_cursor, self._op_compile_cursor, self._exec_cursor, self._rexec_cursor,
                       self._size_cursor, self._xfer_cursor):
            self.guard("start", cursor.start)
        self._prev = self.guard("start", lambda: self.counters.snapshot(refresh=True)) or {}
        self._last_uncached = self._prev.get(UNCACHED, 0)
        self._end_compiles = self._last_uncached + self._prev.get(CACHED, 0)
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
                self.fallback_sites.want(self.counters.names)
            self._drain(flush=True)
            self._check_file()
        final = self._final
        if final is not None:  # (stop() asked: the run file's end is written here, not on its thread)
            self._finish(*final)

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
                    try:
                        ev = events.popleft()
                    except IndexError:  # (the hooks dropped the newest: see _queue_full)
                        left = 0
                        break
                    n += 1
                    left -= 1
                    try:
                        if ev[0] == _STEP:
                            _zeroed(ev[8])
                            if not steady(ev, records):
                                self._step_records(ev, records)
                        elif ev[0] == _SYNC:
                            self._sync_records(ev, records)
                        elif ev[0] == _LAZY:
                            made = ev[1](self._steps_written)
                            if made is not None:
                                records.append(made)
                        else:
                            record = ev[1]
                            if ev[0] == _MARK:
                                record["i"] = self._steps_written
                            records.append(record)
                    except Exception as exc:
                        self.error(("barrier", "sync hook", "mark", "write", "explain")[ev[0]], exc)
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

    def queue_lazy(self, make: Callable[[int], dict[str, Any] | None]) -> None:
        """Queue a record the writer thread makes by calling ``make`` with the index of the step
        it lands before (in queue order, like a mark). Any thread."""
        self._events.append((_LAZY, make))
        if len(self._events) >= WAKE_AT:
            self._queue_full()

    def flush(self) -> None:
        """Write everything queued now (the writer thread does it a few times a second)."""
        self._drain(flush=True)

    def stop(self, status: str, exception: str | None) -> None:
        """Have the writer thread write what is pending and the ``end`` record, and wait for it
        at most :data:`EXIT_WAIT` seconds (then say the run file may be incomplete, and leave
        it writing); never raises, never writes on the calling thread while that thread runs."""
        self.active = False
        self.fallback_sites.close()
        self._final = (status, exception)
        self._stopped.set()
        self._wake.set()
        flusher = self._flusher
        if flusher is None or not flusher.is_alive() or flusher is threading.current_thread():
            self._finish(status, exception)  # (never started, or in a forked child: nothing to wait for)
            return
        flusher.join(timeout=EXIT_WAIT)
        if flusher.is_alive():
            self.abandoned = True
            log.warning("xprof: the run file %s may be incomplete: its disk has not taken xprof's writes for "
                        "%.0f s, so training goes on without waiting (the rest is written if the disk recovers "
                        "before the process exits)", self.writer.path, EXIT_WAIT)

    def _finish(self, status: str, exception: str | None) -> None:
        """Write what is pending and the ``end`` record (the writer thread, once stopped)."""
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
            end = self.end_record(status, exception, time.time())
            self.tail_step = bool(end.get("tail_opt") and end.get("tail_graphs"))
            self.tail_opt = int(end.get("tail_opt") or 0)
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
            record = {"type": "error", "t": time.time(), "where": where, "error": f"{type(exc).__name__}: {exc}",
                      "trace": "".join(traceback.format_exception(exc)[-3:]) if first else None}
            if threading.current_thread() is not self._flusher:
                self._events.append((_RECORD, record))  # (only the writer thread waits on the disk)
                return
            try:
                self.writer.write(record)
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

    # -- the hooks' side: barriers ---------------------------------------------------

    def on_barrier(self, tb: float, before: tuple[int, ...], kind: str) -> None:
        """A step barrier just finished: queue the step in progress and start the next.

        Training thread only. Reads the clock and the counters; everything else waits. The
        values are queued as read (None for a counter not created yet: the writer thread
        reads it as 0, see :func:`_zeroed`).
        """
        t1 = time.time()
        frame, self.barrier_frame = self.barrier_frame, None  # never keep the user's frame alive
        counters = self.counters
        names = counters.names
        vals: list[int | None] = list(map(counters.value, names))
        uncached = vals[0] or 0
        site = None
        if uncached != self._last_uncached:
            # This step compiled: a new fallback op compiles too, so look for its counter
            # now, to put its first calls in this step (the cause of the compile).
            self._last_uncached = uncached
            if counters.refresh():
                names = counters.names
                vals = list(map(counters.value, names))
                if self._arms:
                    self._check_arms()
                self.fallback_sites.want(names)
            if frame is not None:
                site = self.frames.user_site(frame)  # who asked for a barrier that compiled
        cached = vals[1] or 0
        ran = uncached != before[0] or cached != before[1]
        # Graphs run between the last barrier and this one, outside the host reads: ops run
        # one by one (eager mode), or a sync xprof does not hook. (Compiles are counted on
        # the calling thread, so, unlike executions, they never spill into the next step.)
        mid = before[0] + before[1] - self._end_compiles - self._read_compiles
        self._end_compiles = uncached + cached
        self._read_compiles = 0
        # (an SPMD run counts its executions in ExecuteReplicated too: read right after the base)
        self._exec_mark = (vals[2] or 0) + ((vals[_BASE] or 0) if counters.spmd and len(names) > _BASE
                                            and names[_BASE] == REPLICATED else 0)
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
            if self._eval_cut or self._devices:
                inputs = self._step_inputs(inputs)
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
        turned_off, self.grad_turned_off = self.grad_turned_off, False
        events = self._events
        events.append((_STEP, self.step, self._t0, tb, t1, kind, before, names, vals,
                       inputs, extra, site, opt, graphs, grad is not None and not grad(), self.eval_mode,
                       backwards, mid, turned_off))
        self.step += 1
        self._t0 = t1
        located = self.fallback_sites
        if located.pending or located.active is not None:
            located.at_barrier()
        if uncached != before[0]:
            self._wake.set()  # a step that compiled reaches the file at once
        if len(events) >= WAKE_AT:
            self._queue_full()

    def _step_inputs(self, inputs: list[RawInput]) -> list[RawInput]:
        """The inputs of the graph a barrier ran: those after an evaluation's cut (see
        ``_eval_cut``), with their shardings read (SPMD)."""
        cut, self._eval_cut = self._eval_cut, 0
        if 0 < cut < len(inputs):
            inputs = inputs[cut:]
            self._devices = [(k - cut, t) for k, t in self._devices if k >= cut]
        if self._devices:
            self._read_input_shardings(inputs)
        return inputs

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
        """The third optimizer step (or, with no optimizer, the fourth backward pass) and no
        barrier yet: unless graphs ran outside host reads (eager mode: each op runs as it
        comes, nothing waits for a barrier), say so at once (a ``no_barrier`` mark for the live
        notices). Never raises."""
        try:
            uncached, cached = self.counters.compile_counts()
            outside = uncached + cached - self._end_compiles - self._read_compiles
            # (a few graphs outside the reads in a lazy loop: an op falling back to the CPU
            # materialized its inputs; eager mode is asked of torch_xla itself)
            if outside <= 0 or not m.eager_mode():
                self.mark("no_barrier", opt=self._opt_steps, bw=self._backwards)
        except Exception as exc:
            self.error("optimizer hook", exc)

    def on_backward(self) -> None:
        """A backward pass started (any thread: one counter bump)."""
        self._backwards += 1
        if self._backwards == NO_BARRIER_AFTER + 1 and self.step == 0 and not self._opt_steps:
            self._no_barrier_yet()  # (weights updated without an optimizer: p.data.add_)

    def on_dynamo_graph(self) -> None:
        self._dynamo_graphs += 1

    def write_dynamo_guards(self, failures: list[dict[str, Any]]) -> None:
        """torch._dynamo's failed guards, once at the end of the run (in queue order)."""
        if failures:
            self._events.append((_RECORD, {"type": "dynamo", "t": time.time(), "guard_failures": failures}))


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
        events = self._events
        if len(events) > QUEUE_CAP // 2 and threading.get_ident() != self.owner and not self._stopped.is_set():
            # Another thread (a logging thread marking as fast as it can) that outruns the writer
            # writes the queue itself, as before, from half the cap on: the other half is the
            # training thread's, which never waits on the disk.
            self._drain(flush=False)
            return
        if len(events) > QUEUE_CAP:
            # The writer thread is stuck on the disk: drop the newest event rather than wait.
            try:
                events.pop()
            except IndexError:
                return
            if not self.events_dropped:
                self.dropped_from = self.step
            self.events_dropped += 1
        elif not self._wake.is_set():
            # Until the writer wakes, every event past WAKE_AT lands here: Event.set takes a
            # lock and notifies each time, is_set is one attribute read.
            self._wake.set()


def _zeroed(vals: list[int | None]) -> None:
    """A barrier's counter values with 0 for those not created yet (the hook queues what the
    counter read returned, None for those, to keep the conversion off the training thread)."""
    if None in vals:
        vals[:] = [v or 0 for v in vals]
