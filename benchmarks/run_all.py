"""Run every benchmark in turn (each in its own process) and print one table at the end.

    make bench                                     # all of them; the report scale up to 100k steps
    .venv/bin/python benchmarks/run_all.py --full  # adds the 1M-step report (about 6 more minutes)

Each benchmark prints its own figures as it goes; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import table

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(name: str, args: list[str], tmp: str) -> dict[str, Any] | None:
    out = os.path.join(tmp, f"{name}.json")
    print(f"\n=== {name} {' '.join(args)}", flush=True)
    t = time.perf_counter()
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    proc = subprocess.run([sys.executable, os.path.join(HERE, f"{name}.py"), *args, "--json", out], env=env)
    print(f"=== {name}: {time.perf_counter() - t:.0f} s, exit {proc.returncode}", flush=True)
    if proc.returncode != 0 or not os.path.exists(out):
        return None
    with open(out, encoding="utf-8") as f:
        return dict(json.load(f))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="include the 1M-step report (minutes)")
    args = ap.parse_args(argv)
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="xprof-bench-all-") as tmp:
        ov = _run("overhead", [], tmp)
        mem = _run("memory", [], tmp)
        scale = _run("report_scale", [] if args.full else ["--quick"], tmp)
    if ov:
        lo = ov["loop"]
        rows.append(["overhead", "step time watched / plain (median wall)", f"{lo['ratio']:.3f}", "<= 1.02"])
        rows.append(["overhead", "median of per-pair ratios", f"{lo['median_pair_ratio']:.3f}", "<= 1.02"])
        rows.append(["overhead", "process CPU time watched / plain", f"{lo['cpu_ratio']:.3f}", "<= 1.02"])
        rows.append(["overhead", "noise floor: per-pair ratio plain again / plain", f"{lo['noise_pair_ratio']:.3f}",
                     "1.0 +- noise"])
        if ov.get("budget"):
            b = ov["budget"]
            rows.append(["overhead", "added work a step (hooks + writer CPU), share of the step",
                         f"{b['total_us']:.1f} µs, {b['share'] * 100:.1f}%", "<= 2%"])
        for h in ov["hooks"]:
            rows.append(["overhead", f"added µs: {h['hook']}", f"{h['added_us']:.1f}", ""])
    if mem:
        sim = mem["simulated"]["checkpoints"]
        first, last = sim[0], sim[-1]
        if "traced" in mem:
            tr = mem["traced"]["checkpoints"]
            rows.append(["memory", f"recorder live KiB at {tr[0]['steps']} -> {tr[-1]['steps']} steps",
                         f"{tr[0]['recorder_kib']:.0f} -> {tr[-1]['recorder_kib']:.0f}", "flat"])
        rows.append(["memory", f"gc objects at {first['steps']} -> {last['steps']} simulated steps",
                     f"{first['gc_objects']} -> {last['gc_objects']}", "flat"])
        rows.append(["memory", f"RSS change KiB at {last['steps']} simulated steps",
                     f"{last['rss_delta_kib']}", "~0"])
        rows.append(["memory", "run file KiB per 1k steps (simulated)",
                     f"{last['file_bytes'] / last['steps'] * 1000 / 1024:.0f}", ""])
        if "real" in mem:
            rows.append(["memory", f"run file KiB per 1k steps (real, {mem['real']['steps']} steps)",
                         f"{mem['real']['bytes_per_1k_steps'] / 1024:.0f}", ""])
    if scale:
        for r in scale["rows"]:
            what = f"{r['steps']} steps" + (f", {r['steps'] // 2} shapes" if r.get("distinct") else "")
            if "failed" in r:
                rows.append(["report_scale", what, "failed", ""])
                continue
            goal = "< 5 s, < 10 MB" if r["steps"] == 100_000 and not r.get("distinct") else ""
            rows.append(["report_scale", f"{what}: load+analyze+report s / HTML MB",
                         f"{r['total_s']:.2f} / {r['html_mb']:.2f}", goal])
    print("\n" + table(rows, ["benchmark", "figure", "value", "goal"]))


if __name__ == "__main__":
    main()
