"""The step-time gate's false alarms and misses, over real recordings (issue 38).

A tiny torch_xla loop on the CPU (a chain of matmuls + tanh, ``torch_xla.sync()`` and
``xm.wait_device_ops()`` a step) is recorded with ``xprof.watch()`` at three sizes, about 0.5, 5 and 50 ms of execute
time a step, ``STEPS`` steps each (>= 100 steady ones). Each round records, per size, the base
loop, the same loop again and a loop with 25% more layers (25% more execute time), in an order
that rotates; half the rounds run with ``--burners`` processes spinning on the CPU beside
them (a busy machine). Then, with ``xprof.compare`` and ``--max-step-time-increase LIMIT``:

- false alarm: the base against the same loop recorded in the same round fails the gate;
- miss: the base against the 25% slower loop of the same round passes it.

Printed: each pair's ratio of medians and its 95% interval, and the rates, for a 10% limit
(the one to set for catching a 25% slowdown) and a 25% limit (which, applied to the interval,
catches only what is clearly more than 25%).

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/time_gate.py [--rounds 4] [--steps 130] [--burners 1] [--eigen-threads]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import table

os.environ.setdefault("PJRT_DEVICE", "CPU")

SIZES = {"0.5ms": (200, 4), "5ms": (560, 8), "50ms": (1152, 16)}
"""Size -> (matrix width, layers of the base loop); the slow loop has 25% more layers."""
LIMITS = ("10%", "25%")


@contextmanager
def burning(n: int) -> Iterator[None]:
    """``n`` processes spinning on the CPU while the block runs (none when ``n`` is 0)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def record(path: str, width: int, layers: int, steps: int) -> None:
    """One recording of the loop: ``layers`` matmuls of ``width`` a step, ``steps`` steps."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    import xprof

    device = torch_xla.device()
    gen = torch.Generator().manual_seed(0)
    weights = [(torch.randn(width, width, generator=gen) / width ** 0.5).to(device) for _ in range(layers)]
    x0 = torch.randn(64, width, generator=gen).to(device)
    with xprof.watch(path, live=False):
        x = x0
        for _ in range(steps):
            x = x0
            for w in weights:
                x = torch.tanh(x @ w)
            # (waiting for the step: a loop that runs ahead queues its graphs, and each one's
            # ExecuteTime then holds its wait behind the ones before it)
            torch_xla.sync()
            xm.wait_device_ops()


def gate_verdicts(base: str, new: str) -> dict[str, Any]:
    """The compare of ``new`` against ``base``: the interval and each limit's verdict."""
    import xprof
    from xprof.comparison import Gate

    result = xprof.compare(base, new)
    pair = result.pairs[0]
    m = pair.metric("execute_ms_median")
    out: dict[str, Any] = {"base_ms": m.base, "new_ms": m.new, "interval": m.interval}
    for limit in LIMITS:
        out[limit] = bool(Gate.parse(max_step_time_increase=limit).check(pair))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4, help="rounds of recordings (half of them busy)")
    ap.add_argument("--steps", type=int, default=130, help="steps a recording")
    ap.add_argument("--burners", type=int, default=1, help="CPU-spinning processes in a busy round")
    ap.add_argument("--eigen-threads", action="store_true",
                    help="let XLA's CPU client run a graph on its thread pool (default: one thread, "
                         "so that a busy machine preempts one thread, not a pool that waits on its slowest)")
    args = ap.parse_args()
    if not args.eigen_threads:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    started = time.perf_counter()
    rows, alarms, misses = [], {lim: 0 for lim in LIMITS}, {lim: 0 for lim in LIMITS}
    pairs = 0
    with tempfile.TemporaryDirectory() as tmp:
        record(os.path.join(tmp, "warmup.json"), 64, 2, 10)  # (the first recording of a process starts XLA's pools)
        for r in range(args.rounds):
            busy = r % 2 == 1
            with burning(args.burners if busy else 0):
                for size, (width, layers) in SIZES.items():
                    arms = [("base", layers), ("same", layers), ("slow", layers + layers // 4)]
                    arms = arms[r % 3:] + arms[:r % 3]  # (the order rotates: drift hits every arm)
                    paths = {}
                    for name, n in arms:
                        paths[name] = os.path.join(tmp, f"{size}_{r}_{name}.json")
                        record(paths[name], width, n, args.steps)
                    for kind in ("same", "slow"):
                        g = gate_verdicts(paths["base"], paths[kind])
                        iv = g["interval"]
                        for lim in LIMITS:
                            if kind == "same":
                                alarms[lim] += g[lim]
                            else:
                                misses[lim] += not g[lim]
                        rows.append([size, r, "busy" if busy else "quiet", kind, f"{g['base_ms']:.3f}",
                                     f"{g['new_ms']:.3f}", f"{g['new_ms'] / g['base_ms']:.2f}",
                                     iv.percent() if iv else "n/a",
                                     *("FAIL" if g[lim] else "pass" for lim in LIMITS)])
                    pairs += 1
    print(table(rows, ["size", "round", "machine", "new", "base ms", "new ms", "ratio", "95% interval",
                       *(f"gate {lim}" for lim in LIMITS)]))
    print(f"\n{pairs} same-loop pairs and {pairs} pairs against a loop with 25% more layers "
          f"({args.steps} steps a recording, {args.rounds // 2} of {args.rounds} rounds with "
          f"{args.burners} CPU burner(s)); {time.perf_counter() - started:.0f} s in all")
    for lim in LIMITS:
        print(f"--max-step-time-increase {lim}: false alarms {alarms[lim]}/{pairs}, misses {misses[lim]}/{pairs}")


if __name__ == "__main__":
    main()
