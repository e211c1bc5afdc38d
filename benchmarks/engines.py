"""Which engine should read run files into columns? DuckDB against Polars, on the same job.

The job: from JSON Lines run files, the bulk records as numpy columns, as the analysis
takes them (xprof.runcolumns.RunColumns): every step field and counter, the host reads,
the compiles and the (end, duration) samples. DuckDB is what xprof ships
(``xprof.runcolumns.load_many``); the Polars reader here does the same work with
``polars.read_ndjson`` (a step's ``c`` read as a string and decoded as a struct, samples
exploded). Both on the 1M-step file and on a pod of 256 rank files of 10k steps (written
by report_scale.py's generator); each (engine, case) in its own process, so the peak RSS
is its own.

Polars is not an xprof dependency: install it where you run this (``pip install polars``)
or the Polars rows say "not installed".

    .venv/bin/python benchmarks/engines.py [--steps 1000000] [--ranks 256]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json, table
from report_scale import write_pod, write_synthetic


def read_duckdb(paths: list[str]) -> int:
    """xprof's reader; returns the steps read."""
    from xprof.runcolumns import load_many

    steps = 0
    batch: list[str] = []
    size = 0
    for p in paths:
        batch.append(p)
        size += os.path.getsize(p)
        if size >= 8 << 20:
            steps += sum(r.columns.n_steps for r in load_many(batch, engine="duckdb") if not isinstance(r, Exception))
            batch, size = [], 0
    if batch:
        steps += sum(r.columns.n_steps for r in load_many(batch, engine="duckdb") if not isinstance(r, Exception))
    return steps


def _polars_one(path: str) -> dict[str, Any]:
    import numpy as np
    import polars as pl

    schema = {"type": pl.String, "i": pl.Int64, "t0": pl.Float64, "tb": pl.Float64, "t1": pl.Float64,
              "barrier": pl.String, "c": pl.String, "bu": pl.Int64, "bc": pl.Int64, "sig": pl.Int64, "o": pl.Int64,
              "ng": pl.Int64, "dz": pl.Int64, "site": pl.Int64, "u": pl.Int64, "x": pl.Int64,
              "deferred": pl.Boolean, "thread": pl.String, "t": pl.Float64, "ns": pl.Float64, "at": pl.String,
              "samples": pl.List(pl.List(pl.Float64))}
    df = pl.read_ndjson(path, schema=schema, ignore_errors=True)
    steps = df.filter(pl.col("type") == "step").sort("i", maintain_order=True)
    out: dict[str, Any] = {}
    for col in ("i", "t0", "tb", "t1", "bu", "bc", "o", "ng", "dz"):
        out[col] = steps[col].fill_null(0).to_numpy()
    for col in ("sig", "site"):
        out[col] = steps[col].to_numpy()
    out["barrier"] = steps["barrier"].fill_null("sync").cast(pl.Categorical).to_physical().to_numpy()
    counters = steps["c"].str.json_decode(infer_schema_length=None)
    if counters.dtype != pl.Null and isinstance(counters.dtype, pl.Struct):
        for field in counters.struct.unnest().iter_columns():
            out["c:" + field.name] = field.fill_null(0).to_numpy()
    syncs = df.filter(pl.col("type") == "sync")
    for col in ("i", "site", "t0", "t1", "u", "x"):
        out["sync:" + col] = syncs[col].to_numpy()
    out["sync:c"] = syncs["c"].cast(pl.Int64, strict=False).fill_null(0).to_numpy()
    compiles = df.filter(pl.col("type") == "compile")
    for col in ("i", "t", "ns"):
        out["compile:" + col] = compiles[col].to_numpy()
    samples = df.filter(pl.col("type").is_in(["exec", "xfer", "graph_sizes"])).select("type", "samples")
    flat = samples.explode("samples").filter(pl.col("samples").list.len() == 2)
    out["samples"] = np.column_stack([flat["samples"].list.get(0).to_numpy(), flat["samples"].list.get(1).to_numpy()])
    return out


def read_polars(paths: list[str]) -> int:
    return sum(len(_polars_one(p)["i"]) for p in paths)


ENGINES = {"duckdb": read_duckdb, "polars": read_polars}


def measure(engine: str, paths: list[str]) -> dict[str, Any]:
    try:  # imported before the clock starts, for both
        if engine == "polars":
            import polars  # noqa: F401
        else:
            import duckdb  # noqa: F401

            import xprof.runcolumns  # noqa: F401
    except ImportError:
        return {"engine": engine, "skipped": "not installed"}
    t = time.perf_counter()
    cpu = time.process_time()
    steps = ENGINES[engine](paths)
    return {"engine": engine, "seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu, "steps": steps,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1_000_000, help="steps of the long run")
    ap.add_argument("--ranks", type=int, default=256, help="rank files of 10k steps in the pod")
    ap.add_argument("--one", nargs=2, metavar=("ENGINE", "LISTFILE"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if args.one:
        with open(args.one[1], encoding="utf-8") as f:
            emit_json(args.json, measure(args.one[0], json.load(f)))
        return {}
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    print(f"load average before: {load}", flush=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xprof-engines-") as tmp:
        long_run = os.path.join(tmp, "long.json")
        write_synthetic(long_run, args.steps)
        pod = os.path.join(tmp, "pod")
        write_pod(pod, args.ranks, 10_000)
        cases = {f"{args.steps} steps, 1 file": [long_run],
                 f"{args.ranks} ranks x 10k steps": sorted(glob.glob(os.path.join(pod, "*.json")))}
        for case, paths in cases.items():
            listing = os.path.join(tmp, "paths.json")
            with open(listing, "w", encoding="utf-8") as f:
                json.dump(paths, f)
            for engine in ENGINES:
                out = os.path.join(tmp, f"{engine}.json")
                proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", engine, listing,
                                       "--json", out], capture_output=True, text=True)
                if proc.returncode != 0:
                    rows.append({"case": case, "engine": engine, "failed": proc.stderr.strip()[-300:]})
                    print(f"{case}, {engine}: failed: {proc.stderr.strip()[-300:]}", flush=True)
                    continue
                with open(out, encoding="utf-8") as f:
                    r = {"case": case, **json.load(f)}
                rows.append(r)
                if "skipped" in r:
                    print(f"{case}, {engine}: {r['skipped']}", flush=True)
                else:
                    print(f"{case}, {engine}: {r['seconds']:.2f} s ({r['cpu_s']:.2f} s CPU), peak RSS "
                          f"{r['peak_rss_mb']:.0f} MB, {r['steps']} steps", flush=True)
    done = [r for r in rows if "seconds" in r]
    print()
    print(table([[r["case"], r["engine"], r["seconds"], r["cpu_s"], r["peak_rss_mb"]] for r in done],
                ["case", "engine", "wall s", "CPU s", "peak RSS MB"]))
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    print(f"load average after: {load}")
    emit_json(args.json, {"rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
