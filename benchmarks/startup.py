"""Start-up: the CPU time of ``xprof summary`` of a small run file, side by side with
``python -c pass`` (the interpreter alone) and ``xprof --version``, alternated so load on a
shared machine hits every arm alike. Goal: the summary at most 0.25 s of CPU.

    .venv/bin/python benchmarks/startup.py [--rounds 15] [--json out.json]

CPU time is user + system of each child process (``resource.getrusage``), so another
process on the machine slows the wall clock more than it does these figures. Then
``python -X importtime`` of the summary lists the slowest imports.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from _common import emit_json, table

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "sample_runs" / "padded_longest.json"
GOAL_S = 0.25


def _arms() -> dict[str, list[str]]:
    xprof = [sys.executable, "-m", "xprof"]
    return {"python -c pass": [sys.executable, "-c", "pass"],
            "xprof --version": [*xprof, "--version"],
            "xprof summary (small run)": [*xprof, "summary", str(SMALL)]}


def cpu_seconds(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slowest_imports(n: int = 12) -> list[tuple[str, float]]:
    """The imports of the summary with the most cumulative time (ms), outermost first."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "xprof", "summary", str(SMALL)],
                          capture_output=True, text=True, cwd=ROOT)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].rstrip()
            if len(name) - len(name.lstrip()) <= 3:  # top-level and their direct imports
                rows.append((name.strip(), int(parts[1]) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    arms = _arms()
    seen: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, cmd in arms.items():
            seen[name].append(cpu_seconds(cmd))
    base = statistics.median(seen["python -c pass"])
    rows = [[name, f"{statistics.median(v) * 1000:.0f}", f"{min(v) * 1000:.0f}", f"{max(v) * 1000:.0f}",
             f"{statistics.median(v) / base:.1f}x"] for name, v in seen.items()]
    print(f"CPU time of each command, {args.rounds} alternating rounds ({sys.executable})")
    print(table(rows, ["command", "median ms", "min ms", "max ms", "/ python -c pass"]))
    summary = statistics.median(seen["xprof summary (small run)"])
    print(f"\nxprof summary: {summary:.3f} s of CPU, goal <= {GOAL_S} s: {'met' if summary <= GOAL_S else 'NOT met'}")
    print("\nSlowest imports of the summary (cumulative ms, python -X importtime):")
    for name, ms in slowest_imports():
        print(f"  {ms:7.1f}  {name}")
    emit_json(args.json, {"startup_cpu_s": {k: statistics.median(v) for k, v in seen.items()}})


if __name__ == "__main__":
    main()
