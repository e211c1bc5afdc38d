"""Data-dependent shapes: the ops whose output shape depends on values (``nonzero``,
``masked_select``...) and boolean-mask indexing, installed once torch_xla shows they ran.
"""

from __future__ import annotations

from typing import Any, Callable

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import Patches, posing_as, user_frames_only
from xprof.recorder.hooks.reads import make_reader

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
                patches.set(owner, attr, make_reader(rec, kind, original, method=owner is tensor_type))
    def install_mask_hooks() -> None:
        patches.set(tensor_type, "__getitem__", _mask_index_hook(rec, tensor_type))
        patches.set(tensor_type, "__setitem__", _mask_assign_hook(rec, tensor_type))
        patches.set(torch, "where", _where_hook(rec, torch))

    rec.arm_on_counter(MASK_INDEX_COUNTER, "mask_index", install_mask_hooks)


def _mask_index_hook(rec: Recorder, tensor_type: Any) -> Callable[..., Any]:
    """The ``Tensor.__getitem__`` wrapper, around the ``__getitem__`` there is when it is
    installed (a library may have patched it since the watch started)."""
    original_getitem = tensor_type.__getitem__
    masked = make_reader(rec, "mask_index", original_getitem)
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
            user_frames_only(exc)
            raise

    return posing_as(__getitem__, original_getitem, "__getitem__")


def _where_hook(rec: Recorder, torch: Any) -> Callable[..., Any]:
    """The ``torch.where`` wrapper: its one-argument form, ``torch.where(mask)``, is
    ``nonzero(mask, as_tuple=True)`` (routing tokens to experts, gathering kept rows): run on
    the CPU, with a value-dependent shape. The three-argument form, the common one, passes
    through after one length check. Armed with the mask hooks (the same ``aten::nonzero``
    counter)."""
    original_where = torch.where
    routed = make_reader(rec, "where", original_where, method=False)

    def where(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 1 or kwargs:
            return original_where(*args, **kwargs)
        return routed(*args)

    return posing_as(where, original_where, "where")


def _mask_assign_hook(rec: Recorder, tensor_type: Any) -> Callable[..., Any]:
    """The ``Tensor.__setitem__`` wrapper: ``t[mask] = v`` with a boolean mask runs
    ``index_put_``, which finds the positions with ``nonzero`` on the CPU (the pending graph
    runs first, and the graph after it changes with the count), as ``t[mask]`` does. Other
    assignments pass through after the same type checks as :func:`_mask_index_hook`'s."""
    original_setitem = tensor_type.__setitem__
    masked = make_reader(rec, "mask_assign", original_setitem)
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
            user_frames_only(exc)
            raise

    return posing_as(__setitem__, original_setitem, "__setitem__")
