"""The step-time gate's false alarms and misses, over real recordings (issue 38).

A tiny torch_xla loop on the CPU (a chain of matmuls + tanh on a ``rows x width`` batch,
``torch_xla.sync()`` and ``xm.wait_device_ops()`` a step) is recorded with ``xprof.watch()`` at
three sizes, about 0.5, 5 and 50 ms of execute time a step, ``--steps`` steps a recording
(>= 100 steady ones). Three arms a size: the base loop, the same loop again, and a slower twin.

The slower twin is the same chain on more rows, the number of rows found by a calibration pass
so that its *execute time* is 25% longer (more layers are not: at 0.5 ms the fixed cost of an
execution dominates, and 25% more layers gave -13% to +18%). The calibration records the base
and candidate row counts interleaved and steers the rows by the secant rule until the ratio of
the medians is within 3% of 1.25.

Fair pairs: the three arms of a size are recorded at once, in three worker processes that take
turns step by step (a token passed over pipes: base step, same step, slow step, ...), so every
arm sees the same machine, busy or quiet, at the same moments; which worker runs which arm
rotates with the round. Every other round runs ``--burners`` processes spinning on the CPU
beside them (a busy machine). Then, with ``xprof.compare`` and ``--max-step-time-increase``:

- false alarm: the base against the same loop fails the gate;
- miss: the base against the slower twin passes it.

For every pair the true ratio is printed too: the ratio of the medians of the per-step execute
times read from the two run files with numpy (the ``exec`` samples inside each steady step's
window), outside xprof's analysis, so a miss is seen to be against a real slowdown (a slow
pair whose true ratio is under 1.15 is marked ``*``: no fair test of the gate).

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/time_gate.py [--rounds 12] [--steps 130] [--burners 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import table

os.environ.setdefault("PJRT_DEVICE", "CPU")

SIZES = {"0.5ms": (200, 4), "5ms": (560, 8), "50ms": (1152, 16)}
"""Size -> (matrix width, layers); the base loop runs them on :data:`ROWS` rows."""
ROWS = 64
TARGET = 1.25
"""The slower twin's execute time / the base's."""
LIMITS = ("10%", "25%")
WARM = 5
"""Steps of a recording left out of the true ratio (compiles, first executions)."""
ARMS = ("base", "same", "slow")


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


def worker(conn: Connection) -> None:
    """A process that records the loop it is told to, one step each time it gets the token."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    import xprof

    device = torch_xla.device()
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        _, path, width, layers, rows, steps = msg
        gen = torch.Generator().manual_seed(0)
        weights = [(torch.randn(width, width, generator=gen) / width ** 0.5).to(device) for _ in range(layers)]
        x0 = torch.randn(rows, width, generator=gen).to(device)
        with xprof.watch(path, live=False):
            for _ in range(steps):
                conn.recv()
                x = x0
                for w in weights:
                    x = torch.tanh(x @ w)
                # (waiting for the step: a loop that runs ahead queues its graphs, and each one's
                # ExecuteTime then holds its wait behind the ones before it)
                torch_xla.sync()
                xm.wait_device_ops()
                conn.send("done")
        del x, weights, x0
        conn.send("recorded")


def record_together(jobs: list[tuple[Connection, str, int, int, int]], steps: int) -> None:
    """Record each ``(worker, path, width, layers, rows)`` at once, the workers taking turns a step."""
    for conn, path, width, layers, rows in jobs:
        conn.send(("record", path, width, layers, rows, steps))
    for _ in range(steps):
        for conn, *_ in jobs:
            conn.send("go")
            conn.recv()
    for conn, *_ in jobs:
        assert conn.recv() == "recorded"


def exec_ms(path: str) -> np.ndarray:
    """Each steady step's execute time (ms) read from the run file itself: the ``exec`` samples
    whose time falls in the step's window, steps after :data:`WARM` that compiled nothing."""
    windows, samples = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "step" and rec["i"] >= WARM and not rec.get("bu"):
                windows.append((rec["t0"], rec["t1"]))
            elif rec.get("type") == "exec":
                samples.extend(rec["samples"])
    s = np.array(sorted(samples), dtype=np.float64).reshape(-1, 2)
    cum = np.concatenate([[0.0], np.cumsum(s[:, 1])])
    w = np.array(windows, dtype=np.float64).reshape(-1, 2)
    lo, hi = np.searchsorted(s[:, 0], w[:, 0], "right"), np.searchsorted(s[:, 0], w[:, 1], "right")
    has = hi > lo
    return (cum[hi] - cum[lo])[has] / 1e6


