"""What recording an SPMD loop costs, and how much of it is the per-input sharding read.

    PJRT_DEVICE=CPU CPU_NUM_DEVICES=4 .venv/bin/python benchmarks/spmd_overhead.py [--blocks N] [--steps N]

A tiny text model on 4 virtual CPU devices (``xr.use_spmd()``, a 4x1 mesh), three inputs
moved with ``.to(device)`` and sharded with ``xs.mark_sharding`` every step. Three arms in
interleaved blocks (rotating order): plain, ``watch()``, and ``watch()`` that keeps no
device tensors for the sharding read (``Recorder.keep_devices`` cleared), so the last two
differ only by that read. Prints the median wall ms a step per arm and the ratios, then the
read alone; asserts nothing (a shared machine's noise is larger than the read).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch_xla
import torch_xla.runtime as xr

xr.use_spmd()

import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit_json, json_arg  # noqa: E402

import xprof  # noqa: E402
from tests.scenarios.common import text_batch, text_loss, text_setup  # noqa: E402


def block(model: torch.nn.Module, opt: torch.optim.Optimizer, mesh: xs.Mesh, device: object,
          batches: list[dict[str, torch.Tensor]]) -> list[float]:
    times = []
    for cpu in batches:
        t = time.perf_counter()
        batch = {k: v.to(device) for k, v in cpu.items()}
        for v in batch.values():
            xs.mark_sharding(v, mesh, ("data",) + (None,) * (v.dim() - 1))
        loss = text_loss(model, batch)  # type: ignore[arg-type]
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = torch_xla.device()
    mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (4, 1), ("data", "model"))
    xs.set_global_mesh(mesh)
    model, opt = text_setup(device, dim=24)
    batches = [text_batch(8, 16, seed=k) for k in range(args.steps)]
    block(model, opt, mesh, device, batches[:5])  # compile outside the measurement
    xm.wait_device_ops()
    arms: dict[str, list[float]] = {"plain": [], "watched": [], "no sharding read": []}
    folder = tempfile.mkdtemp(prefix="xprof-spmd-bench-")
    order = list(arms)
    kept = 0
    for b in range(args.blocks):
        for arm in order[b % 3:] + order[:b % 3]:
            if arm == "plain":
                times = block(model, opt, mesh, device, batches)
            else:
                with xprof.watch(os.path.join(folder, f"{arm[:2]}{b}.json"), live=False) as w:
                    rec = w.recorder
                    assert rec is not None and rec.spmd
                    if arm == "no sharding read":
                        rec.keep_devices = False
                    times = block(model, opt, mesh, device, batches)
                if arm == "watched":
                    run = xprof.load(w.path)
                    kept = max(kept, sum(1 for sig in run.signatures.values() for i in sig if i.sharding))
            arms[arm].append(statistics.median(times) * 1e3)
    med = {arm: statistics.median(v) for arm, v in arms.items()}
    for arm, v in med.items():
        print(f"{arm:18s} median of block medians {v:.3f} ms/step")
    read_us = (med["watched"] - med["no sharding read"]) * 1e3
    print(f"watched / plain            {med['watched'] / med['plain']:.3f}")
    print(f"no sharding read / plain   {med['no sharding read'] / med['plain']:.3f}")
    print(f"sharding read, per step    {read_us:+.1f} us ({kept} inputs recorded with a sharding)")
    # The read alone: the private call the recorder makes once per step for all inputs.
    tensors = [v.to(device) for v in batches[0].values()]
    for v in tensors:
        xs.mark_sharding(v, mesh, ("data",) + (None,) * (v.dim() - 1))
    read = torch_xla._XLAC._get_xla_sharding_specs
    n = 20000
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            read(tensors)
        best = min(best, (time.perf_counter() - t) / n)
    print(f"_get_xla_sharding_specs(3 tensors)  {best * 1e6:.2f} us a step (best of 5 x {n})")
    emit_json(args.json or json_arg(sys.argv), {
        "plain_ms": med["plain"], "watched_ms": med["watched"], "no_read_ms": med["no sharding read"],
        "ratio": med["watched"] / med["plain"], "read_us_loop": read_us, "read_us_call": best * 1e6})


if __name__ == "__main__":
    main()
