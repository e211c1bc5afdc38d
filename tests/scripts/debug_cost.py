"""Median step time of a tiny torch_xla loop, to measure what the debug capture costs.

    xprof run --no-debug tests/scripts/debug_cost.py 300   # without
    xprof run            tests/scripts/debug_cost.py 300   # with PT_XLA_DEBUG_LEVEL=2

Prints ``median_step_ms=<float>`` and ``p10_step_ms`` (wall clock; the 10th percentile
is the least disturbed by other load on a shared machine) and ``median_step_cpu_ms=<float>`` (CPU
time of the whole process, all threads: steadier than wall time on a shared machine)
over the steps after warm-up (the first 10).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm


def main(steps: int) -> None:
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16).to(dev)
    times = []
    cpu = []
    for _ in range(steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        xm.mark_step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    xm.wait_device_ops()
    steady = sorted(times[10:])
    p10 = steady[len(steady) // 10]
    print(f"median_step_ms={statistics.median(steady) * 1e3:.4f} p10_step_ms={p10 * 1e3:.4f} "
          f"median_step_cpu_ms={statistics.median(cpu[10:]) * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
