"""The step barrier: ``torch_xla._XLAC._xla_step_marker``, which every barrier ends in, and
the inputs of a ``torch_xla.compile`` call read at its entry barrier.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import Patches, user_frames_only
from xprof.recorder.inputs import flatten_batch
from xprof.runfile import CACHED, EXECUTE, UNCACHED

_BARRIER_CALLERS = {
    "optimizer_step": "optimizer_step",
    "mark_step": "mark_step",
    "next": "loader",
    "_compile": "compile",
    "_clear_pending_ops_before_compile": "compile_entry",
}


_KIND_CACHE: dict[tuple[int, int, int], tuple[str, tuple[Any, Any, Any]]] = {}
"""Barrier kinds by the ids of the code objects of the three frames above the step marker.
Each entry keeps its code objects alive, so no id of a key is reused while it is cached.
(Keyed by ids: Python 3.11 does not cache a code object's hash, and hashing three costs
more than the rest of the lookup.)"""

_LAST_KIND: list[Any] = [None, None, None, "sync"]
"""The last lookup's three code objects and kind: a loop asks from the same place each step."""


def _barrier_kind(frame: Any) -> str:
    """Which API asked for this barrier, from the few frames above the step marker.

    Cached by the code objects of those frames (see :data:`_KIND_CACHE`).
    """
    f2 = frame.f_back if frame is not None else None
    f3 = f2.f_back if f2 is not None else None
    c1 = frame.f_code if frame is not None else None
    c2 = f2.f_code if f2 is not None else None
    c3 = f3.f_code if f3 is not None else None
    last = _LAST_KIND
    if c1 is last[0] and c2 is last[1] and c3 is last[2]:
        kind: str = last[3]
        return kind
    key = (id(c1), id(c2), id(c3))
    hit = _KIND_CACHE.get(key)
    if hit is None:
        hit = _KIND_CACHE[key] = (_barrier_kind_walk(frame), (c1, c2, c3))
    last[0], last[1], last[2], last[3] = c1, c2, c3, hit[0]
    return hit[0]


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
    counters = rec.counters
    counts, value = counters.sync_counts, counters.value
    get_ident, clock, getframe = threading.get_ident, time.time, sys._getframe

    def _xla_step_marker(*args: Any, **kwargs: Any) -> Any:
        try:
            if not rec.active or get_ident() != rec.owner:
                return original(*args, **kwargs)
            try:
                if rec.explain is not None:  # --explain: hash the pending graph (recorder/explain.py)
                    rec.explain.before_barrier()
                tb = clock()
                before = counts() if counters.spmd else (value(UNCACHED) or 0, value(CACHED) or 0,
                                                         value(EXECUTE) or 0)
                caller = getframe(1)
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
            user_frames_only(exc)
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
