"""What xprof costs beside the other ways of watching a torch_xla loop: the anchors.

The same loop as ``overhead.py`` (``TinyLoop``, a ~1 ms CPU step), plain and under each
alternative, as a ratio to plain. Two groups, because some switch on only at import:

- in one process, in rotating blocks (each arm in every position equally often): plain,
  ``xprof.watch()``, ``met.short_metrics_report()`` after each step, ``met.metrics_report()``
  after each step, and each step inside ``xp.StepTrace`` (no trace running);
- in interleaved processes (torch_xla reads them when it starts): plain, ``PT_XLA_DEBUG_LEVEL=1``,
  ``PT_XLA_DEBUG_LEVEL=2``, ``XLA_METRICS_FILE`` (the full report written at every step),
  run in turn, the order reversed every other round (ABBA), each a fresh process of
  ``steps`` steps after a warm-up.

Each figure is the median over rotations (or rounds) of the arm's median step time over
plain's in the same rotation, and the same for CPU time (user + system, all threads).

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/anchors.py [--blocks 20] [--rounds 4] [--cpu 1]

``overhead.py`` runs it too (part 6).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import TinyLoop, emit_json, median, pin_cpu, quiet_deprecations, table

IN_PROCESS = ("plain", "xprof.watch()", "short_metrics_report() each step", "metrics_report() each step",
              "xp.StepTrace (no trace running)")
PROCESS_ARMS: dict[str, dict[str, str]] = {
    "plain (own process)": {},
    "PT_XLA_DEBUG_LEVEL=1": {"PT_XLA_DEBUG_LEVEL": "1"},
    "PT_XLA_DEBUG_LEVEL=2": {"PT_XLA_DEBUG_LEVEL": "2"},
    "XLA_METRICS_FILE": {"XLA_METRICS_FILE": "{tmp}/metrics.txt"},
}


def _stepper(loop: TinyLoop, arm: str) -> Callable[[], None]:
    """One step of ``loop`` as ``arm`` runs it (the watch itself is entered around the block)."""
    import torch_xla.debug.metrics as met
    import torch_xla.debug.profiler as xp

    if arm == "short_metrics_report() each step":
        def short() -> None:
            loop.step()
            met.short_metrics_report()
        return short
    if arm == "metrics_report() each step":
        def full() -> None:
            loop.step()
            met.metrics_report()
        return full
    if arm == "xp.StepTrace (no trace running)":
        count = iter(range(1 << 62))

        def traced() -> None:
            with xp.StepTrace("train", step_num=next(count)):  # (its exit is the barrier)
                loop.step(barrier=False)
        return traced
    return loop.step


def _timed(step: Callable[[], None], n: int) -> tuple[float, float]:
    """(median wall seconds a step, CPU seconds a step) over ``n`` steps."""
    clock = time.perf_counter
    out = []
    c0 = time.process_time()
    for _ in range(n):
        t0 = clock()
        step()
        out.append(clock() - t0)
    return median(out), (time.process_time() - c0) / n


@contextmanager
def _arm_context(arm: str, tmp: str, b: int) -> Iterator[None]:
    if arm != "xprof.watch()":
        yield
        return
    import xprof

    with xprof.watch(os.path.join(tmp, f"anchor{b}.json"), live=False):
        yield


def in_process(loop: TinyLoop, blocks: int, steps: int) -> dict[str, dict[str, float]]:
    """The in-process anchors in rotating blocks: each arm's median of per-rotation ratios to plain."""
    import torch_xla.core.xla_model as xm

    steppers = {arm: _stepper(loop, arm) for arm in IN_PROCESS}
    for arm in IN_PROCESS:
        steppers[arm]()  # warm (StepTrace's first use, the reports' first formatting)
    wall: dict[str, list[float]] = {a: [] for a in IN_PROCESS[1:]}
    cpu: dict[str, list[float]] = {a: [] for a in IN_PROCESS[1:]}
    with tempfile.TemporaryDirectory(prefix="xprof-anchors-") as tmp:
        for b in range(blocks):
            k = b % len(IN_PROCESS)
            order = IN_PROCESS[k:] + IN_PROCESS[:k]
            if b % 2:
                order = order[::-1]
            got: dict[str, tuple[float, float]] = {}
            for arm in order:
                xm.wait_device_ops()
                with _arm_context(arm, tmp, b):
                    got[arm] = _timed(steppers[arm], steps)
            for arm in IN_PROCESS[1:]:
                wall[arm].append(got[arm][0] / got["plain"][0])
                cpu[arm].append(got[arm][1] / got["plain"][1])
    return {arm: {"wall": median(wall[arm]), "cpu": median(cpu[arm])} for arm in IN_PROCESS[1:]}


