"""``xprof.watch()``: record a training loop into a run file.

What counts as a step: one step is everything between two step barriers, and a
record is written when each barrier finishes. Every barrier torch_xla has ends in the
same call (``_XLAC._xla_step_marker``), so ``xm.mark_step()``, ``torch_xla.sync()``,
``xm.optimizer_step(..., barrier=True)``, each ``MpDeviceLoader`` batch and the end of
``torch_xla.step()`` are all seen without the user's help. A barrier with nothing
pending (``MpDeviceLoader`` syncs once at the start and the end of an epoch) is
recorded too; the analysis counts it apart from training steps.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import platform
import socket
import sys
import threading
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

from xprof._version import __version__
from xprof.recorder import hooks, verdict
from xprof.recorder.core import Recorder
from xprof.recorder.explain import Explain
from xprof.recorder.live import LiveNotices, stderr_line
from xprof.recorder.metrics import MetricsSource, XlaMetrics
from xprof.recorder.spmd import process_rank, spmd_meta
from xprof.runfile import RunWriter

log = logging.getLogger("xprof")

class Presenter(Protocol):
    """Where a notebook shows a run (:mod:`xprof.notebook`, which registers itself as
    :data:`PRESENTER` when imported: the recorder never imports the report side)."""

    def kernel(self) -> Any | None: ...
    def forked_from_kernel(self) -> bool: ...
    def after_watch(self, requested: str, path: str, speak: bool, forks: int = 0) -> bool: ...
    def summary_html_of(self, paths: Sequence[str]) -> str: ...
    def show(self, run: Any) -> None: ...


PRESENTER: Presenter | None = None
"""The notebook's presenter, once ``xprof.notebook`` is imported (``import xprof`` in a kernel)."""

_ACTIVE: watch | None = None
_ACTIVE_LOCK = threading.Lock()


class XprofUsageError(RuntimeError):
    """A misuse of the API by the caller (for example a nested ``watch()``)."""


def active() -> watch | None:
    """The running ``watch()``, if any."""
    return _ACTIVE


def _forget_in_child() -> None:
    """After ``os.fork()`` in the child: the parent's recording is the parent's. The child
    (a DataLoader worker, a launcher's process) records nothing into the parent's file, and
    may start a ``watch()`` of its own."""
    global _ACTIVE, _ACTIVE_LOCK
    _ACTIVE_LOCK = threading.Lock()  # (the parent's may have been held by another thread)
    w, _ACTIVE = _ACTIVE, None
    if w is not None and not w.inert:
        w.forked = True
        if w.recorder is not None:
            w.recorder.forget_in_child()


def _count_fork() -> None:
    """After ``os.fork()`` in the parent: a process forked while recording (``xmp.spawn`` with
    ``start_method="fork"`` around which the ``watch()`` was put) records none of its steps here."""
    w = _ACTIVE
    if w is not None and not w.inert:
        w.forks += 1


os.register_at_fork(after_in_child=_forget_in_child, after_in_parent=_count_fork)


def rank_path(path: str, rank: int | None, world_size: int | None) -> str:
    """``run.json`` -> ``run.rank1.json`` when several processes record at once."""
    if rank is None or not world_size or world_size <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext or '.json'}"


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in ("torch", "torch_xla"):
        mod = sys.modules.get(name)
        out[name] = getattr(mod, "__version__", None) if mod else None
    return out


