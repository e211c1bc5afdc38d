"""Host reads of an XLA tensor's value (``item``, ``tolist``, ``cpu``, ``to`` the CPU, the
conversions and ``print``), ``_xla_sync_multi``, and step closures, whose reads are deferred.
"""

from __future__ import annotations

import sys
import threading
import time
from types import FrameType
from typing import Any, Callable

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import Patches, posing_as, user_frames_only
from xprof.recorder.inputs import container_field, name_from_comprehension, name_from_line

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


def make_reader(rec: Recorder, kind: str, original: Callable[..., Any],
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
                if rec.explain is not None and method is not None:  # --explain: the read's graph
                    rec.explain.before_read(self, sys._getframe(1))
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
            user_frames_only(exc)
            raise

    return posing_as(read, original, kind)


def make_to(rec: Recorder, original: Callable[..., Any], reads: bool,
             inputs: bool) -> Callable[..., Any]:
    """``Tensor.to``: a host read when it goes to the CPU, a step input when it goes to XLA."""
    reader = make_reader(rec, "to_cpu", original)
    tls = rec.tls
    import torch

    dtype_type = torch.dtype
    getframe, get_ident = sys._getframe, threading.get_ident

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
            # order that returns soonest for the many CPU-to-CPU calls (dtype casts) and for the
            # leaves of the step's loader batch (recorded with the batch).
            if not inputs or not rec.active:
                return result
            leaf = id(self) in rec._batch_ids
            if leaf and not rec.keep_devices:
                return result
            if getattr(result, "is_xla", False) and not tls.depth and get_ident() == rec.owner:
                _moved_to_device(rec, self, result, leaf, getframe(1))
            return result
        except BaseException as exc:
            user_frames_only(exc)
            raise

    return posing_as(to, original, "to")


def _moved_to_device(rec: Recorder, tensor: Any, result: Any, leaf: bool, caller: FrameType) -> None:
    """A CPU tensor ``.to`` the device by ``caller``: a step input, named from the user's line
    (under SPMD a leaf of the loader's batch, already recorded, is what mark_sharding shards)."""
    try:
        if leaf:
            rec.on_batch_leaf_moved(tensor, result)
            return
        frames = rec.frames
        kind = frames.kind(caller.f_code.co_filename)
        if kind == 2:  # torch's own .to calls (Module.to) are not step inputs
            return
        name = name_from_comprehension(caller)
        if name is None:
            if kind == 0:
                name = name_from_line(caller.f_code.co_filename, caller.f_lineno, caller, tensor)
            else:
                site = frames.user_site(caller)
                name = name_from_line(site.file, site.line) if site else "tensor"
                field = container_field(caller, frames.kind)
                if field is not None:  # data = data.to(dev) on a PyG Batch: data.x, data.edge_index
                    name = f"{name}.{field}" if name.isidentifier() else field
        rec.on_to_device(tensor, name, result)
    except Exception as exc:
        rec.error("input hook", exc)


def install_host_reads(rec: Recorder, patches: Patches, tensor_type: type, *, reads: bool,
                       inputs: bool) -> None:
    """Patch the tensor methods that read values (``reads``) and ``.to`` (both)."""
    for attr, kind in HOST_READS.items() if reads else ():
        original = getattr(tensor_type, attr, None)
        if original is None:
            continue
        patches.set(tensor_type, attr, make_reader(rec, kind, original))
    patches.set(tensor_type, "to", make_to(rec, tensor_type.to, reads, inputs))  # type: ignore[attr-defined]


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
    reader = make_reader(rec, "materialize", original, method=None)

    def _xla_sync_multi(*args: Any, **kwargs: Any) -> Any:
        # torch.compile's XLA bridge syncs its graph's inputs before it runs one: dynamo's
        # own work, counted with its graphs (see install_dynamo), not a read of the user's.
        try:
            if not args or sys._getframe(1).f_code.co_filename.endswith("dynamo_bridge.py"):
                return original(*args, **kwargs)
            return reader(*args, **kwargs)
        except BaseException as exc:
            user_frames_only(exc)
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
