"""How do loading, analysis and the HTML report scale with the length of a run?

Synthetic but well-formed run files are written with ``xprof.runfile.RunWriter``, with
the records a real run writes (shaped after ``sample_runs/padded_longest.json``): a
sequence length padded per batch (40 lengths, a new one compiles, a seen one is cached),
an ``.item()`` every 50 steps and a ``print`` every 1000, executions and graph sizes
batched every 256 steps, one fallback op. For 1k, 10k, 100k and 1M steps it times
``load_run``, ``xprof.analysis.analyze`` and the HTML report (``xprof.report``), and
prints file and HTML sizes and the growth per 10x. Each size runs in its own process so
its peak RSS is its own. No torch needed.

Goal: 100k steps report in < 5 s with < 10 MB of HTML; 1M still works.

    .venv/bin/python benchmarks/report_scale.py [--quick]   # --quick: skip 1M steps
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json, table

SIZES = (1_000, 10_000, 100_000, 1_000_000)
LENGTHS = [16 + 4 * k for k in range(40)]
T0 = 1.7e9


def write_synthetic(path: str, steps: int, seed: int = 0) -> None:
    """A realistic recording of ``steps`` steps with per-batch padding (a recompile pattern)."""
    from xprof.runfile import RunWriter

    rng = random.Random(seed)
    header = {"xprof_version": "0.1.0", "name": f"synthetic_{steps}",
              "started_at": "2026-01-01T00:00:00+00:00", "started_unix": T0,
              "meta": {"python": "3.11.7", "torch": "2.9.0", "torch_xla": "2.9.0", "device": "CPU",
                       "host": "bench", "pid": 1, "argv": ["train.py"], "cwd": "/work", "rank": 0,
                       "world_size": 1, "inputs": True, "syncs": True}}
    w = RunWriter(path, header)
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/work/train.py", "line": 41,
             "func": "train", "via": None, "code": "losses.append(loss.item())"}, flush=False)
    w.write({"type": "site", "id": 1, "kind": "repr", "file": "/work/train.py", "line": 44,
             "func": "train", "via": None, "code": "print(f\"step {i} loss {loss}\")"}, flush=False)
    sig_of: dict[int, int] = {}
    execs: list[list[float]] = []
    sizes: list[list[float]] = []
    t = T0
    for i in range(steps):
        length = LENGTHS[rng.randrange(len(LENGTHS))] if i >= 2 else LENGTHS[0]
        new_shape = length not in sig_of
        if new_shape:
            sig_of[length] = len(sig_of)
            w.write({"type": "sig", "id": sig_of[length], "inputs": [
                {"name": "input_ids", "shape": [8, length], "dtype": "int64", "src": "batch"},
                {"name": "attention_mask", "shape": [8, length], "dtype": "int64", "src": "batch"},
                {"name": "labels", "shape": [8], "dtype": "int64", "src": "batch"}]}, flush=False)
        compiles = new_shape or i == 1
        t0 = t
        tb = t0 + 0.004
        t1 = tb + (0.35 if compiles else 0.001)
        c: dict[str, int] = {"MarkStep": 1}
        rec: dict[str, Any] = {"type": "step", "i": i, "t0": t0, "tb": tb, "t1": t1, "barrier": "mark_step"}
        if compiles:
            c["UncachedCompile"] = 1
            rec["bu"] = 1
            w.write({"type": "compile", "i": i, "t": t1 - 0.001, "ns": 3.3e8, "at": "barrier"}, flush=False)
        else:
            c["CachedCompile"] = 1
            rec["bc"] = 1
        if i:
            c["ExecuteComputation"] = 1
            execs.append([t0 + 0.0005, 3.0e5 + rng.random() * 1e4])
        sizes.append([tb + 0.0003, 57.0])
        if i % 50 == 49:
            w.write({"type": "sync", "i": i, "site": 0, "t0": t0 + 0.002, "t1": t0 + 0.0024, "x": 1},
                    flush=False)
            c["aten::_local_scalar_dense"] = 1
            c["xla::_to_cpu"] = 1
            c["ExecuteComputation"] = c.get("ExecuteComputation", 0) + 1
            execs.append([t0 + 0.0023, 1.4e5])
            rec["xfer"] = [1, 141335.0]
        if i % 1000 == 999:
            w.write({"type": "sync", "i": i, "site": 1, "t0": t0 + 0.0025, "t1": t0 + 0.0029, "x": 1},
                    flush=False)
        if i % 500 == 7:
            c["aten::nonzero"] = 1
        rec["c"] = c
        rec["sig"] = sig_of[length]
        if len(execs) >= 256 or compiles:
            w.write({"type": "exec", "samples": execs}, flush=False)
            w.write({"type": "graph_sizes", "samples": sizes}, flush=False)
            execs, sizes = [], []
        w.write(rec, flush=False)
        t = t1
    if execs:
        w.write({"type": "exec", "samples": execs}, flush=False)
        w.write({"type": "graph_sizes", "samples": sizes}, flush=False)
    w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": steps,
             "syncs": steps // 50 + steps // 1000, "errors": 0})
    w.close()


def _find_renderer() -> Any:
    """``xprof.report.write_report`` when the report exists, else None."""
    try:
        from xprof.report import write_report
    except ImportError:
        try:
            from xprof.report.html import write_report
        except ImportError:
            return None
    return write_report


def measure_one(steps: int, folder: str) -> dict[str, Any]:
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    path = os.path.join(folder, f"synthetic_{steps}.json")
    t = time.perf_counter()
    write_synthetic(path, steps)
    out: dict[str, Any] = {"steps": steps, "write_s": time.perf_counter() - t,
                           "file_mb": os.path.getsize(path) / 1e6}
    t = time.perf_counter()
    run = load_run(path)
    out["load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    analysis = analyze(run)
    out["analyze_s"] = time.perf_counter() - t
    out["findings"] = len(analysis.findings)
    render = _find_renderer()
    if render is not None:
        html = os.path.join(folder, f"synthetic_{steps}.html")
        t = time.perf_counter()
        render(analysis, html)
        out["report_s"] = time.perf_counter() - t
        out["html_mb"] = os.path.getsize(html) / 1e6
    else:
        out["report_s"] = out["html_mb"] = float("nan")
    out["total_s"] = out["load_s"] + out["analyze_s"] + (out["report_s"] if render else 0.0)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the 1M-step file")
    ap.add_argument("--sizes", help="comma-separated step counts (default 1k,10k,100k,1M)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the figures here (for run_all.py)")
    args = ap.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory(prefix="xprof-scale-") as tmp:
            emit_json(args.json, measure_one(args.one, tmp))
        return {}
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(SIZES)
    if args.quick:
        sizes = [s for s in sizes if s < 1_000_000]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xprof-scale-") as tmp:
        for n in sizes:
            out = os.path.join(tmp, f"{n}.json")
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(n), "--json", out],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{n} steps: failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
                rows.append({"steps": n, "failed": proc.stderr.strip()[-400:]})
                continue
            with open(out, encoding="utf-8") as f:
                rows.append(json.load(f))
            r = rows[-1]
            print(f"{n} steps: load {r['load_s']:.2f} s, analyze {r['analyze_s']:.2f} s, "
                  f"report {r['report_s']:.2f} s", flush=True)
    ok = [r for r in rows if "failed" not in r]
    print()
    print(table([[r["steps"], r["file_mb"], r["load_s"], r["analyze_s"], r["report_s"], r["total_s"],
                  r["html_mb"], r["peak_rss_mb"], r["findings"]] for r in ok],
                ["steps", "file MB", "load s", "analyze s", "report s", "total s", "HTML MB",
                 "peak RSS MB", "findings"]))
    growth = []
    nan = float("nan")
    for a, b in zip(ok, ok[1:]):
        growth.append({"from": a["steps"], "to": b["steps"],
                       "total_x": b["total_s"] / a["total_s"] if a["total_s"] else nan,
                       "html_x": b["html_mb"] / a["html_mb"] if a["html_mb"] == a["html_mb"] else nan,
                       "file_x": b["file_mb"] / a["file_mb"]})
    if growth:
        print("\ngrowth per 10x steps:")
        print(table([[f"{g['from']} -> {g['to']}", g["file_x"], g["total_x"], g["html_x"]] for g in growth],
                    ["", "file x", "time x", "HTML x"]))
    k100 = next((r for r in ok if r["steps"] == 100_000), None)
    if k100:
        print(f"\n100k steps: {k100['total_s']:.2f} s (goal < 5 s), HTML {k100['html_mb']:.2f} MB "
              "(goal < 10 MB)")
    figures = {"rows": rows, "growth": growth}
    emit_json(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
