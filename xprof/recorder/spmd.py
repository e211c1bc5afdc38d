"""SPMD facts the recorder needs: is SPMD on, the run's layout, and the inputs' shardings.

Under SPMD (``xr.use_spmd()``) one process drives all of its host's devices: torch_xla
counts executions in ``ExecuteReplicated`` (timed by ``ExecuteReplicatedTime``) instead of
``ExecuteComputation``, and a compiled graph depends on how its inputs are sharded as much
as on their shapes. Everything here goes through torch_xla's public runtime and sharding
modules where they exist and through guarded private calls otherwise; a failure means
"not known", never an exception into the user's loop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

ShardingsOf = Callable[[Sequence[Any]], Sequence[str]]
"""Device tensors -> their sharding specs, in order."""


def spmd_enabled() -> bool:
    """``xr.use_spmd()`` was called: the ``XLA_USE_SPMD`` flag it sets, read with the rule of
    torch_xla 2.9's own ``xr.is_spmd()`` (``"true"`` or a positive integer). Read directly:
    it is asked at every barrier until the first graph runs, and the call through torch_xla
    costs several times the dictionary lookup."""
    raw = _ENV_DATA.get(_SPMD_KEY) if _ENV_DATA is not None else None
    if raw is None:
        if _ENV_DATA is not None:
            return False
        flag = os.environ.get("XLA_USE_SPMD", "")
    else:
        flag = os.fsdecode(raw) if isinstance(raw, bytes) else str(raw)
    return flag == "true" or (flag.isdigit() and int(flag) > 0)


# os.environ keeps its values in a plain dict under encoded keys (CPython's os.py): one dict
# lookup instead of the Mapping machinery, since this is asked at every barrier until the
# first graph runs. Where the layout differs, os.environ.get is used.
_ENV_DATA: dict[Any, Any] | None = getattr(os.environ, "_data", None)
try:
    _SPMD_KEY: Any = os.environ.encodekey("XLA_USE_SPMD")  # type: ignore[attr-defined]
except Exception:
    _ENV_DATA = None
    _SPMD_KEY = None


def mesh_facts() -> dict[str, Any]:
    """``mesh_shape`` and ``axis_names`` of the global mesh (``xs.set_global_mesh``), if one
    is set; empty otherwise. Imports nothing: a script that shards has loaded the module."""
    spmd = sys.modules.get("torch_xla.distributed.spmd")
    get = getattr(spmd, "get_global_mesh", None)
    if not callable(get):
        return {}
    try:
        mesh = get()
    except Exception:
        return {}
    if mesh is None:
        return {}
    out: dict[str, Any] = {}
    try:
        out["mesh_shape"] = [int(d) for d in mesh.mesh_shape]
    except Exception:
        pass
    try:
        names = mesh.axis_names
        if names is not None:
            out["axis_names"] = [None if n is None else str(n) for n in names]
    except Exception:
        pass
    return out


def spmd_meta() -> dict[str, Any] | None:
    """The header's ``spmd`` entry: devices of the run and of this process, the process
    index and count, auto-sharding when on, and the mesh when one is set; None when SPMD
    is off."""
    if not spmd_enabled():
        return None
    out: dict[str, Any] = {}
    try:
        import torch_xla.runtime as xr

        out["devices"] = int(xr.global_runtime_device_count())
        out["local_devices"] = int(xr.addressable_runtime_device_count())
        out["process_index"] = int(xr.process_index())
        out["process_count"] = int(xr.process_count())
    except Exception:
        pass
    if os.environ.get("XLA_AUTO_SPMD", "").strip() == "1":
        out["auto"] = True
    out.update(mesh_facts())
    return out


def process_rank() -> tuple[int, int] | None:
    """(process index, process count) of an SPMD run: its ranks are processes (hosts),
    each driving all of its devices; None when SPMD is off or torch_xla cannot say."""
    if not spmd_enabled():
        return None
    try:
        import torch_xla.runtime as xr

        return int(xr.process_index()), int(xr.process_count())
    except Exception:
        return None


def shardings_reader() -> ShardingsOf | None:
    """A function giving the sharding specs of device tensors (``{devices=[4,1]0,1,2,3}``,
    ``{replicated}``, or ``""`` for none); None when torch_xla has no such call.

    ``_XLAC._get_xla_sharding_specs`` (one call for all of a step's inputs) and
    ``_get_xla_sharding_spec`` (one a tensor) are private: looked up once here, and the
    recorder guards every call.
    """
    try:
        import torch_xla

        xlac = torch_xla._XLAC
    except Exception:
        return None
    many = getattr(xlac, "_get_xla_sharding_specs", None)
    if callable(many):
        return many  # type: ignore[no-any-return]
    one = getattr(xlac, "_get_xla_sharding_spec", None)
    if callable(one):
        return lambda tensors: [one(t) for t in tensors]
    return None