def true_ratio(base: str, new: str, q: float = 50) -> float:
    """The ratio of the ``q``-th percentiles of :func:`exec_ms` of the two run files."""
    return float(np.percentile(exec_ms(new), q) / np.percentile(exec_ms(base), q))


def calibrate(workers: list[Connection], tmp: str, size: str, steps: int) -> tuple[int, float]:
    """The rows that make the loop of ``size`` 25% slower in execute time, and the ratio measured
    for them: base and candidate recorded interleaved (on alternate workers), the ratio of their
    10th percentiles (what load does not move) fitted by a line through 1.0 at :data:`ROWS` over
    every probe so far, the next probe where the line reaches :data:`TARGET`."""
    width, layers = SIZES[size]
    base, cand = os.path.join(tmp, f"cal_{size}_base.json"), os.path.join(tmp, f"cal_{size}_cand.json")
    rows, probes = ROWS + ROWS // 4, []
    for k in range(5):
        pair = [(base, ROWS), (cand, rows)]
        record_together([(workers[(i + k) % 2], path, width, layers, n) for i, (path, n) in enumerate(pair)], steps)
        ratio = true_ratio(base, cand, 10)
        print(f"  calibrating {size}: {rows} rows -> execute time x{ratio:.3f} (10th percentile)", flush=True)
        probes.append((rows, ratio))
        if abs(ratio - TARGET) < 0.03:
            break
        dx = np.array([p[0] - ROWS for p in probes], dtype=np.float64)
        dy = np.array([p[1] - 1 for p in probes])
        slope = max(float(dx @ dy / (dx @ dx)), 0.05 / ROWS)
        rows = int(min(max(round(ROWS + (TARGET - 1) / slope), ROWS + 1), ROWS * 32))
    return min(probes, key=lambda p: abs(p[1] - TARGET))


def judge_pair(size: str, r: int, kind: str, base: str, new: str) -> dict[str, Any]:
    """The compare of ``new`` against ``base``: the gate's verdict at each limit, the intervals of
    the 10th percentile (what the gate judges) and of the median, and the true ratios."""
    import xprof
    from xprof.comparison import Gate
    from xprof.comparison.gate import STEP_TIME_METRIC

    pair = xprof.compare(base, new).pairs[0]
    p10, med = pair.metric(STEP_TIME_METRIC), pair.metric("execute_ms_median")
    out: dict[str, Any] = {"size": size, "round": r, "busy": r % 2 == 1, "kind": kind, "p10": p10, "median": med,
                           "true": true_ratio(base, new), "true_p10": true_ratio(base, new, 10)}
    for limit in LIMITS:
        out[limit] = bool(Gate.parse(max_step_time_increase=limit).check(pair))
        iv = med.interval
        out["median " + limit] = bool(iv is not None and iv.ratio_lo > 1 + float(limit[:-1]) / 100)
    return out


def one_round(workers: list[Connection], tmp: str, r: int, slow_rows: dict[str, int],
              steps: int) -> list[dict[str, Any]]:
    """Each size's three arms recorded at once, then the gate on (base, same) and (base, slow)."""
    out = []
    for size, (width, layers) in SIZES.items():
        paths = {arm: os.path.join(tmp, f"{size}_{r}_{arm}.json") for arm in ARMS}
        rows = {"base": ROWS, "same": ROWS, "slow": slow_rows[size]}
        jobs = [(workers[(k + r) % 3], paths[arm], width, layers, rows[arm]) for k, arm in enumerate(ARMS)]
        record_together(jobs, steps)
        out += [judge_pair(size, r, kind, paths["base"], paths[kind]) for kind in ("same", "slow")]
    return out


def judge_kept(folder: str) -> list[dict[str, Any]]:
    """Every pair of an earlier ``--keep`` folder judged again by the gate as it is now."""
    out = []
    for size in SIZES:
        r = 0
        while os.path.exists(os.path.join(folder, f"{size}_{r}_base.json")):
            out += [judge_pair(size, r, kind, os.path.join(folder, f"{size}_{r}_base.json"),
                               os.path.join(folder, f"{size}_{r}_{kind}.json")) for kind in ("same", "slow")]
            r += 1
    return sorted(out, key=lambda x: (x["round"], list(SIZES).index(x["size"])))


def _ci(m: Any) -> str:
    return m.interval.percent() if m.interval is not None else "n/a"


