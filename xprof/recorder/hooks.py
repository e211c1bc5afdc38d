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

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from xprof.recorder.core import Recorder
from xprof.recorder.inputs import flatten_batch, name_from_comprehension, name_from_line

_MISSING = object()


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

    def set(self, owner: Any, attr: str, wrapper: Any) -> None:
        own = owner.__dict__ if isinstance(owner, type) else vars(owner)
        had_own = attr in own
        original = own[attr] if had_own else getattr(owner, attr, _MISSING)
        setattr(owner, attr, wrapper)
        self._patches.append(_Patch(owner, attr, original, had_own, wrapper))

    def restore(self) -> list[str]:
        """Undo every patch; returns the ones someone else had patched over (left alone)."""
        skipped = []
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
    "_clear_pending_ops_before_compile": "compile",
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
        kind = _BARRIER_CALLERS.get(f.f_code.co_name)
        if kind is not None and "torch_xla" in f.f_code.co_filename:
            return kind
        f = f.f_back
    return "sync"


def install_barrier(rec: Recorder, patches: Patches, xlac: Any) -> None:
    original = xlac._xla_step_marker
    counts = rec.counters.compile_counts

    def _xla_step_marker(*args: Any, **kwargs: Any) -> Any:
        if not rec.active or threading.get_ident() != rec.owner:
            return original(*args, **kwargs)
        try:
            tb = time.time()
            before = counts()
            kind = _barrier_kind(sys._getframe(1))
        except Exception as exc:
            rec.error("barrier", exc)
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        try:
            rec.on_barrier(tb, before, kind)
        except Exception as exc:
            rec.error("barrier", exc)
        return result

    patches.set(xlac, "_xla_step_marker", _xla_step_marker)


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


def _make_reader(rec: Recorder, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
    tls = rec.tls
    counts = rec.counters.sync_counts
    site_of = rec.frames.user_site

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if tls.depth or not rec.active or not self.is_xla:
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
            rec.on_host_read(kind, site_of(sys._getframe(1)), t0, t1, before, counts(),
                             tls.closures > 0)
        except Exception as exc:
            rec.error("sync hook", exc)
        return result

    read.__name__ = getattr(original, "__name__", kind)
    read.__qualname__ = getattr(original, "__qualname__", kind)
    read.__doc__ = getattr(original, "__doc__", None)
    return read


def _make_to(rec: Recorder, original: Callable[..., Any], reads: bool,
             inputs: bool) -> Callable[..., Any]:
    """``Tensor.to``: a host read when it goes to the CPU, a step input when it goes to XLA."""
    reader = _make_reader(rec, "to_cpu", original)
    tls = rec.tls
    frames = rec.frames

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if tls.depth or not rec.active:
            return original(self, *args, **kwargs)
        if self.is_xla:
            if reads and _to_target_kind(args, kwargs) == "cpu":
                return reader(self, *args, **kwargs)
            return original(self, *args, **kwargs)
        result = original(self, *args, **kwargs)
        if inputs and threading.get_ident() == rec.owner:
            try:
                if getattr(result, "is_xla", False) and rec.is_batch_leaf(self):
                    if rec.shardings_wanted:  # SPMD: the moved leaf's sharding is read at the barrier
                        rec.on_batch_leaf_moved(self, result)
                elif getattr(result, "is_xla", False):
                    caller = sys._getframe(1)
                    kind = frames.kind(caller.f_code.co_filename)
                    if kind != 2:  # torch's own .to calls (Module.to) are not step inputs
                        name = name_from_comprehension(caller)
                        if name is None:
                            if kind == 0:
                                name = name_from_line(caller.f_code.co_filename, caller.f_lineno)
                            else:
                                site = frames.user_site(caller)
                                name = name_from_line(site.file, site.line) if site else "tensor"
                        rec.on_to_device(self, name, result)
            except Exception as exc:
                rec.error("input hook", exc)
        return result

    to.__name__ = "to"
    to.__qualname__ = getattr(original, "__qualname__", "to")
    to.__doc__ = getattr(original, "__doc__", None)
    return to


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

def install_closures(rec: Recorder, patches: Patches, xm: Any) -> None:
    original = xm.add_step_closure
    tls = rec.tls

    def add_step_closure(closure: Callable[..., Any], args: tuple[Any, ...] = (),
                         run_async: bool = False) -> Any:
        def deferred(*a: Any) -> Any:
            tls.closures += 1
            try:
                return closure(*a)
            finally:
                tls.closures -= 1

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
    def __next__(self: Any) -> Any:
        batch = original(self)
        if rec.active and threading.get_ident() == rec.owner:
            try:
                rec.on_batch(flatten_batch(batch, tensor_type), source)
            except Exception as exc:
                rec.error("input hook", exc)
        return batch

    __next__.__name__ = getattr(original, "__name__", "__next__")
    return __next__
