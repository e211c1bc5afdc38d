"""Which part of ``watch()`` costs the loop its time, measured where it runs (in the loop).

``overhead.py`` times each hook's own work in a tight loop; this runs the same tiny training
loop under several configurations of ``watch()`` in rotating blocks of one process, and
prints each arm's median of per-pair ratios against the plain loop (steady state: each
block's first 20 steps left out):

- ``plain``, ``plain2``: no watch; plain2 against plain is the noise floor;
- ``watched``: ``watch()`` as users run it (live notices off);
- ``inactive``: ``watch()`` with the recorder inactive: every hook installed, each wrapper
  a pass-through;
- ``held``: the writer thread held off while the block runs (the records are written
  after the block);
- ``noinputs``: ``watch(inputs=False)``: no DataLoader batch or ``.to(device)`` recording;
- ``bare``: ``watch(inputs=False, syncs=False)``: barriers, counters and evidence only.

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/overhead_arms.py [--blocks 80]
        [--arms plain,watched,noinputs,bare,plain2] [--cpu 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import TinyLoop, median, median_ci, pin_cpu

ARMS = ("plain", "watched", "inactive", "held", "noinputs", "bare", "plain2")
HEAD = 20
"""Steps at the start of each block left out (watch() starting)."""


def _arm(name: str, loop: TinyLoop, tmp: str, tag: str, steps: int) -> list[float]:
    from overhead import FLUSH_WAIT, _writer_held

    import xprof

    path = os.path.join(tmp, f"{tag}.json")
    if name.startswith("plain"):
        return loop.timed_steps(steps)
    if name == "inactive":
        with xprof.watch(path, live=False) as w:
            assert w.recorder is not None
            w.recorder.active = False
            try:
                return loop.timed_steps(steps)
            finally:
                w.recorder.active = True
    if name == "held":
        with _writer_held(), xprof.watch(path, live=False):
            return loop.timed_steps(steps)
    kwargs: dict[str, Any] = {"noinputs": {"inputs": False}, "bare": {"inputs": False, "syncs": False}}.get(name, {})
    with xprof.watch(path, live=False, **kwargs):
        got = loop.timed_steps(steps)
        time.sleep(FLUSH_WAIT)  # the writer's pass over the block's last steps, not timed
        return got


def run(arms: list[str], blocks: int, steps: int) -> dict[str, float]:
    import torch_xla.core.xla_model as xm

    loop = TinyLoop()
    loop.timed_steps(30)  # compiles
    tmp = tempfile.mkdtemp(prefix="xprof-arms-")
    _arm("watched", loop, tmp, "warm", 30)
    pairs: dict[str, list[float]] = {a: [] for a in arms}
    step: Callable[[str, str], list[float]] = lambda a, tag: _arm(a, loop, tmp, tag, steps)  # noqa: E731
    for b in range(blocks):
        order = arms[b % len(arms):] + arms[:b % len(arms)]
        got = {}
        for a in order:
            xm.wait_device_ops()  # every arm starts with the device idle
            got[a] = step(a, f"{a}{b}")
        base = median(got["plain"][HEAD:])
        for a in arms:
            pairs[a].append(median(got[a][HEAD:]) / base)
    _intervals.clear()
    _intervals.update({a: median_ci(v) for a, v in pairs.items()})
    return {a: median(v) for a, v in pairs.items()}


_intervals: dict[str, tuple[float, float]] = {}
"""The last run's 95% bootstrap interval of each arm's median (printed beside it)."""


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=80, help="rotations of the arms")
    ap.add_argument("--steps", type=int, default=100, help="steps per block")
    ap.add_argument("--arms", default="plain,watched,inactive,noinputs,bare,plain2",
                    help=f"comma-separated, from {', '.join(ARMS)} (plain is the reference)")
    ap.add_argument("--cpu", type=int, help="run on this one CPU only (os.sched_setaffinity, set before torch "
                    "is imported): no cross-CPU wake-ups, and the writer thread's work shows in wall time")
    args = ap.parse_args(argv)
    pin_cpu(args.cpu)
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or "plain" not in arms:
        ap.error(f"arms must include plain and come from {', '.join(ARMS)} (got {', '.join(unknown) or 'no plain'})")
    ratios = run(arms, args.blocks, args.steps)
    print(f"median of per-pair ratios against plain, steady state, {args.blocks} rotations of "
          f"{len(arms)} arms x {args.steps} steps:")
    for a in arms:
        lo, hi = _intervals.get(a, (float("nan"), float("nan")))
        print(f"  {a:9s} {ratios[a]:.4f}   (95% bootstrap interval {lo:.4f}-{hi:.4f})")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return ratios


if __name__ == "__main__":
    main()