def report(results: list[dict[str, Any]]) -> None:
    """The pairs, then false alarms and misses by size and machine, and in all."""
    rows = []
    for x in results:
        mark = "*" if x["kind"] == "slow" and x["true"] < 1.15 else ""
        rows.append([x["size"], x["round"], "busy" if x["busy"] else "quiet", x["kind"], f"{x['p10'].base:.3f}",
                     f"{x['p10'].new:.3f}", _ci(x["p10"]), _ci(x["median"]), f"{x['true']:.2f}{mark}",
                     f"{x['true_p10']:.2f}", *("FAIL" if x[lim] else "pass" for lim in LIMITS)])
    print(table(rows, ["size", "round", "machine", "new", "base p10 ms", "new p10 ms", "p10 95% CI (gate)",
                       "median 95% CI", "true ratio", "true p10", *(f"gate {lim}" for lim in LIMITS)]))
    summary = []
    groups = [(s, m) for s in SIZES for m in ("quiet", "busy")] + [(s, "all") for s in SIZES] + [("all", "all")]
    for size, machine in groups:
        sel = [x for x in results
               if size in ("all", x["size"]) and machine in ("all", "busy" if x["busy"] else "quiet")]
        same, slow = [x for x in sel if x["kind"] == "same"], [x for x in sel if x["kind"] == "slow"]
        truth = [x["true"] for x in slow]
        summary.append([size, machine, *(f"{sum(x[lim] for x in same)}/{len(same)}" for lim in LIMITS),
                        *(f"{sum(not x[lim] for x in slow)}/{len(slow)}" for lim in LIMITS),
                        f"{sum(x['median 10%'] for x in same)}/{len(same)}",
                        f"{sum(not x['median 10%'] for x in slow)}/{len(slow)}",
                        f"{min(truth):.2f}-{max(truth):.2f}"])
    print()
    print(table(summary, ["size", "machine", *(f"false alarms {lim}" for lim in LIMITS),
                          *(f"misses {lim}" for lim in LIMITS), "median 10%: f.a.", "misses",
                          "slow twin's true ratio"]))


def record_all(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[float]]:
    """Calibrate, then record and judge every round; the results and the load after each round."""
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe() for _ in ARMS]
    procs = [ctx.Process(target=worker, args=(child,), daemon=True) for _, child in pipes]
    for p in procs:
        p.start()
    workers = [parent for parent, _ in pipes]
    results, loads = [], []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = args.keep or scratch
            os.makedirs(tmp, exist_ok=True)
            slow_rows = {}
            for size in SIZES:
                slow_rows[size], measured = calibrate(workers, tmp, size, 60 if size == "50ms" else 200)
                print(f"{size}: slower twin on {slow_rows[size]} rows instead of {ROWS} (x{measured:.3f})", flush=True)
            for r in range(args.rounds):
                busy = r % 2 == 1
                with burning(args.burners if busy else 0):
                    results += one_round(workers, tmp, r, slow_rows, args.steps)
                    loads.append(os.getloadavg()[0])
                print(f"round {r} ({'busy' if busy else 'quiet'}) done, load {loads[-1]:.2f}", flush=True)
    finally:
        for conn in workers:
            conn.send(("stop",))
        for p in procs:
            p.join(10)
    return results, loads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12, help="rounds of recordings (every other one busy)")
    ap.add_argument("--steps", type=int, default=130, help="steps a recording")
    ap.add_argument("--burners", type=int, default=1, help="CPU-spinning processes in a busy round")
    ap.add_argument("--one-thread", action="store_true",
                    help="run XLA's CPU client on one thread (default: its thread pool, as users have it)")
    ap.add_argument("--keep", metavar="DIR", help="write the run files here (kept) instead of a temporary folder")
    ap.add_argument("--judge", metavar="DIR", help="record nothing: judge the run files an earlier --keep DIR "
                                                   "kept with the gate as it is now")
    args = ap.parse_args()
    if args.judge:
        report(judge_kept(args.judge))
        return
    if args.one_thread:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    started = time.perf_counter()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    results, loads = record_all(args)
    report(results)
    print(f"\n{len(results) // 2} same-loop pairs and {len(results) // 2} pairs against the slower twin "
          f"({args.steps} steps a recording, {args.rounds // 2} of {args.rounds} rounds with {args.burners} "
          f"CPU burner(s), XLA {'on one thread' if args.one_thread else 'thread pool'}); "
          f"{time.perf_counter() - started:.0f} s in all; 1-min load average after each round: "
          f"{min(loads):.2f}-{max(loads):.2f}, at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
