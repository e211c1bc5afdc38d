"""Shared fixtures.

torch_xla is imported once per test process (it takes seconds); tests of the
recording path run real torch_xla on the CPU (PJRT_DEVICE=CPU). An autouse fixture
fails any test that leaves a ``watch()`` running or a hook installed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
# The tests run the product with every default on, the summary cache included; it is kept in a
# folder of this session's own (XPROF_CACHE_DIR is where, not whether), so nothing is written
# to the user's ~/.cache and no entry outlives the session.
os.environ.pop("XPROF_NO_CACHE", None)
CACHE_DIR = tempfile.mkdtemp(prefix="xprof-test-cache-")
os.environ["XPROF_CACHE_DIR"] = CACHE_DIR

ROOT = Path(__file__).resolve().parent.parent


def _hook_state() -> dict[str, Any]:
    """Identity of everything watch() patches, where those modules are already loaded."""
    import logging
    import warnings

    state: dict[str, Any] = {"warnings.showwarning": warnings.showwarning,
                             "warnings._showwarnmsg": getattr(warnings, "_showwarnmsg", None),
                             "dynamo log handlers": tuple(logging.getLogger("torch._dynamo.convert_frame").handlers)}
    torch = sys.modules.get("torch")
    if torch is not None:
        from xprof.recorder.hooks import DATA_DEPENDENT, HOST_READS

        # Only what watch() patches: pickling, for one, caches __slotnames__ on the class.
        state["Tensor"] = {k: torch.Tensor.__dict__.get(k)
                           for k in (*HOST_READS, *DATA_DEPENDENT, "to", "__getitem__", "__setitem__")}
        state["torch"] = {k: getattr(torch, k, None) for k in (*DATA_DEPENDENT, "where")}
    xlac = sys.modules.get("torch_xla._XLAC")
    if xlac is not None:
        state["step_marker"] = xlac._xla_step_marker
        state["sync_multi"] = xlac._xla_sync_multi
    xm = sys.modules.get("torch_xla.core.xla_model")
    if xm is not None:
        state["add_step_closure"] = xm.add_step_closure
    if torch is not None:
        state["Module.train"] = torch.nn.Module.__dict__.get("train")
        state["autograd.backward"] = torch.autograd.backward
        state["autograd.grad"] = torch.autograd.grad
        state["no_grad.__enter__"] = torch.no_grad.__dict__.get("__enter__")
        state["inference_mode.__enter__"] = torch.inference_mode.__dict__.get("__enter__")
    dl = sys.modules.get("torch.utils.data.dataloader")
    if dl is not None:
        state["dl_next"] = dl._BaseDataLoaderIter.__dict__.get("__next__")
    pl = sys.modules.get("torch_xla.distributed.parallel_loader")
    if pl is not None:
        state["pdl_next"] = pl.PerDeviceLoader.__dict__.get("next")
    return state


@pytest.fixture(scope="session", autouse=True)
def _cache_folder_removed() -> Iterator[None]:
    yield
    shutil.rmtree(CACHE_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_leaked_watch() -> Iterator[None]:
    before = _hook_state()
    yield
    from xprof.recorder.watch import active

    assert active() is None, "a test left xprof.watch() running"
    after = _hook_state()
    for key, value in before.items():
        if key == "dynamo log handlers":
            assert after[key] == value, "a test left a handler on torch._dynamo's log"
        elif key in ("Tensor", "torch"):
            changed = {k for k in set(value) | set(after[key])
                       if value.get(k) is not after[key].get(k)}
            assert not changed, f"a test left {key} patched: {sorted(changed)}"
        else:
            assert after.get(key) is value, f"a test left {key} patched"


@pytest.fixture(scope="session")
def xla() -> Any:
    """torch_xla on the CPU, imported once; skips where torch_xla is not installed."""
    pytest.importorskip("torch_xla")
    import torch_xla

    return torch_xla


@pytest.fixture(scope="session")
def device(xla: Any) -> Any:
    return xla.device()