def live_wanted(live: bool | None, rank: int | None) -> bool:
    """Whether this process prints live notices: ``live`` when given, else ``XPROF_LIVE``
    (``0``/``off`` for never, ``all`` for every rank), else rank 0 only."""
    if live is not None:
        return live
    env = os.environ.get("XPROF_LIVE", "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env == "all":
        return True
    return not rank


def _process_identity() -> tuple[int | None, int | None, str | None]:
    """(rank, world size, PJRT device type) as torch_xla knows them, where it does.

    Under SPMD one process drives all of its host's devices, so the ranks are processes:
    ``xr.process_index()`` of ``xr.process_count()`` (asked even before the first device use:
    SPMD never spawns processes, and the script starts the runtime next anyway)."""
    rank = world = None
    device = os.environ.get("PJRT_DEVICE")
    try:
        import torch_xla
        import torch_xla.runtime as xr

        spmd = process_rank()
        if spmd is not None:
            rank, world = spmd
            return rank, world, str(xr.device_type() or device)
        if not torch_xla._XLAC._xla_runtime_is_initialized():
            # Asking torch_xla would start its runtime, and xmp.spawn refuses to run in a
            # process that has started it (``xprof run`` on a spawning script). Before the
            # first device use, take what a launcher (torchrun) put in the environment.
            env_rank, env_world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
            if env_rank is not None and env_world is not None:
                return int(env_rank), int(env_world), device
            return None, None, device
        world = int(xr.world_size())
        rank = int(xr.global_ordinal())
        device = str(xr.device_type() or device)
    except Exception:
        pass
    return rank, world, device


class watch:
    """Record every step of the enclosed training loop into ``path``.

    >>> with xprof.watch("run.json"):
    ...     for batch in loader:
    ...         train_step(batch)
    ...         xm.mark_step()

    ``inputs=False`` turns off input-shape recording, ``syncs=False`` the host-read
    hooks. While it records, xprof prints one line on stderr the first time each new
    cause of lost time appears after warm-up (a recompile and what changed, a host read
    that ran the device, an op that fell back to the CPU), and a short summary at the
    end; ``live=False`` or ``XPROF_LIVE=0`` turns both off. Only rank 0 speaks unless
    ``live=True`` (or ``XPROF_LIVE=all``). In a multi-process run each process writes its own file
    (``run.rank0.json``, ``run.rank1.json``...). The user's exceptions propagate
    unchanged; the file is completed with the error recorded.

    ``explain=True`` shows what changed in each new graph and at which line (``xprof run
    --explain``): before each barrier the graph of the tensors the optimizers step (and the
    losses, and any given to :meth:`explain_tensors`) is hashed, and a new one is compared with
    the closest earlier graph (docs/diagnosis.md, "Graph changes at the line"). It costs
    torch_xla's Python frames for every traced op (~2 µs a node), a hash a step (~0.1-0.6
    ms) and a few ms per new graph. By default (``None``) the mode switches on by itself at
    the first compile the live diagnosis can only call a changed graph, so later ones get
    their lines;
    ``explain=False`` never turns it on.
    """

    def __init__(self, path: str | os.PathLike[str] = "run.json", *, name: str | None = None,
                 inputs: bool = True, syncs: bool = True, live: bool | None = None,
                 source: MetricsSource | None = None, explain: bool | None = None) -> None:
        self.requested_path = os.fspath(path)
        self.path = self.requested_path
        self.name = name
        self.inputs = inputs
        self.syncs = syncs
        self.live = live
        self.explain = explain
        self._explained: list[weakref.ref[Any]] = []
        self._ir_debug_before: bool | None = None
        """torch_xla's ``ir_debug`` before ``--explain`` turned it on (restored on exit)."""
        self.notices: LiveNotices | None = None
        """What the live notices said (None when they are off)."""
        self._source = source
        self._patches = hooks.Patches()
        self.recorder: Recorder | None = None
        self.inert = False
        """True when another thread's watch() was already recording: this one records nothing."""
        self._thread = 0
        self._guards_before: dict[Any, int] = {}
        self.exit_summary = True
        """Print the exit summary (the analysis' verdict, from a child process: recorder/verdict.py);
        ``xprof run`` turns it off and prints the same lines in its own process."""
        self.forked = False
        """This is a child forked while the watch recorded: it leaves without writing."""
        self.forks = 0
        """Processes forked while this watch recorded (their steps are not in this run)."""
        self.spawned = False
        """Started in a process of ``xmp.spawn`` by the notebook's watch around it (hooks/spawn.py)."""
        self.spawned_ranks = False
        """``xmp.spawn`` ran under this watch in a notebook, each process recording its rank."""

    def __enter__(self) -> watch:
        global _ACTIVE
        with _ACTIVE_LOCK:
            if _ACTIVE is not None:
                if _ACTIVE._thread == threading.get_ident() and _ACTIVE.spawned:
                    # fn has a watch() of its own, inside the rank watch the notebook's watch around
                    # xmp.spawn started: that one records this rank already.
                    log.warning("xprof: watch(%r) records nothing: the watch() around xmp.spawn records "
                                "this process into %s", self.requested_path, _ACTIVE.path)
                    self.inert = True
                    return self
                if _ACTIVE._thread == threading.get_ident():
                    raise XprofUsageError(
                        f"xprof.watch() is already recording to {_ACTIVE.path}; "
                        "nested watch() blocks are not supported")
                # Another thread records already (torch_xla runs CPU ranks as threads of one
                # process): the hooks are process-wide, so this one stays out of the way
                # rather than break that thread's training.
                log.warning("xprof: watch(%r) ignored: another thread's watch() is already recording "
                            "to %s (one recording per process)", self.requested_path, _ACTIVE.path)
                self.inert = True
                return self
            _ACTIVE = self
            self._thread = threading.get_ident()
        try:
            self._start()
        except BaseException:
            self._patches.restore()
            with _ACTIVE_LOCK:
                _ACTIVE = None
            raise
        return self

    def _start(self) -> None:
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        rank, world, device = _process_identity()
        self._pod = bool(world and world > 1)  # (a silent rank still writes its digest at exit)
        spmd = spmd_meta()
        self.path = rank_path(self.requested_path, rank, world)
        now = _dt.datetime.now(_dt.timezone.utc)
        header = {
            "xprof_version": __version__,
            "name": self.name or os.path.splitext(os.path.basename(self.requested_path))[0],
            "started_at": now.isoformat(timespec="seconds"),
            "started_unix": now.timestamp(),
            "meta": {
                **_versions(),
                "xprof": __version__,
                "device": device,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "argv": list(sys.argv),
                "cwd": os.getcwd(),
                "rank": rank,
                "world_size": world,
                "inputs": self.inputs,
                "syncs": self.syncs,
                "debug_level": os.environ.get("PT_XLA_DEBUG_LEVEL"),
                "metrics_samples": os.environ.get("XLA_METRICS_SAMPLES"),
                "explain": "auto" if self.explain is None else "on" if self.explain else "off",
                **({"spmd": spmd} if spmd is not None else {}),
            },
        }
        writer = RunWriter(self.path, header)
        source = self._source or XlaMetrics()
        # With explain=None the live diagnosis switches --explain on at the first compile its
        # rules can only call a changed graph; it runs (quietly) even with the notices off.
        auto = (lambda i, why: self._explain_on(i, auto=True, why=why)) if self.explain is None else None
        if live_wanted(self.live, rank):
            self.notices = LiveNotices(now.timestamp(), stderr_line, on_unexplained=auto)
        observer: Any = self.notices
        if observer is None and auto is not None:
            observer = LiveNotices(now.timestamp(), None, on_unexplained=auto)
        rec = Recorder(writer, source, observer)
        self.recorder = rec
        if self.explain is not False:
            rec.optimizers = weakref.WeakSet()
        if spmd is not None:
            rec.enable_spmd(self.inputs, spmd)
        else:
            rec.watch_for_spmd(self.inputs)
        try:
            hooks.install_barrier(rec, self._patches, torch_xla._XLAC)
            hooks.install_closures(rec, self._patches, xm)
            if self.syncs:
                self._install_optional("sync_multi hook", hooks.install_sync_multi, rec, torch_xla._XLAC)
            self._install_optional("optimizer hook", hooks.install_optimizer_steps, rec, torch)
            self._install_optional("dynamo hook", hooks.install_dynamo, rec, torch)
            self._install_optional("dynamo limit", hooks.install_dynamo_limit, rec, torch)
            self._install_optional("train/eval hooks", hooks.install_phase_evidence, rec, torch)
            self._install_optional("warning location", hooks.install_warning_location, rec, torch)
            self._guards_before = hooks.dynamo_guard_counts()
            if self.syncs:
                self._install_optional("data-dependent hooks", hooks.install_data_dependent, rec, torch)
            if self.syncs or self.inputs:
                hooks.install_host_reads(rec, self._patches, torch.Tensor, reads=self.syncs,
                                         inputs=self.inputs)
            if self.inputs:
                hooks.install_loaders(rec, self._patches, torch.Tensor)
        except Exception as exc:
            # A torch_xla whose internals moved: record less rather than break training.
            rec.error("install hooks", exc)
        if self.explain:
            self._explain_on(0, auto=False)
        self._spawn_ranks(rec)
        rec.start()

    def rank_options(self) -> dict[str, Any]:
        """This watch's options, for the watch of each process ``xmp.spawn`` starts under it."""
        return {"name": self.name, "inputs": self.inputs, "syncs": self.syncs, "live": self.live,
                "explain": self.explain}

    def _spawn_ranks(self, rec: Recorder) -> None:
        """In a notebook kernel, ranks spawned under this watch record their own files."""
        try:
            shown = PRESENTER
            if shown is not None and shown.kernel() is not None and not shown.forked_from_kernel():
                hooks.install_spawn(self, self._patches, active)
        except Exception as exc:
            rec.error("spawn hook", exc)

    def explain_tensors(self, *tensors: Any) -> None:
        """Add tensors whose graph ``--explain`` compares (beside the optimizers' parameters,
        gradients and state, and the losses given to ``backward()``): a metric kept on the
        device, an output the loop keeps. Held weakly; never raises."""
        try:
            self._explained.extend(weakref.ref(t) for t in tensors if getattr(t, "is_xla", False))
            rec = self.recorder
            if rec is not None and rec.explain is not None:
                rec.explain.register(tensors)
        except Exception as exc:
            log.warning("xprof: explain_tensors failed (%s: %s)", type(exc).__name__, exc)

    def _explain_on(self, step: int, auto: bool, why: str = "graph_change") -> None:
        """Turn ``--explain`` on (torch_xla's IR frames, the barrier's hash); never raises."""
        rec = self.recorder
        if rec is None or rec.explain is not None or (auto and not rec.active):
            return
        try:
            import torch_xla

            xlac = torch_xla._XLAC
            if self._ir_debug_before is None:
                self._ir_debug_before = bool(xlac._get_ir_debug())
            xlac._set_ir_debug(True)
            explain = Explain(rec, xlac, rec.frames, since=step, auto=auto)
            explain.register([r() for r in self._explained])
            rec.explain = explain
            if auto:
                rec.mark("explain", auto=True, after=step, why=why)
        except Exception as exc:
            rec.error("explain", exc)

    def _install_optional(self, where: str, install: Any, rec: Recorder, torch: Any) -> None:
        """Hooks that only add evidence: a failure records an error and nothing more."""
        try:
            install(rec, self._patches, torch)
        except Exception as exc:
            rec.error(where, exc)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        global _ACTIVE
        if exc is not None:
            hooks.user_frames_only(exc)
        if self.inert:
            return
        if self.forked:
            self._patches.restore()  # (inert already: the recorder is off in this process)
            return
        rec = self.recorder
        try:
            if rec is not None:
                rec.active = False
                rec.explain = None
                _settle_executions()
                rec.guard("dynamo guards", lambda: rec.write_dynamo_guards(
                    hooks.dynamo_guard_failures(self._guards_before)))
                if exc_type is None:
                    status, text = "ok", None
                elif issubclass(exc_type, KeyboardInterrupt):
                    # Ctrl-C, or SIGTERM under `xprof run` (recorder.runner.Terminated).
                    status, text = "interrupted", str(exc) or exc_type.__name__
                else:
                    status, text = "error", f"{exc_type.__name__}: {exc}"
                rec.stop(status, text)
                if self.notices is not None:
                    rec.guard("live notices", self.notices.close)
                if rec.lost_at is not None:
                    if self.exit_summary:  # (xprof run says it itself)
                        stderr_line(f"xprof: the run file {self.path} was not written: it was removed during "
                                    f"the run (at step {rec.lost_at}), with its folder or on its own")
                elif self.exit_summary:
                    self._say_verdict()
        finally:
            if self._ir_debug_before is not None:
                _restore_ir_debug(self._ir_debug_before)
                self._ir_debug_before = None
            skipped = self._patches.restore()
            if skipped:
                log.warning("xprof: left %s patched: something else patched it after watch() "
                            "started (the leftover hook is inert)", ", ".join(skipped))
            with _ACTIVE_LOCK:
                _ACTIVE = None
        # Returning None lets the user's exception propagate unchanged.


    def _say_verdict(self) -> None:
        """The exit summary: HTML in a notebook cell (:mod:`xprof.notebook`; a process forked from
        the kernel hands its file to the kernel instead), else the lines on stderr."""
        speak = self.notices is not None and not self.spawned_ranks  # (the kernel shows the ranks)
        shown = PRESENTER
        if ((shown is not None and shown.after_watch(self.requested_path, self.path, speak, forks=self.forks))
                or not speak):
            if not speak and getattr(self, "_pod", False):
                verdict.digest(self.path)  # (a silent rank of a pod still writes its digest)
            return
        for line in verdict.exit_lines(self.path):
            stderr_line(line)

    def _repr_html_(self) -> str | None:
        """A finished watch as a cell's value: its run's summary (None while it records)."""
        shown = PRESENTER
        if self.recorder is None or self.recorder.active or self.inert or self.forked or shown is None:
            return None
        try:
            return shown.summary_html_of([self.path])
        except Exception as exc:  # (a run file removed since: the plain repr)
            log.warning("xprof: no summary of %s (%s: %s)", self.path, type(exc).__name__, exc)
            return None

    def show(self) -> None:
        """The full report of this run in the notebook cell (:func:`xprof.show`)."""
        if PRESENTER is None:
            raise RuntimeError("xprof: show() draws in a notebook: import xprof in the notebook's kernel")
        PRESENTER.show(self)


def _restore_ir_debug(value: bool) -> None:
    """``--explain`` turned torch_xla's IR frames on: put back what was there."""
    try:
        import torch_xla

        torch_xla._XLAC._set_ir_debug(value)
    except Exception as exc:
        log.warning("xprof: could not restore torch_xla's ir_debug (%s: %s)", type(exc).__name__, exc)


def _settle_executions() -> None:
    """Let the last step's asynchronous execution finish so its time is in the run.

    Outside the hot path (once, at exit); failures are ignored.
    """
    try:
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()
    except Exception:
        pass
