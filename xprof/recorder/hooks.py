"""The hooks ``watch()`` installs, and the bookkeeping that takes every one of them out.

- the step barrier: ``torch_xla._XLAC._xla_step_marker``, which every barrier ends in
  (``xm.mark_step``, ``torch_xla.sync``, ``xm.optimizer_step(barrier=True)``, each
  ``MpDeviceLoader`` batch, the end of ``torch_xla.step()`` / ``torch_xla.compile``);
- host reads of an XLA tensor's value: ``Tensor.item``, ``tolist``, ``numpy``, ``cpu``,
  ``to`` (to the CPU), ``__bool__``, ``__int__``, ``__float__``, ``__index__``,
  ``__repr__`` (so ``print`` and ``str``), ``__format__`` (f-strings), ``__array__``;
- step closures: callbacks given to ``xm.add_step_closure`` run with reads marked deferred;
- step inputs: batches from ``DataLoader`` iterators and ``PerDeviceLoader``
  (``MpDeviceLoader``), and CPU tensors moved to the device with ``.to``/``.cuda``-style
  calls.

Each wrapper checks ``rec.active`` first, so a wrapper left behind by someone else's
later patch turns into a plain pass-through once the watch has ended.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, TypeVar

from xprof.recorder.core import Recorder
from xprof.recorder.inputs import flatten_batch, name_from_comprehension, name_from_line, names_from_unpacking

_MISSING = object()

_HERE = __file__


def _user_frames_only(exc: BaseException) -> None:
    """Take this module's wrappers out of the traceback of an exception passing through one
    (``.item()`` of a 3-element tensor), so it shows the user's line on top, as without xprof.

    Each wrapper calls this and re-raises with a bare ``raise``, which adds no entry for its
    own frame; the entries the wrappers inside it added are dropped here. A library frame in
    between (torch's own Python) stays."""
    tb = exc.__traceback__
    head = prev = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != _HERE:
            if prev is None:
                head = tb
            else:
                prev.tb_next = tb
            prev = tb
        tb = tb.tb_next
    if prev is not None:
        prev.tb_next = None
    exc.__traceback__ = head


_Wrapper = TypeVar("_Wrapper", bound=Callable[..., Any])


def _posing_as(wrapper: _Wrapper, original: Any, name: str) -> _Wrapper:
    """``wrapper`` named and documented as the ``original`` it stands in for (``name`` when
    that has none), as ``help()`` and tracebacks show it."""
    wrapper.__name__ = getattr(original, "__name__", name)
    wrapper.__qualname__ = getattr(original, "__qualname__", name)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


@dataclass
class _Patch:
    owner: Any
    attr: str
    original: Any
    had_own: bool
    wrapper: Any


class Patches:
    """Installs attribute patches and restores all of them, newest first."""

    def __init__(self) -> None:
        self._patches: list[_Patch] = []
        self._undo: list[Callable[[], Any]] = []

    def on_restore(self, undo: Callable[[], Any]) -> None:
        """Run ``undo`` (remove a registered hook) when the patches are restored."""
        self._undo.append(undo)

    def set(self, owner: Any, attr: str, wrapper: Any) -> None:
        own = owner.__dict__ if isinstance(owner, type) else vars(owner)
        had_own = attr in own
        original = own[attr] if had_own else getattr(owner, attr, _MISSING)
        setattr(owner, attr, wrapper)
        self._patches.append(_Patch(owner, attr, original, had_own, wrapper))

    def restore(self) -> list[str]:
        """Undo every patch; returns the ones someone else had patched over (left alone)."""
        skipped = []
        while self._undo:
            try:
                self._undo.pop()()
            except Exception:
                pass
        while self._patches:
            p = self._patches.pop()
            current = (p.owner.__dict__ if isinstance(p.owner, type) else vars(p.owner)).get(p.attr)
            if current is not p.wrapper:
                skipped.append(f"{getattr(p.owner, '__name__', p.owner)}.{p.attr}")
                continue
            if p.had_own:
                setattr(p.owner, p.attr, p.original)
            else:
                delattr(p.owner, p.attr)
        return skipped


# ---------------------------------------------------------------------------------------
# barrier

_BARRIER_CALLERS = {
    "optimizer_step": "optimizer_step",
    "mark_step": "mark_step",
    "next": "loader",
    "_compile": "compile",
    "_clear_pending_ops_before_compile": "compile_entry",
}


_KIND_CACHE: dict[tuple[Any, ...], str] = {}


def _barrier_kind(frame: Any) -> str:
    """Which API asked for this barrier, from the few frames above the step marker.

    Cached by the code objects of those frames: a loop asks from the same place each step.
    """
    f2 = frame.f_back if frame is not None else None
    f3 = f2.f_back if f2 is not None else None
    key = (frame.f_code if frame is not None else None, f2.f_code if f2 is not None else None,
           f3.f_code if f3 is not None else None)
    kind = _KIND_CACHE.get(key)
    if kind is None:
        kind = _KIND_CACHE[key] = _barrier_kind_walk(frame)
    return kind


def _barrier_kind_walk(frame: Any) -> str:
    f = frame
    for _ in range(3):
        if f is None:
            break
        filename = f.f_code.co_filename
        if "/_dynamo/" in filename.replace("\\", "/"):
            return "dynamo"  # torch.compile's XLA bridge syncs on its own: not a user step
        kind = _BARRIER_CALLERS.get(f.f_code.co_name)
        if kind is not None and "torch_xla" in f.f_code.co_filename:
            return kind
        f = f.f_back
    return "sync"


def install_barrier(rec: Recorder, patches: Patches, xlac: Any) -> None:
    original = xlac._xla_step_marker
    # (uncached, cached, executions): whether the step's graph was counted as run by the
    # time the barrier returned tells a read right after it whose execution it waits for
    counts = rec.counters.sync_counts

    def _xla_step_marker(*args: Any, **kwargs: Any) -> Any:
        try:
            if not rec.active or threading.get_ident() != rec.owner:
                return original(*args, **kwargs)
            try:
                tb = time.time()
                before = counts()
                caller = sys._getframe(1)
                kind = _barrier_kind(caller)
                if kind == "compile_entry":
                    _compile_call_inputs(rec, caller)
                rec.barrier_frame = caller
            except Exception as exc:
                rec.error("barrier", exc)
                return original(*args, **kwargs)
            result = original(*args, **kwargs)
            try:
                rec.on_barrier(tb, before, kind)
            except Exception as exc:
                rec.error("barrier", exc)
            return result
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    # torch_xla's debug analysis (PT_XLA_DEBUG_LEVEL) names a compile's cause from the
    # innermost Python frame: a user barrier only when that frame's function is called
    # mark_step (or is torch_xla.py's sync), then the loader, torch_xla.compile or dynamo
    # from the frames above. Under watch() the innermost frame is this wrapper; its code
    # takes mark_step's name, so torch_xla says what it says without xprof ("user
    # torch_xla.sync", "torch_xla.sync in parallel loader at step end"), not "most likely
    # user code trying to access tensor value" for every barrier.
    _xla_step_marker.__code__ = _xla_step_marker.__code__.replace(co_name="mark_step")
    patches.set(xlac, "_xla_step_marker", _xla_step_marker)


_SIGNATURES: dict[Any, Any] = {}


def _compile_call_inputs(rec: Recorder, frame: Any) -> None:
    """At ``torch_xla.compile``'s entry sync, record the call's tensor arguments by name.

    ``torch_xla.compile(fn)`` wraps ``fn`` in a context-manager decorator; its ``inner``
    frame (a few frames above the entry sync) holds ``func``, ``args`` and ``kwds``.
    Runs once per compiled call, never on a plain barrier.
    """
    f = frame
    for _ in range(6):
        if f is None:
            return
        if f.f_code.co_name == "inner" and "func" in f.f_locals:
            break
        f = f.f_back
    else:
        return
    loc = f.f_locals
    func, args, kwds = loc.get("func"), loc.get("args") or (), loc.get("kwds") or {}
    params = _SIGNATURES.get(func)
    if params is None:
        import inspect

        try:
            params = [p.name for p in inspect.signature(func).parameters.values()]
        except (TypeError, ValueError):
            params = []
        _SIGNATURES[func] = params
    named = [(params[k] if k < len(params) else f"arg{k}", v) for k, v in enumerate(args)]
    named.extend(kwds.items())
    tensor_type = sys.modules["torch"].Tensor
    leaves: list[tuple[str, Any]] = []
    for name, value in named:
        if hasattr(value, "is_xla"):
            leaves.append((name, value))
        elif isinstance(value, dict):
            leaves.extend(flatten_batch(value, tensor_type))
        elif isinstance(value, (list, tuple)):
            leaves.extend((f"{name}{n[5:]}", t) for n, t in flatten_batch(value, tensor_type))
    rec.on_call_args([(n, t) for n, t in leaves if getattr(t, "is_xla", False)])


# ---------------------------------------------------------------------------------------
# optimizer steps

def install_optimizer_steps(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Count every ``optimizer.step()`` (a training step's evidence, whatever drives it).

    ``torch.optim``'s global post hook fires for every optimizer: a hand loop's, the HF
    Trainer's, ``GradScaler.step``'s, torch_xla's syncfree ones.
    """
    owner = rec.owner
    bump = rec.on_optimizer_step

    def post_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if rec.active and threading.get_ident() == owner:
            bump()

    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(post_hook)
    patches.on_restore(handle.remove)
    rec.grad_enabled = torch.is_grad_enabled


_HOOKS_DIR = os.path.dirname(__file__)
"""The folder of the hooks' own code (as their frames name it): a warning located there came
from inside a hooked call."""


def install_warning_location(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Give a warning raised inside a hooked call the line that called it.

    torch warns from C (``Converting a tensor with requires_grad=True to a scalar ...`` in
    ``float(loss)``), and Python gives a C warning the innermost Python frame's line: with
    the hooks on, the wrapper's (``xprof/recorder/hooks.py``), which blames xprof for the
    user's call. Every warning Python shows or records goes through
    ``warnings._showwarnmsg`` (``warnings.warn`` and C's ``PyErr_WarnEx`` alike; a
    ``catch_warnings(record=True)`` block, pytest's among them, and a replaced
    ``showwarning`` are both reached from it), so the wrapped one puts such a warning back
    at the first frame outside xprof; every other warning passes through as it came.
    Where that private hook is missing, ``warnings.showwarning`` is wrapped instead (shown
    warnings only).
    """
    import warnings

    show_message = getattr(warnings, "_showwarnmsg", None)
    if callable(show_message):
        def _showwarnmsg(msg: Any, __original: Any = show_message) -> Any:
            if rec.active and str(getattr(msg, "filename", "")).startswith(_HOOKS_DIR):
                located = _caller_of_hook(sys._getframe(1))
                if located is not None:
                    msg.filename, msg.lineno, msg.line = located[0], located[1], None
            return __original(msg)

        patches.set(warnings, "_showwarnmsg", _showwarnmsg)
        return

    original = warnings.showwarning

    def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                    line: Any = None) -> Any:
        if rec.active and str(filename).startswith(_HOOKS_DIR):
            located = _caller_of_hook(sys._getframe(1))
            if located is not None:
                filename, lineno, line = located[0], located[1], None
        return original(message, category, filename, lineno, file, line)

    patches.set(warnings, "showwarning", showwarning)


def _caller_of_hook(frame: FrameType | None) -> tuple[str, int] | None:
    """File and line of the frame that called the hook whose wrapper is on ``frame``'s
    stack (None when there is none: never raises)."""
    try:
        f = frame
        while f is not None and not f.f_code.co_filename.startswith(_HOOKS_DIR):
            f = f.f_back  # up to the hook's frame the warning was given ...
        while f is not None and f.f_code.co_filename.startswith(_HOOKS_DIR):
            f = f.f_back  # ... and past it, to the caller's
        return (f.f_code.co_filename, f.f_lineno) if f is not None else None
    except Exception:
        return None


def install_phase_evidence(rec: Recorder, patches: Patches, torch: Any) -> None:
    """What tells an eval pass from training, whatever loop drives it: the mode the last
    ``Module.train()``/``eval()`` call set (``ev``; outermost call only, not the recursion
    into children) and the backward passes since the last barrier (``bw``, from
    ``torch.autograd.backward``, which ``Tensor.backward`` calls, and ``torch.autograd.grad``).

    Both fire a few times a step at most; neither reads a tensor.
    """
    owner = rec.owner
    module_type = torch.nn.Module
    original_train = module_type.train
    state = {"depth": 0}

    def train(self: Any, mode: bool = True) -> Any:
        try:
            if not rec.active or state["depth"] or threading.get_ident() != owner:
                return original_train(self, mode)
            state["depth"] = 1
            try:
                result = original_train(self, mode)
            finally:
                state["depth"] = 0
            rec.eval_mode = mode is False
            return result
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    patches.set(module_type, "train", _posing_as(train, original_train, "train"))

    autograd = torch.autograd
    bump = rec.on_backward
    for attr in ("backward", "grad"):
        original = getattr(autograd, attr, None)
        if original is None:
            continue

        def passes(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            try:
                if rec.active:
                    bump()
                return __original(*args, **kwargs)
            except BaseException as exc:
                _user_frames_only(exc)
                raise

        patches.set(autograd, attr, _posing_as(passes, original, attr))

    # Grad turned off since the last barrier (``gd``): ``torch.no_grad()`` and
    # ``torch.inference_mode()`` entered, as a ``with`` or as a decorator. An eval loop's
    # forward under no_grad has its barrier (the next batch's) outside it.
    for cls in (getattr(torch, "no_grad", None), getattr(torch, "inference_mode", None)):
        enter = getattr(cls, "__enter__", None)
        if enter is None:
            continue

        def entered(self: Any, __enter: Any = enter) -> Any:
            try:
                if rec.active and getattr(self, "mode", True) is not False and threading.get_ident() == owner:
                    rec.grad_turned_off = True
                return __enter(self)
            except BaseException as exc:
                _user_frames_only(exc)
                raise

        patches.set(cls, "__enter__", _posing_as(entered, enter, "__enter__"))


# ---------------------------------------------------------------------------------------
# host reads

HOST_READS = {
    "item": "item",
    "tolist": "tolist",
    "numpy": "numpy",
    "cpu": "cpu",
    "__bool__": "bool",
    "__int__": "int",
    "__float__": "float",
    "__index__": "index",
    "__repr__": "repr",
    "__format__": "format",
    "__array__": "numpy",
}


def _to_target_kind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """'cpu' or 'xla' when a ``Tensor.to`` call moves to that device type, else None."""
    target = kwargs.get("device", args[0] if args else None)
    if target is None:
        return None
    kind: Any
    if isinstance(target, str):
        kind = target.split(":", 1)[0]
    else:
        kind = getattr(target, "type", None)
        if kind is None:
            # .to(other_tensor): the other tensor's device
            dev = getattr(target, "device", None)
            kind = getattr(dev, "type", None)
    return kind if kind in ("cpu", "xla") else None


def _tracing_types() -> tuple[type, ...]:
    """Tensor types that stand for an XLA tensor while torch traces a function
    (``torch.compile``, aot_autograd inside ``scan``/``scan_layers``): they say ``is_xla``,
    but hold no data, so printing one (aot_autograd formats its metadata) reads nothing."""
    out: list[type] = []
    for module, name in (("torch._subclasses.fake_tensor", "FakeTensor"),
                         ("torch._subclasses.functional_tensor", "FunctionalTensor")):
        try:
            out.append(getattr(__import__(module, fromlist=[name]), name))
        except Exception:  # pragma: no cover - a torch without them
            pass
    return tuple(out)


def _make_reader(rec: Recorder, kind: str, original: Callable[..., Any],
                 method: bool | None = True) -> Callable[..., Any]:
    """A host-read wrapper; ``method=False`` for a ``torch.*`` function whose first
    argument may be something other than a tensor (then it passes through); ``None`` for
    a function of XLA tensors only (``_xla_sync_multi``'s list)."""
    tls = rec.tls
    tracing = frozenset(_tracing_types()) if method is not None else frozenset()
    counts = rec.counters.sync_counts
    counts_after = rec.counters.sync_counts_after
    site_of = rec.frames.user_site

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        # CPU tensors first: this is every bool(cpu_tensor) in the process, torch's own too.
        try:
            if (not (method is None or (self.is_xla if method else getattr(self, "is_xla", False)))
                    or tls.depth or not rec.active or type(self) in tracing):
                return original(self, *args, **kwargs)
            try:
                before = counts()
            except Exception as exc:
                rec.error("sync hook", exc)
                return original(self, *args, **kwargs)
            t0 = time.time()
            tls.depth += 1
            try:
                result = original(self, *args, **kwargs)
            finally:
                tls.depth -= 1
            t1 = time.time()
            try:
                rec.on_host_read(kind, site_of(sys._getframe(1)), t0, t1, before, counts_after(before),
                                 tls.closures > 0)
            except Exception as exc:
                rec.error("sync hook", exc)
            return result
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    return _posing_as(read, original, kind)


def _make_to(rec: Recorder, original: Callable[..., Any], reads: bool,
             inputs: bool) -> Callable[..., Any]:
    """``Tensor.to``: a host read when it goes to the CPU, a step input when it goes to XLA."""
    reader = _make_reader(rec, "to_cpu", original)
    tls = rec.tls
    frames = rec.frames
    import torch

    dtype_type = torch.dtype

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            if args and type(args[0]) is dtype_type and not kwargs:
                return original(self, *args)  # a cast (the most common call): it never moves
            if self.is_xla:
                if reads and not tls.depth and rec.active and _to_target_kind(args, kwargs) == "cpu":
                    return reader(self, *args, **kwargs)
                return original(self, *args, **kwargs)
            result = original(self, *args, **kwargs)
            # A CPU tensor: a step input only when the result is on the device. Checked in the
            # order that returns soonest for the many CPU-to-CPU calls (dtype casts).
            if (inputs and getattr(result, "is_xla", False) and rec.active and not tls.depth
                    and threading.get_ident() == rec.owner):
                try:
                    if not rec.is_batch_leaf(self):
                        caller = sys._getframe(1)
                        kind = frames.kind(caller.f_code.co_filename)
                        if kind != 2:  # torch's own .to calls (Module.to) are not step inputs
                            name = name_from_comprehension(caller)
                            if name is None:
                                if kind == 0:
                                    name = name_from_line(caller.f_code.co_filename, caller.f_lineno, caller, self)
                                else:
                                    site = frames.user_site(caller)
                                    name = name_from_line(site.file, site.line) if site else "tensor"
                            rec.on_to_device(self, name, result)
                    elif rec.keep_devices:  # SPMD: the moved leaf is what mark_sharding shards
                        rec.on_batch_leaf_moved(self, result)
                except Exception as exc:
                    rec.error("input hook", exc)
            return result
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    return _posing_as(to, original, "to")


def install_host_reads(rec: Recorder, patches: Patches, tensor_type: type, *, reads: bool,
                       inputs: bool) -> None:
    """Patch the tensor methods that read values (``reads``) and ``.to`` (both)."""
    for attr, kind in HOST_READS.items() if reads else ():
        original = getattr(tensor_type, attr, None)
        if original is None:
            continue
        patches.set(tensor_type, attr, _make_reader(rec, kind, original))
    patches.set(tensor_type, "to", _make_to(rec, tensor_type.to, reads, inputs))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# step closures

def install_sync_multi(rec: Recorder, patches: Patches, xlac: Any) -> None:
    """``_xla_sync_multi``: runs the graphs of the tensors given, and only theirs, waiting
    for them. ``xm.save`` (and torch_xla's serialization) calls it before copying a state
    dict to the CPU, ``xm.unlazy`` and ``gradient_accumulation`` call it too: a host read
    of those tensors (it compiles and runs their graph mid-step), recorded at the line
    that called the library."""
    original = getattr(xlac, "_xla_sync_multi", None)
    if original is None:
        return
    reader = _make_reader(rec, "materialize", original, method=None)

    def _xla_sync_multi(*args: Any, **kwargs: Any) -> Any:
        # torch.compile's XLA bridge syncs its graph's inputs before it runs one: dynamo's
        # own work, counted with its graphs (see install_dynamo), not a read of the user's.
        try:
            if not args or sys._getframe(1).f_code.co_filename.endswith("dynamo_bridge.py"):
                return original(*args, **kwargs)
            return reader(*args, **kwargs)
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    patches.set(xlac, "_xla_sync_multi", _xla_sync_multi)


def install_closures(rec: Recorder, patches: Patches, xm: Any) -> None:
    original = xm.add_step_closure
    tls = rec.tls
    counts = rec.counters.compile_counts

    def add_step_closure(closure: Callable[..., Any], args: tuple[Any, ...] = (),
                         run_async: bool = False) -> Any:
        def deferred(*a: Any) -> Any:
            tls.closures += 1
            before = None
            try:
                if rec.active:
                    before = counts()
            except Exception as exc:
                rec.error("closure hook", exc)
            try:
                return closure(*a)
            finally:
                tls.closures -= 1
                if before is not None:
                    # A closure runs after the barrier (xm.mark_step calls them after the step
                    # marker): what it compiles or runs is the closure's, not the next step's.
                    try:
                        after = counts()
                        rec.on_closure_compiles(after[0] - before[0] + after[1] - before[1])
                    except Exception as exc:
                        rec.error("closure hook", exc)

        return original(deferred, args, run_async)

    add_step_closure.__doc__ = original.__doc__
    patches.set(xm, "add_step_closure", add_step_closure)


# ---------------------------------------------------------------------------------------
# loaders

def install_loaders(rec: Recorder, patches: Patches, tensor_type: type) -> None:
    try:
        from torch.utils.data import dataloader
    except Exception:  # pragma: no cover - torch without its data module
        dataloader = None  # type: ignore[assignment]
    if dataloader is not None:
        base = dataloader._BaseDataLoaderIter
        patches.set(base, "__next__", _make_next(rec, base.__next__, tensor_type, "batch"))
    try:
        from torch_xla.distributed import parallel_loader
    except Exception:
        return
    per_device = parallel_loader.PerDeviceLoader
    patches.set(per_device, "next", _make_next(rec, per_device.next, tensor_type, "loader"))


def _make_next(rec: Recorder, original: Callable[..., Any], tensor_type: type,
               source: str) -> Callable[..., Any]:
    frames = rec.frames
    named: dict[tuple[Any, int, int], tuple[str, ...] | None] = {}
    """(user frame's code, its instruction, leaves) -> the names its line unpacks a batch into."""

    def unpacked(n: int) -> tuple[str, ...] | None:
        caller: FrameType | None = sys._getframe(2)
        for _ in range(3):
            if caller is None or frames.kind(caller.f_code.co_filename) == 0:
                break
            caller = caller.f_back  # (MpDeviceLoader's __next__ calls next)
        if caller is None:
            return None
        key = (caller.f_code, caller.f_lasti, n)
        names = named.get(key, _MISSING)
        if names is _MISSING:
            names = named[key] = names_from_unpacking(caller.f_code.co_filename, caller.f_lineno, n)
        return names  # type: ignore[return-value]

    def __next__(self: Any) -> Any:
        try:
            batch = original(self)
            if rec.active and threading.get_ident() == rec.owner:
                try:
                    leaves = flatten_batch(batch, tensor_type)
                    if leaves and leaves[0][0] in ("batch[0]", "batch"):
                        # A tuple batch is named by what the user's line unpacks it into (for x, y
                        # in loader:), so two loaders' batch[0] are not one input.
                        names = unpacked(len(leaves))
                        if names is not None:
                            leaves = list(zip(names, [t for _, t in leaves]))
                    rec.on_batch(leaves, source)
                except Exception as exc:
                    rec.error("input hook", exc)
            return batch
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    return _posing_as(__next__, original, "__next__")


# ---------------------------------------------------------------------------------------
# data-dependent shapes

DATA_DEPENDENT = {
    "nonzero": "nonzero",
    "masked_select": "masked_select",
    "unique": "unique",
    "argwhere": "argwhere",
    "repeat_interleave": "repeat_interleave",
}
"""Ops whose output shape depends on the input's values. On XLA they run on the CPU
(``aten::nonzero``...), so the pending graph executes early and the tensors after them
take a new shape whenever the count changes: reads of a value in disguise."""


def _is_mask_index(index: Any, tensor_type: Any) -> bool:
    if isinstance(index, tensor_type):
        return index.dtype is _BOOL
    if type(index) is tuple:
        return any(isinstance(i, tensor_type) and i.dtype is _BOOL for i in index)
    return False


_BOOL: Any = None

MASK_INDEX_COUNTER = "aten::nonzero"
"""The CPU fallback op boolean-mask indexing of an XLA tensor runs (torch_xla 2.9)."""


def install_data_dependent(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Hook the data-dependent ops like host reads (only on XLA tensors).

    Boolean-mask indexing goes through ``Tensor.__getitem__``, which every indexing in the
    process calls (a ``TensorDataset`` indexes each sample of a batch): a Python wrapper
    there costs ~0.6 µs a call, 20 µs a step for a 16-sample batch, whatever the device.
    So it is installed only once torch_xla's ``aten::nonzero`` counter exists, which the
    first boolean-mask index of an XLA tensor creates (it runs ``nonzero`` on the CPU);
    reads before that count in the step's counters, without their line. The named ops
    (``nonzero``, ``masked_select``...) are hooked at once: nothing else calls them.
    """
    global _BOOL
    _BOOL = torch.bool
    tensor_type = torch.Tensor
    for attr, kind in DATA_DEPENDENT.items():
        for owner in (tensor_type, torch):
            original = getattr(owner, attr, None)
            if original is not None:
                patches.set(owner, attr, _make_reader(rec, kind, original, method=owner is tensor_type))
    def install_mask_hooks() -> None:
        patches.set(tensor_type, "__getitem__", _mask_index_hook(rec, tensor_type))
        patches.set(tensor_type, "__setitem__", _mask_assign_hook(rec, tensor_type))

    rec.arm_on_counter(MASK_INDEX_COUNTER, "mask_index", install_mask_hooks)


def _mask_index_hook(rec: Recorder, tensor_type: Any) -> Callable[..., Any]:
    """The ``Tensor.__getitem__`` wrapper, around the ``__getitem__`` there is when it is
    installed (a library may have patched it since the watch started)."""
    original_getitem = tensor_type.__getitem__
    masked = _make_reader(rec, "mask_index", original_getitem)
    tls = rec.tls

    def __getitem__(self: Any, index: Any) -> Any:
        # The index's type first: ints, slices and tuples of them (nearly every indexing)
        # leave after one isinstance check.
        try:
            if isinstance(index, tensor_type):
                if index.dtype is not _BOOL:
                    return original_getitem(self, index)
            elif type(index) is not tuple or not _is_mask_index(index, tensor_type):
                return original_getitem(self, index)
            if tls.depth or not rec.active:
                return original_getitem(self, index)
            return masked(self, index)
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    return _posing_as(__getitem__, original_getitem, "__getitem__")


def _mask_assign_hook(rec: Recorder, tensor_type: Any) -> Callable[..., Any]:
    """The ``Tensor.__setitem__`` wrapper: ``t[mask] = v`` with a boolean mask runs
    ``index_put_``, which finds the positions with ``nonzero`` on the CPU (the pending graph
    runs first, and the graph after it changes with the count), as ``t[mask]`` does. Other
    assignments pass through after the same type checks as :func:`_mask_index_hook`'s."""
    original_setitem = tensor_type.__setitem__
    masked = _make_reader(rec, "mask_assign", original_setitem)
    tls = rec.tls

    def __setitem__(self: Any, index: Any, value: Any) -> Any:
        try:
            if isinstance(index, tensor_type):
                if index.dtype is not _BOOL:
                    return original_setitem(self, index, value)
            elif type(index) is not tuple or not _is_mask_index(index, tensor_type):
                return original_setitem(self, index, value)
            if tls.depth or not rec.active:
                return original_setitem(self, index, value)
            return masked(self, index, value)
        except BaseException as exc:
            _user_frames_only(exc)
            raise

    return _posing_as(__setitem__, original_setitem, "__setitem__")


# ---------------------------------------------------------------------------------------
# torch.compile (dynamo) on XLA

def install_dynamo(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Count the graphs torch.compile's XLA bridge extracts (a trace or a retrace for new
    shapes): compiles in a step where it ran are dynamo's. Only where torch_xla already
    loaded its bridge (importing it here would cost the user seconds)."""
    bridge = sys.modules.get("torch_xla._dynamo.dynamo_bridge")
    if bridge is None:
        return
    original = getattr(bridge, "extract_graph_helper", None)
    if original is None:
        return
    bump = rec.on_dynamo_graph

    def extract_graph_helper(*args: Any, **kwargs: Any) -> Any:
        if rec.active:
            bump()
        return original(*args, **kwargs)

    extract_graph_helper.__name__ = original.__name__
    extract_graph_helper.__doc__ = original.__doc__
    patches.set(bridge, "extract_graph_helper", extract_graph_helper)
    _install_optimized_module(rec, patches)


def _install_optimized_module(rec: Recorder, patches: Patches) -> None:
    """A compile inside a ``torch.compile``'d module's call (the bridge running a graph for a
    new input shape the first time) is dynamo's: two counter reads around each call."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    module_type = getattr(eval_frame, "OptimizedModule", None)
    if module_type is None:
        return
    original = module_type.__call__
    uncached = rec.counters.compile_counts
    bump = rec.on_dynamo_graph

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not rec.active:
            return original(self, *args, **kwargs)
        before = uncached()[0]
        result = original(self, *args, **kwargs)
        after = uncached()[0]
        if after != before and (after > before or after > 0):  # a reset by the bridge counts from 0
            bump()
        return result

    __call__.__name__ = "__call__"
    patches.set(module_type, "__call__", __call__)


DYNAMO_LOGGER = "torch._dynamo.convert_frame"
"""Where torch._dynamo says it hit a recompile limit and gave up compiling a function."""

_DYNAMO_FUNC = re.compile(r"'(?P<func>[^']*)' \((?P<file>.*):(?P<line>\d+)\)")


class _DynamoLimitHandler(logging.Handler):
    """Marks the step where torch.compile gave up on a function (its ``recompile_limit``
    warning, with the function and the last failed guard): from then on the function runs
    without torch.compile, as plain lazy tensor ops."""

    def __init__(self, rec: Recorder) -> None:
        super().__init__(logging.WARNING)
        self.rec = rec

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if not (isinstance(msg, str) and msg.startswith("torch._dynamo hit config.") and self.rec.active):
            return
        try:
            args = tuple(record.args) if isinstance(record.args, tuple) else ()
            limit, value, func, reason = (args + (None,) * 4)[:4]
            m = _DYNAMO_FUNC.search(str(func))
            self.rec.mark("dynamo_limit", limit=str(limit), value=value if isinstance(value, int) else None,
                          func=m.group("func") if m else str(func)[:200],
                          file=m.group("file") if m else None, line=int(m.group("line")) if m else None,
                          reason=str(reason)[:300] if reason is not None else None)
        except Exception as exc:
            self.rec.error("dynamo limit hook", exc)


def install_dynamo_limit(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Listen for torch._dynamo's recompile-limit warning (it still reaches the user)."""
    logger = logging.getLogger(DYNAMO_LOGGER)
    handler = _DynamoLimitHandler(rec)
    logger.addHandler(handler)
    patches.on_restore(lambda: logger.removeHandler(handler))


def dynamo_guard_counts() -> dict[Any, int]:
    """How many failed guards torch._dynamo has kept per function so far (at watch start)."""
    failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
    return {code: len(reasons) for code, reasons in list(failures.items())} if failures else {}


_ENTRY_ID = re.compile(r"^\s*\[?(\d+/\d+)\]?\s*:")


def _first_per_entry(reasons: list[Any]) -> list[Any]:
    """Each recompile re-checks every cached entry and dynamo keeps every failure, so the
    list grows with the square of the recompiles; an entry's later failures repeat its first
    (``0/0: ... expected 4, actual 9``). Its first failure is why its successor was traced."""
    seen: set[str] = set()
    out = []
    for r in reasons:
        m = _ENTRY_ID.match(str(r))
        if m is not None:
            if m.group(1) in seen:
                continue
            seen.add(m.group(1))
        out.append(r)
    return out


def dynamo_guard_failures(since: dict[Any, int] | None = None) -> list[dict[str, Any]]:
    """Why torch.compile recompiled: torch._dynamo's own record of failed guards, by function,
    those added after ``since`` (the counts at watch start)."""
    failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
    if not failures:
        return []
    since = since or {}
    out = []
    for code, reasons in list(failures.items())[:32]:
        new = _first_per_entry(list(reasons)[since.get(code, 0):])[:32]
        if new:
            out.append({"func": getattr(code, "co_name", str(code)),
                        "file": getattr(code, "co_filename", "?"),
                        "line": getattr(code, "co_firstlineno", 0),
                        "reasons": [str(r)[:500] for r in new]})
    return out
