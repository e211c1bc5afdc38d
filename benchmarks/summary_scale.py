"""How does ``xprof summary`` scale with the number of distinct input names and read sites?

Issue 28 measured a summary quadratic in both: a file with N distinct input names took 4.7 s
at 1k, 53 s at 4k and over 300 s at 20k; one with N distinct read sites 7.5 s at 5k and 67 s
at 20k. The goal: linear, 20k of either in under 10 s.

Two synthetic, well-formed run files per size, written with ``xprof.runfile.RunWriter``:

- ``inputs``: N input names, each fed for two steps in a row with another sequence length the
  second time (``x17`` of ``[8, 16]``, then ``[8, 24]``) beside a ``labels`` input of the same
  rows: N input names, 2N signatures and compiles, N shape findings.
- ``sites``: N ``.item()`` lines, each read in one step (a new line each step, as code
  generated per layer, or a loop unrolled in Python, would be): N read sites, N read findings.

Each file is summarised by the real ``xprof summary FILE`` as a subprocess (wall time, what
a user waits for), then in this process: loading, analysis and the terminal summary, timed
apart. The sizes are all measured in one run, so the figures share the machine's load.

    .venv/bin/python benchmarks/summary_scale.py                   # 1k, 4k and 20k of each
    .venv/bin/python benchmarks/summary_scale.py --sizes 1000,2000  # other sizes
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json, table
from report_scale import T0, run_cli

SIZES = (1_000, 4_000, 20_000)
STEP_S = 0.002
"""Each synthetic step's wall time (its compile's, when it compiles, comes on top)."""


def _writer(path: str, name: str) -> Any:
    """A ``RunWriter`` with the header a real single-process run writes."""
    from xprof.runfile import RunWriter

    header = {"xprof_version": "0.1.0", "name": name, "started_at": "2026-01-01T00:00:00+00:00",
              "started_unix": T0,
              "meta": {"python": "3.11.7", "torch": "2.9.0", "torch_xla": "2.9.0", "device": "CPU",
                       "host": "bench", "pid": 1, "argv": ["train.py"], "cwd": "/work", "rank": 0,
                       "world_size": 1, "inputs": True, "syncs": True}}
    return RunWriter(path, header)


def _step(w: Any, i: int, t: float, sig: int, compiles: bool) -> float:
    """One training step at barrier ``i`` from time ``t``: its compile (if any) and its step
    record; the time it ends."""
    tb = t + STEP_S
    t1 = tb + (0.2 if compiles else 0.001)
    c = {"MarkStep": 1, "ExecuteComputation": 1, "UncachedCompile" if compiles else "CachedCompile": 1}
    if compiles:
        w.write({"type": "compile", "i": i, "t": t1 - 0.001, "ns": 2e8, "at": "barrier"}, flush=False)
    w.write({"type": "step", "i": i, "t0": t, "tb": tb, "t1": t1, "barrier": "mark_step", "c": c,
             "sig": sig, "bu" if compiles else "bc": 1, "opt": 1}, flush=False)
    return t1


def _end(w: Any, t: float, steps: int, syncs: int) -> None:
    w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": steps, "syncs": syncs,
             "errors": 0})
    w.close()


def write_inputs(path: str, n: int) -> None:
    """``n`` input names, each fed two steps in a row, its length changed the second time."""
    w = _writer(path, f"inputs_{n}")
    t = T0
    for k in range(2 * n):
        length = 16 if k % 2 == 0 else 24
        w.write({"type": "sig", "id": k, "inputs": [
            {"name": f"x{k // 2}", "shape": [8, length], "dtype": "int64", "src": "batch"},
            {"name": "labels", "shape": [8], "dtype": "int64", "src": "batch"}]}, flush=False)
        t = _step(w, k, t, k, compiles=True)
    _end(w, t, 2 * n, 0)


def write_sites(path: str, n: int) -> None:
    """``n`` ``.item()`` lines, one read at each, one line a step, after two warm-up steps."""
    w = _writer(path, f"sites_{n}")
    w.write({"type": "sig", "id": 0, "inputs": [
        {"name": "input_ids", "shape": [8, 16], "dtype": "int64", "src": "batch"}]}, flush=False)
    t = T0
    for i in range(n + 2):
        if i >= 2:
            k = i - 2
            w.write({"type": "site", "id": k, "kind": "item", "file": "/work/train.py", "line": 100 + k,
                     "func": "train", "via": None, "code": f"stats[{k}] = losses[{k}].item()"}, flush=False)
            w.write({"type": "sync", "i": i, "site": k, "t0": t + 0.001, "t1": t + 0.0012, "x": 1}, flush=False)
        t = _step(w, i, t, 0, compiles=i < 2)
    _end(w, t, n + 2, n)


def in_process(path: str) -> dict[str, float]:
    """Load, analyse and print the terminal summary of ``path`` here, each timed apart."""
    from xprof.analysis import analyze
    from xprof.report.console import SafeConsole
    from xprof.report.terminal import render_summary
    from xprof.runcolumns import load_columns

    t = time.perf_counter()
    run = load_columns(path)
    t_load = time.perf_counter()
    analysis = analyze(run)
    t_analyze = time.perf_counter()
    render_summary(analysis, SafeConsole(file=io.StringIO(), width=120))
    t_render = time.perf_counter()
    return {"load_s": t_load - t, "analyze_s": t_analyze - t_load, "render_s": t_render - t_analyze,
            "findings": float(len(analysis.findings))}


def measure(kind: str, n: int, folder: str, write: Callable[[str, int], None]) -> dict[str, Any]:
    path = os.path.join(folder, f"{kind}_{n}.json")
    write(path, n)
    out: dict[str, Any] = {"kind": kind, "n": n, "file_mb": os.path.getsize(path) / 1e6}
    out["cli_summary_s"] = run_cli(["summary", path])["wall_s"]
    out.update(in_process(path))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", help="comma-separated counts of inputs and of sites (default 1k,4k,20k)")
    ap.add_argument("--json", help="write the figures here (for run_all.py)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(SIZES)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xprof-summary-scale-") as tmp:
        for kind, write in (("inputs", write_inputs), ("sites", write_sites)):
            for n in sizes:
                r = measure(kind, n, tmp, write)
                rows.append(r)
                print(f"{kind} {n}: xprof summary {r['cli_summary_s']:.2f} s", flush=True)
    print()
    print(table([[r["kind"], r["n"], r["file_mb"], r["cli_summary_s"], r["load_s"], r["analyze_s"],
                  r["render_s"], int(r["findings"])] for r in rows],
                ["distinct", "n", "file MB", "xprof summary s", "load s", "analyze s", "render s", "findings"]))
    for kind in ("inputs", "sites"):
        mine = [r for r in rows if r["kind"] == kind]
        if len(mine) >= 2:
            a, b = mine[0], mine[-1]
            print(f"{kind}: {b['n'] / a['n']:.0f}x the {kind} took {b['cli_summary_s'] / a['cli_summary_s']:.1f}x "
                  f"the time (linear: {b['n'] / a['n']:.0f}x; start-up included)")
    figures = {"rows": rows}
    emit_json(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
