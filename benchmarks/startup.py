"""Start-up: the CPU time of ``xprof summary`` of a small run file, side by side with
``python -c pass`` (the interpreter alone) and ``xprof --version``, alternated so load on a
shared machine hits every arm alike. Goal: the summary at most 0.25 s of CPU.

The summary is timed twice: cold (``XPROF_NO_CACHE=1``: the analysis runs, pandas and all)
and again on the same file (served from the summary cache, xprof/cli/summary_cache.py, in a
folder of its own made for this run: the first round fills it).

    .venv/bin/python benchmarks/startup.py [--rounds 15] [--json out.json]

CPU time is user + system of each child process (``resource.getrusage``), so another
process on the machine slows the wall clock more than it does these figures. Then
``python -X importtime`` of the summary lists the slowest imports.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import emit_json, table

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "sample_runs" / "padded_longest.json"
GOAL_S = 0.25


COLD, WARM = "xprof summary (small run), cold", "xprof summary, same file again"


def _arms(cache: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    xprof = [sys.executable, "-m", "xprof"]
    off = {**os.environ, "XPROF_NO_CACHE": "1"}
    on = {k: v for k, v in os.environ.items() if k != "XPROF_NO_CACHE"} | {"XPROF_CACHE_DIR": cache}
    return {"python -c pass": ([sys.executable, "-c", "pass"], off),
            "xprof --version": ([*xprof, "--version"], off),
            COLD: ([*xprof, "summary", str(SMALL)], off),
            WARM: ([*xprof, "summary", str(SMALL)], on)}


def cpu_seconds(cmd: list[str], env: dict[str, str] | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slowest_imports(n: int = 12) -> list[tuple[str, float]]:
    """The imports of the summary with the most cumulative time (ms), outermost first."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "xprof", "summary", str(SMALL)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "XPROF_NO_CACHE": "1"})
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
    with tempfile.TemporaryDirectory() as cache:
        arms = _arms(cache)
        cpu_seconds(*arms[WARM])  # (fills the cache)
        seen: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(args.rounds):
            for name, (cmd, env) in arms.items():
                seen[name].append(cpu_seconds(cmd, env))
    base = statistics.median(seen["python -c pass"])
    rows = [[name, f"{statistics.median(v) * 1000:.0f}", f"{min(v) * 1000:.0f}", f"{max(v) * 1000:.0f}",
             f"{statistics.median(v) / base:.1f}x"] for name, v in seen.items()]
    print(f"CPU time of each command, {args.rounds} alternating rounds ({sys.executable})")
    print(table(rows, ["command", "median ms", "min ms", "max ms", "/ python -c pass"]))
    for name in (COLD, WARM):
        took = statistics.median(seen[name])
        print(f"\n{name}: {took:.3f} s of CPU, goal <= {GOAL_S} s: {'met' if took <= GOAL_S else 'NOT met'}", end="")
    print()
    print("\nSlowest imports of the summary (cumulative ms, python -X importtime):")
    for name, ms in slowest_imports():
        print(f"  {ms:7.1f}  {name}")
    emit_json(args.json, {"startup_cpu_s": {k: statistics.median(v) for k, v in seen.items()}})


if __name__ == "__main__":
    main()
