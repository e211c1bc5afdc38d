"""SPMD scenarios on 4 virtual CPU devices, each under its own ``xprof.watch()``.

Run in a process of its own (SPMD must be switched on before any device use, and the
shared pytest process has one device):

    PJRT_DEVICE=CPU CPU_NUM_DEVICES=4 python tests/scripts/spmd_scenarios.py OUT_DIR [NAME...]

Writes ``OUT_DIR/NAME.json`` for each scenario and ``OUT_DIR/NAME.counters.json`` with
torch_xla's own counter deltas and ExecuteReplicatedTime total over the same loop (the
referee for the run's counts and times).
``--bare NAME`` runs one scenario without ``watch()`` (for ``xprof run``, which starts
recording before the script switches SPMD on).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import numpy as np
import torch
import torch_xla
import torch_xla.runtime as xr

xr.use_spmd()

import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402

import xprof  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.scenarios.common import SPMD_UNSHARDED_AT as UNSHARDED_AT  # noqa: E402
from tests.scenarios.common import text_batch, text_loss, text_setup  # noqa: E402

COUNTERS = ("UncachedCompile", "CachedCompile", "ExecuteComputation", "ExecuteReplicated", "MarkStep")
LENGTHS = [12, 17, 12, 23, 17, 30, 12, 23, 30, 17]


def shard_batch(batch: dict[str, torch.Tensor], mesh: xs.Mesh, skip: tuple[str, ...] = ()) -> None:
    for name, t in batch.items():
        if name not in skip:
            xs.mark_sharding(t, mesh, ("data",) + (None,) * (t.dim() - 1))


def train(device: Any, mesh: xs.Mesh, dim: int, steps: int, length: Callable[[int], int],
          unsharded_at: tuple[int, ...] = (), read: bool = False, loader: bool = False) -> None:
    """The text model trained on batches moved with ``.to`` and sharded with ``mark_sharding``;
    ``input_ids`` left unsharded at ``unsharded_at``, the loss read on the host when ``read``;
    the CPU batches come from a ``DataLoader`` when ``loader``."""
    model, opt = text_setup(device, dim=dim)
    cpu = [text_batch(8, length(step), seed=step) for step in range(steps)]
    batches = iter(torch.utils.data.DataLoader(cpu, batch_size=None) if loader else cpu)
    for step in range(steps):
        batch = {k: v.to(device) for k, v in next(batches).items()}
        shard_batch(batch, mesh, ("input_ids",) if step in unsharded_at else ())
        loss = text_loss(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if read:
            loss.item()  # expect: item
        torch_xla.sync()


def padding(device: Any, mesh: xs.Mesh) -> None:
    """Per-batch padding under SPMD: every batch sharded the same way, lengths vary."""
    train(device, mesh, dim=20, steps=20, length=lambda step: LENGTHS[step % len(LENGTHS)])


def sharding_change(device: Any, mesh: xs.Mesh) -> None:
    """Same shapes every step (DataLoader batches); at two steps ``input_ids`` is left
    unsharded (replicated)."""
    train(device, mesh, dim=21, steps=20, length=lambda step: 16, unsharded_at=UNSHARDED_AT, loader=True)


def item_every_step(device: Any, mesh: xs.Mesh) -> None:
    """A host read of the loss every step: the read runs the graph early (ExecuteReplicated)."""
    train(device, mesh, dim=22, steps=12, length=lambda step: 16, read=True)


def fsdpv2(device: Any, mesh: xs.Mesh, steps: int = 12) -> None:
    """A clean FSDPv2 loop: parameters sharded by SpmdFullyShardedDataParallel, batches by
    MpDeviceLoader's ``input_sharding``; fixed shapes."""
    import torch_xla.distributed.parallel_loader as pl
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
        SpmdFullyShardedDataParallel as FSDPv2,
    )

    fsdp_mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (4, 1), ("fsdp", "model"))
    xs.set_global_mesh(fsdp_mesh)
    torch.manual_seed(0)
    model = FSDPv2(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(steps)]
    loader = pl.MpDeviceLoader(data, device, input_sharding=xs.ShardingSpec(fsdp_mesh, ("fsdp", None)))
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


SCENARIOS: dict[str, Callable[[Any, xs.Mesh], None]] = {
    "spmd_padding": padding, "spmd_sharding_change": sharding_change, "spmd_item": item_every_step,
    "spmd_fsdpv2": fsdpv2,
}


def main(out: str, names: list[str]) -> None:
    device = torch_xla.device()
    mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (4, 1), ("data", "model"))
    for name in names or list(SCENARIOS):
        if name != "spmd_fsdpv2":
            xs.set_global_mesh(mesh)
        before = {c: met.counter_value(c) or 0 for c in COUNTERS}
        time_before = _execute_time()
        with xprof.watch(os.path.join(out, f"{name}.json")):
            SCENARIOS[name](device, mesh)
        after = {c: met.counter_value(c) or 0 for c in COUNTERS}
        deltas: dict[str, float] = {c: after[c] - before[c] for c in COUNTERS}
        deltas.update({k: v - time_before[k] for k, v in _execute_time().items()})
        with open(os.path.join(out, f"{name}.counters.json"), "w") as f:
            json.dump(deltas, f)


def _execute_time() -> dict[str, float]:
    """torch_xla's own total of ExecuteReplicatedTime (ns) and its sample count."""
    data = met.metric_data("ExecuteReplicatedTime")
    return {"ExecuteReplicatedTime_ns": float(data[1]) if data else 0.0,
            "ExecuteReplicatedTime_samples": float(data[0]) if data else 0.0}


if __name__ == "__main__":
    if sys.argv[1] == "--bare":
        mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (4, 1), ("data", "model"))
        xs.set_global_mesh(mesh)
        SCENARIOS[sys.argv[2]](torch_xla.device(), mesh)
    else:
        main(sys.argv[1], sys.argv[2:])
