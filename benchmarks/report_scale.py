"""How do reading, analysis and the report scale with a long run, and with a pod of ranks?

Synthetic but well-formed run files are written with ``xprof.runfile.RunWriter``, with
the records a real run writes (shaped after ``sample_runs/padded_longest.json``): a
sequence length padded per batch (40 lengths, a new one compiles, a seen one is cached),
an ``.item()`` every 50 steps and a ``print`` every 1000, executions and graph sizes
batched every 256 steps, one fallback op. The files of a pod differ only in their rank.

Long runs (1k, 10k, 100k, 1M steps): ``load_columns`` (what the CLI reads with), ``analyze``
and the HTML report timed in-process, file and HTML sizes, peak RSS; then the real
``xprof report FILE`` as a subprocess (wall time, peak RSS). Each size in its own process.

Pods (``--pods 32,256``: 32 and 256 rank files of 10k steps): the real ``xprof summary
FOLDER`` as a subprocess (wall time; peak RSS of the whole process tree, workers included,
sampled from /proc), then in one process without workers: reading every rank file, analysing
every rank, and rendering the summary, each timed apart.

Issue 12's goals: 1M-step report < 10 s and < 1 GB (issue 38: < 600 MB; bytes per step
printed); summary of 32 x 10k < 2 s; of 256 x 10k < 20 s and < 2 GB (issue 38: not slower
than 7.5 s).

    .venv/bin/python benchmarks/report_scale.py [--quick]     # --quick: skip 1M steps
    .venv/bin/python benchmarks/report_scale.py --issue12     # 1M steps, then pods of 32 and 256 ranks
    .venv/bin/python benchmarks/report_scale.py --sizes 1000000 --pods 256
    .venv/bin/python benchmarks/report_scale.py --sizes 1000000 --pods 256 --baseline /work/main --rounds 2
                                   # the real commands only, main's and this tree's in turn
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import emit_json, table

SIZES = (1_000, 10_000, 100_000, 1_000_000)
DISTINCT = (10_000,)
LENGTHS = [16 + 4 * k for k in range(40)]
T0 = 1.7e9


def write_synthetic(path: str, steps: int, seed: int = 0, rank: int = 0, world_size: int = 1,
                    distinct: bool = False) -> None:
    """A realistic recording of ``steps`` steps with per-batch padding (a recompile pattern).

    ``rank``/``world_size`` go into the header (the files of a pod differ only in them).
    ``distinct``: a new length every step of the first half (a KV cache grown a token a
    step, padding to lengths without bound), then lengths seen before: ``steps / 2``
    signatures and compiles, where the default run has 40."""
    from xprof.runfile import RunWriter

    rng = random.Random(seed)
    header = {"xprof_version": "0.1.0", "name": f"synthetic_{steps}",
              "started_at": "2026-01-01T00:00:00+00:00", "started_unix": T0,
              "meta": {"python": "3.11.7", "torch": "2.9.0", "torch_xla": "2.9.0", "device": "CPU",
                       "host": "bench", "pid": 1, "argv": ["train.py"], "cwd": "/work", "rank": rank,
                       "world_size": world_size, "inputs": True, "syncs": True}}
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
        if distinct:
            length = 16 + (i if i < steps // 2 else rng.randrange(steps // 2))
        else:
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


def measure_one(steps: int, folder: str, distinct: bool = False) -> dict[str, Any]:
    from xprof.analysis import analyze
    from xprof.runcolumns import load_columns

    path = os.path.join(folder, f"synthetic_{steps}.json")
    t = time.perf_counter()
    write_synthetic(path, steps, distinct=distinct)
    out: dict[str, Any] = {"steps": steps, "distinct": distinct, "write_s": time.perf_counter() - t,
                           "file_mb": os.path.getsize(path) / 1e6}
    t = time.perf_counter()
    run = load_columns(path)
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
    del analysis, run
    cli = run_cli(["report", path, "-o", os.path.join(folder, "cli.html")])
    out["cli_report_s"], out["cli_peak_rss_mb"] = cli["wall_s"], cli["peak_rss_mb"]
    return out


# -- the real command, timed from outside -------------------------------------------------------------


def _tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and every process below it (Linux /proc), in KiB."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm", encoding="utf-8") as f:
                pages = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parent[int(entry)] = int(fields[1])
        rss[int(entry)] = pages * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(c for c, p in parent.items() if p == pid)
    return total


def run_cli(args: list[str], tree: str | None = None) -> dict[str, Any]:
    """``python -m xprof ARGS`` with its stdout discarded: wall seconds and the peak RSS of its
    process tree (sampled every 20 ms; the peak of the main process alone where /proc is missing).
    ``tree``: the checkout whose xprof runs (first on PYTHONPATH, started outside any checkout);
    the summary cache is off (a second run would be served from it)."""
    import threading

    env = {**os.environ, "XPROF_PROGRESS": "0", "XPROF_NO_CACHE": "1"}
    if tree is not None:
        env["PYTHONPATH"] = os.path.abspath(tree)
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "xprof", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir() if tree else None)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            if os.path.isdir("/proc"):
                peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()
    # (this child's own peak: RUSAGE_CHILDREN is the largest of every child reaped so far)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    done.set()
    sampler.join()
    main_peak = usage.ru_maxrss
    if proc.returncode != 0:
        raise RuntimeError(f"xprof {' '.join(args)}: exit {proc.returncode}: {err.decode()[-400:]}")
    return {"wall_s": wall, "peak_rss_mb": max(peak[0], main_peak) / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime}  # (the command's own process, its workers not counted)


# -- a pod of rank files ---------------------------------------------------------------------------------


def write_pod(folder: str, ranks: int, steps: int) -> None:
    """``ranks`` rank files of ``steps`` steps each, differing only in their rank."""
    os.makedirs(folder, exist_ok=True)
    first = os.path.join(folder, "run.rank0.json")
    write_synthetic(first, steps, rank=0, world_size=ranks)
    with open(first, encoding="utf-8") as f:
        header, rest = f.read().split("\n", 1)
    for r in range(1, ranks):
        with open(os.path.join(folder, f"run.rank{r}.json"), "w", encoding="utf-8") as f:
            f.write(header.replace('"rank":0,', f'"rank":{r},') + "\n" + rest)


def measure_pod(ranks: int, steps: int, folder: str) -> dict[str, Any]:
    """The real ``xprof summary FOLDER``, then the same work in one process, phase by phase."""
    import glob
    import io

    pod = os.path.join(folder, f"pod{ranks}")
    t = time.perf_counter()
    write_pod(pod, ranks, steps)
    files = sorted(glob.glob(os.path.join(pod, "*.json")))
    out: dict[str, Any] = {"ranks": ranks, "steps": steps, "write_s": time.perf_counter() - t,
                           "files_mb": sum(os.path.getsize(p) for p in files) / 1e6}
    cli = run_cli(["summary", pod])
    out["cli_summary_s"], out["cli_peak_rss_mb"] = cli["wall_s"], cli["peak_rss_mb"]
    from xprof.analysis import analyze
    from xprof.analysis.pod import workers_for
    from xprof.analysis.ranks import pod_view, rank_run
    from xprof.report.console import SafeConsole
    from xprof.report.terminal import render_ranks, render_summary
    from xprof.runcolumns import load_many

    out["workers"] = workers_for(files)
    load_s = analyze_s = 0.0
    ranks_kept = []
    batch = 16
    for k in range(0, len(files), batch):
        t = time.perf_counter()
        runs = load_many(files[k:k + batch])
        load_s += time.perf_counter() - t
        t = time.perf_counter()
        for pos, run in enumerate(runs, start=k):
            ranks_kept.append(rank_run(analyze(run), pos))  # type: ignore[arg-type]
        analyze_s += time.perf_counter() - t
        del runs
    t = time.perf_counter()
    view = pod_view(ranks_kept)
    assert view.focus_path is not None  # (every rank was kept: the pod has a focus)
    focus = analyze(load_many([view.focus_path])[0])  # type: ignore[arg-type]
    out["focus_s"] = time.perf_counter() - t
    t = time.perf_counter()
    console = SafeConsole(file=io.StringIO(), width=120)
    render_ranks(view, console)
    render_summary(focus, console)
    out["render_s"] = time.perf_counter() - t
    out["load_s"], out["analyze_s"] = load_s, analyze_s
    out["one_process_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# -- the real commands of this tree against another checkout's, alternated -----------------------------

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def versus(baseline: str, rounds: int, sizes: list[int], pods: list[int], pod_steps: int) -> list[dict[str, Any]]:
    """The real ``xprof report`` of each size and ``xprof summary`` of each pod, run by another
    checkout (``baseline``, e.g. main's) and by this tree in turn (ABBA over ``rounds``), on one
    file written once: on a shared machine only figures taken side by side compare."""
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xprof-versus-") as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"synthetic_{n}.json")
            write_synthetic(path, n)
            out += _alternate(f"{n} steps: xprof report", ["report", path, "-o", os.path.join(tmp, "r.html")],
                              baseline, rounds)
            os.remove(path)
        for ranks in pods:
            folder = os.path.join(tmp, f"pod{ranks}")
            write_pod(folder, ranks, pod_steps)
            out += _alternate(f"{ranks} x {pod_steps} steps: xprof summary", ["summary", folder], baseline, rounds)
            shutil.rmtree(folder)
    for what in dict.fromkeys(r["what"] for r in out):
        for tree in ("baseline", "this tree"):
            mine = [r for r in out if r["what"] == what and r["tree"] == tree]
            print(f"{what}, {tree}: median {statistics.median(r['wall_s'] for r in mine):.2f} s "
                  f"({statistics.median(r['cpu_s'] for r in mine):.2f} s CPU), "
                  f"{statistics.median(r['peak_rss_mb'] for r in mine):.0f} MB over {len(mine)} runs")
    return out


def _alternate(what: str, args: list[str], baseline: str, rounds: int) -> list[dict[str, Any]]:
    trees = [("baseline", baseline), ("this tree", HERE)]
    out = []
    for k in range(rounds):
        for label, tree in trees if k % 2 == 0 else trees[::-1]:
            r = run_cli(args, tree)
            out.append({"what": what, "tree": label, **r, "load": _load()})
            print(f"{what}, {label}: {r['wall_s']:.2f} s ({r['cpu_s']:.2f} s CPU), peak RSS {r['peak_rss_mb']:.0f} MB "
                  f"(load average {out[-1]['load']})", flush=True)
    return out


def _subprocess(args: list[str], tmp: str, label: str) -> dict[str, Any] | None:
    out = os.path.join(tmp, f"{label}.json")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *args, "--json", out],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{label}: failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
        return None
    with open(out, encoding="utf-8") as f:
        return dict(json.load(f))


def _per_step(r: dict[str, Any]) -> str:
    """The file's bytes and the real command's peak RSS, per step."""
    return (f"{r['file_mb'] * 1e6 / r['steps']:.0f} file bytes/step, "
            f"{r['cli_peak_rss_mb'] * (1 << 20) / r['steps']:.0f} peak RSS bytes/step")


def _label(r: dict[str, Any]) -> str:
    return f"{r['steps']}" + (f" ({r['steps'] // 2} shapes)" if r.get("distinct") else "")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the 1M-step file")
    ap.add_argument("--sizes", help="comma-separated step counts (default 1k,10k,100k,1M)")
    ap.add_argument("--pods", help="comma-separated rank counts of pods of --pod-steps steps (e.g. 32,256)")
    ap.add_argument("--pod-steps", type=int, default=10_000)
    ap.add_argument("--issue12", action="store_true", help="the 1M-step file and pods of 32 and 256 ranks")
    ap.add_argument("--distinct", help="comma-separated step counts of runs with a new shape every step of "
                                       "their first half (default 10k; 0: none)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--one-distinct", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--one-pod", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the figures here (for run_all.py)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout (e.g. main's): only the real commands, "
                                                      "its and this tree's in turn, on --sizes and --pods")
    ap.add_argument("--rounds", type=int, default=2, help="with --baseline: rounds of both (default 2)")
    args = ap.parse_args(argv)
    if args.baseline:
        print(f"load average before: {_load()}", flush=True)
        pairs = versus(args.baseline, args.rounds, [int(x) for x in (args.sizes or "").split(",") if x],
                       [int(x) for x in (args.pods or "").split(",") if x], args.pod_steps)
        print(f"load average after: {_load()}")
        emit_json(args.json, {"versus": pairs})
        return {"versus": pairs}
    if args.one:
        with tempfile.TemporaryDirectory(prefix="xprof-scale-") as tmp:
            emit_json(args.json, measure_one(args.one, tmp, distinct=args.one_distinct))
        return {}
    if args.one_pod:
        with tempfile.TemporaryDirectory(prefix="xprof-pod-") as tmp:
            emit_json(args.json, measure_pod(args.one_pod, args.pod_steps, tmp))
        return {}
    if args.issue12:
        sizes, pods = [1_000_000], [32, 256]
    else:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([] if args.pods else list(SIZES))
        pods = [int(s) for s in args.pods.split(",")] if args.pods else []
    if args.quick:
        sizes = [s for s in sizes if s < 1_000_000]
    distinct = [int(s) for s in args.distinct.split(",") if int(s)] if args.distinct else (
        [] if args.pods or args.issue12 else list(DISTINCT))
    print(f"load average before: {_load()}", flush=True)
    rows: list[dict[str, Any]] = []
    pod_rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="xprof-scale-") as tmp:
        for n, new_shapes in [(n, False) for n in sizes] + [(n, True) for n in distinct]:
            r = _subprocess(["--one", str(n)] + (["--one-distinct"] if new_shapes else []), tmp,
                            f"steps{n}{'d' if new_shapes else ''}")
            if r is None:
                rows.append({"steps": n, "distinct": new_shapes, "failed": True})
                continue
            rows.append(r)
            what = f"{n} steps" + (f", {n // 2} distinct shapes" if new_shapes else "")
            print(f"{what}: load {r['load_s']:.2f} s, analyze {r['analyze_s']:.2f} s, "
                  f"report {r['report_s']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB; "
                  f"xprof report: {r['cli_report_s']:.2f} s, {r['cli_peak_rss_mb']:.0f} MB, "
                  f"{_per_step(r)} (load average {_load()})", flush=True)
        for n in pods:
            r = _subprocess(["--one-pod", str(n), "--pod-steps", str(args.pod_steps)], tmp, f"pod{n}")
            if r is None:
                pod_rows.append({"ranks": n, "failed": True})
                continue
            pod_rows.append(r)
            print(f"{n} ranks x {r['steps']} steps: xprof summary {r['cli_summary_s']:.2f} s, peak RSS "
                  f"{r['cli_peak_rss_mb']:.0f} MB (all processes, {r['workers']} worker(s)); in one process: "
                  f"load {r['load_s']:.2f} s, analyze {r['analyze_s']:.2f} s, focus rank {r['focus_s']:.2f} s, "
                  f"render {r['render_s']:.2f} s (load average {_load()})", flush=True)
    ok = [r for r in rows if "failed" not in r and not r.get("distinct")]
    odd = [r for r in rows if "failed" not in r and r.get("distinct")]
    if ok or odd:
        print()
        print(table([[_label(r), r["file_mb"], r["load_s"], r["analyze_s"], r["report_s"], r["total_s"],
                      r["html_mb"], r["peak_rss_mb"], r["cli_report_s"], r["cli_peak_rss_mb"], r["findings"]]
                     for r in ok + odd],
                    ["steps", "file MB", "load s", "analyze s", "report s", "total s", "HTML MB",
                     "peak RSS MB", "xprof report s", "its peak RSS MB", "findings"]))
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
    pods_ok = [r for r in pod_rows if "failed" not in r]
    if pods_ok:
        print()
        print(table([[f"{r['ranks']} x {r['steps']}", r["files_mb"], r["cli_summary_s"], r["cli_peak_rss_mb"],
                      r["workers"], r["load_s"], r["analyze_s"], r["focus_s"], r["render_s"],
                      r["one_process_peak_rss_mb"]] for r in pods_ok],
                    ["pod", "files MB", "xprof summary s", "peak RSS MB (all)", "workers", "load s (1 proc)",
                     "analyze s (1 proc)", "focus s", "render s", "1-proc peak RSS MB"]))
    for r in ok:
        if r["steps"] == 1_000_000:
            print(f"\n1M steps: xprof report {r['cli_report_s']:.2f} s (goal < 10 s), "
                  f"{r['cli_peak_rss_mb']:.0f} MB (goal < 600 MB), {_per_step(r)}")
    for r in pods_ok:
        goal = {32: "< 2 s", 256: "< 20 s, < 2000 MB"}.get(r["ranks"], "")
        print(f"{r['ranks']} ranks: xprof summary {r['cli_summary_s']:.2f} s, {r['cli_peak_rss_mb']:.0f} MB"
              + (f" (goal {goal})" if goal else ""))
    print(f"load average after: {_load()}")
    figures = {"rows": rows, "growth": growth, "pods": pod_rows}
    emit_json(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