def _child(steps: int, cpu: int | None) -> None:
    """One process of the interleaved arms: warm up, time ``steps`` steps, print JSON."""
    pin_cpu(cpu)
    quiet_deprecations()
    loop = TinyLoop()
    loop.timed_steps(40)
    wall, cpu_s = _timed(loop.step, steps)
    print(json.dumps({"wall": wall, "cpu": cpu_s}))


def in_processes(rounds: int, steps: int, cpu: int | None) -> dict[str, dict[str, float]]:
    """The env-var anchors, each arm a fresh process, interleaved ABBA over ``rounds``."""
    arms = list(PROCESS_ARMS)
    wall: dict[str, list[float]] = {a: [] for a in arms[1:]}
    cpus: dict[str, list[float]] = {a: [] for a in arms[1:]}
    with tempfile.TemporaryDirectory(prefix="xprof-anchors-") as tmp:
        for r in range(rounds):
            got: dict[str, dict[str, float]] = {}
            for arm in (arms if r % 2 == 0 else arms[::-1]):
                env = {k: v for k, v in os.environ.items() if k not in ("PT_XLA_DEBUG_LEVEL", "XLA_METRICS_FILE")}
                env.update({k: v.format(tmp=tmp) for k, v in PROCESS_ARMS[arm].items()})
                env.setdefault("PJRT_DEVICE", "CPU")
                cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(steps)]
                if cpu is not None:
                    cmd += ["--cpu", str(cpu)]
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                if proc.returncode != 0 or not lines:
                    raise RuntimeError(f"{arm}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
                got[arm] = json.loads(lines[-1])
            base = got[arms[0]]
            for arm in arms[1:]:
                wall[arm].append(got[arm]["wall"] / base["wall"])
                cpus[arm].append(got[arm]["cpu"] / base["cpu"])
    return {arm: {"wall": median(wall[arm]), "cpu": median(cpus[arm])} for arm in arms[1:]}


def anchors(loop: TinyLoop, blocks: int, steps: int, rounds: int, process_steps: int,
            cpu: int | None) -> dict[str, Any]:
    return {"in_process": in_process(loop, blocks, steps), "processes": in_processes(rounds, process_steps, cpu),
            "blocks": blocks, "steps": steps, "rounds": rounds, "process_steps": process_steps}


def print_anchors(a: dict[str, Any]) -> None:
    rows = [[arm, f"{f['wall']:.3f}", f"{f['cpu']:.3f}", "in process"] for arm, f in a["in_process"].items()]
    rows += [[arm, f"{f['wall']:.3f}", f"{f['cpu']:.3f}", "own processes"] for arm, f in a["processes"].items()]
    print(f"anchors: ratio to plain on the same loop (medians over {a['blocks']} rotations of "
          f"{a['steps']}-step blocks in process; over {a['rounds']} ABBA rounds of processes of "
          f"{a['process_steps']} steps):")
    print(table(rows, ["recording", "wall ratio", "CPU ratio", "measured"]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=20, help="rotations of the in-process arms")
    ap.add_argument("--steps", type=int, default=100, help="steps per in-process block")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of the interleaved processes")
    ap.add_argument("--process-steps", type=int, default=1000, help="timed steps per process")
    ap.add_argument("--cpu", type=int, help="run on this one CPU only (and the child processes)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.steps, args.cpu)
        return {}
    pin_cpu(args.cpu)
    quiet_deprecations()
    loop = TinyLoop()
    loop.timed_steps(30)
    a = anchors(loop, args.blocks, args.steps, args.rounds, args.process_steps, args.cpu)
    print_anchors(a)
    emit_json(args.json, a)
    return a


if __name__ == "__main__":
    main()
