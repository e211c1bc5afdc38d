"""Step inputs from loaders: batches from ``DataLoader`` iterators and ``PerDeviceLoader``,
named from the user's line that unpacked them.
"""

from __future__ import annotations

import sys
import threading
from types import CodeType, FrameType
from typing import Any, Callable

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import Patches, posing_as, user_frames_only
from xprof.recorder.inputs import POSITION_NAMES, flatten_batch, names_from_unpacking


def install_loaders(rec: Recorder, patches: Patches, tensor_type: type) -> None:
    try:
        from torch.utils.data import dataloader
    except Exception:  # pragma: no cover - torch without its data module
        dataloader = None  # type: ignore[assignment]
    if dataloader is not None:
        base = dataloader._BaseDataLoaderIter
        patches.set(base, "__next__", make_next(rec, base.__next__, tensor_type, "batch"))
    try:
        from torch_xla.distributed import parallel_loader
    except Exception:
        return
    per_device = parallel_loader.PerDeviceLoader
    patches.set(per_device, "next", make_next(rec, per_device.next, tensor_type, "loader"))


def make_next(rec: Recorder, original: Callable[..., Any], tensor_type: type,
               source: str) -> Callable[..., Any]:
    frames = rec.frames
    kinds = frames.cache
    named: dict[tuple[int, int, int], tuple[tuple[str, ...] | None, CodeType]] = {}
    """(id of the user frame's code, its instruction, leaves) -> (the names its line unpacks a
    batch into, that code: kept alive, so no id of a key is reused while it is cached).
    Keyed by the id: Python 3.11 does not cache a code object's hash."""
    last: list[Any] = [None, -1, -1, None]
    """The last batch's caller when it was the user's line itself: its code, instruction,
    leaves and names (a loop takes its batches from one line)."""
    getframe, get_ident = sys._getframe, threading.get_ident

    def unpacked(n: int) -> tuple[str, ...] | None:
        """The names the user's line that took the batch unpacks its ``n`` leaves into."""
        caller: FrameType | None = getframe(2)
        direct = caller
        for _ in range(3):
            if caller is None:
                return None
            file = caller.f_code.co_filename
            kind = kinds.get(file)
            if kind is None:
                kind = frames.kind(file)
            if kind == 0:
                break
            caller = caller.f_back  # (MpDeviceLoader's __next__ calls next)
        if caller is None:
            return None
        code = caller.f_code
        key = (id(code), caller.f_lasti, n)
        hit = named.get(key)
        if hit is None:
            hit = named[key] = (names_from_unpacking(code.co_filename, caller.f_lineno, n), code)
        if caller is direct:
            last[0], last[1], last[2], last[3] = code, caller.f_lasti, n, hit[0]
        return hit[0]

    def __next__(self: Any) -> Any:
        try:
            batch = original(self)
            if rec.active and get_ident() == rec.owner:
                try:
                    kind = type(batch)
                    if (kind is tuple or kind is list) and batch:
                        # A tuple batch is named by what the user's line unpacks it into (for x, y
                        # in loader:), so two loaders' batch[0] are not one input.
                        n = len(batch)
                        caller = getframe(1)
                        if caller.f_code is last[0] and caller.f_lasti == last[1] and n == last[2]:
                            names = last[3]
                        else:
                            names = unpacked(n)
                        if rec.on_batch_items(POSITION_NAMES if names is None else names, batch,
                                              tensor_type, source):
                            return batch
                    leaves = flatten_batch(batch, tensor_type)
                    if leaves and leaves[0][0] in ("batch[0]", "batch"):
                        names = unpacked(len(leaves))
                        if names is not None:
                            leaves = list(zip(names, [t for _, t in leaves]))
                    rec.on_batch(leaves, source)
                except Exception as exc:
                    rec.error("input hook", exc)
            return batch
        except BaseException as exc:
            user_frames_only(exc)
            raise

    return posing_as(__next__, original, "__next__")
