"""Step inputs from loaders: batches from ``DataLoader`` iterators and ``PerDeviceLoader``,
named from the user's line that unpacked them.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any, Callable

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import _MISSING, Patches, _posing_as, _user_frames_only
from xprof.recorder.inputs import flatten_batch, names_from_unpacking


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
