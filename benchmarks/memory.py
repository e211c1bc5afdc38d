"""Does a long recording stay bounded, and how big is the run file?

1. Simulated: the real ``Recorder`` and ``RunWriter`` driven by a fake ``MetricsSource``
   for 100k barriers (one batch of two inputs a step, a host read every 100 steps, one
   compile at the start), so a day-long run is simulated in seconds. The recorder's own
   Python memory is measured with ``tracemalloc`` at checkpoints; it must not grow with
   the number of steps (everything the recorder keeps is interned: sites, signatures).
2. Real: a torch_xla CPU training loop of 2k steps under ``watch()``: run-file bytes per
   1k steps and the process RSS change (noisy; compared with the same loop unwatched).

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/memory.py [--steps 100000] [--real-steps 2000]
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import TinyLoop, emit_json, quiet_deprecations, table

from xprof.recorder import metrics as m


class FakeMetrics:
    """A MetricsSource with torch_xla's shape: counters, and 1024-sample ring buffers."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = collections.defaultdict(int)
        self.rings: dict[str, collections.deque[tuple[float, float]]] = collections.defaultdict(
            lambda: collections.deque(maxlen=1024))
        self.clock = 1.7e9
        # Full rings from before the recording, so the fake's own memory stays flat and
        # only the recorder's growth shows.
        for name in (m.COMPILE_TIME, m.EXECUTE_TIME, m.GRAPH_SIZE, m.TRANSFER_FROM):
            for _ in range(1024):
                self.rings[name].append((self.tick(), 1.0))

    def counter_names(self) -> Sequence[str]:
        return [k for k, v in self.counters.items() if v]

    def counter_value(self, name: str) -> int | None:
        return self.counters.get(name) or None

    def samples(self, name: str) -> Sequence[tuple[float, float]]:
        return list(self.rings[name])

    def tick(self) -> float:
        self.clock += 0.001
        return self.clock

    def step(self, first: bool) -> None:
        """What one steady-state training step does to the metrics."""
        c = self.counters
        c[m.MARK_STEP] += 1
        if first:
            c[m.UNCACHED] += 1
            self.rings[m.COMPILE_TIME].append((self.tick(), 1.0e9))
        else:
            c[m.CACHED] += 1
            c[m.EXECUTE] += 1
            self.rings[m.EXECUTE_TIME].append((self.tick(), 3.0e5))
        self.rings[m.GRAPH_SIZE].append((self.tick(), 37.0))

    def host_read(self) -> None:
        self.counters[m.LOCAL_SCALAR] += 1
        self.counters[m.TO_CPU] += 1
        self.counters[m.EXECUTE] += 1
        self.rings[m.TRANSFER_FROM].append((self.tick(), 1.4e5))


class FakeTensor:
    def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
        self.shape = shape
        self.dtype = dtype


def simulate(path: str, steps: int, trace: bool) -> dict[str, Any]:
    """Drive a real Recorder for ``steps`` barriers; with ``trace``, measure its Python
    memory with tracemalloc (exact, but slows the loop several times), else the RSS."""
    from xprof.recorder.core import Recorder
    from xprof.recorder.frames import Site
    from xprof.runfile import RunWriter

    checkpoints = sorted({c for c in (1000, 10_000, 25_000, 50_000, 100_000, steps) if c <= steps})
    source = FakeMetrics()
    site = Site(__file__, 42, "train", None)
    batch = [("input_ids", FakeTensor((16, 128), "int64")), ("labels", FakeTensor((16,), "int64"))]
    gc.collect()
    if trace:
        tracemalloc.start(16)
    base = tracemalloc.get_traced_memory()[0] if trace else 0
    rss0 = _rss_kib()
    writer = RunWriter(path, {"xprof_version": "bench", "name": "sim", "meta": {}})
    rec = Recorder(writer, source)
    rec.start()
    rows = []
    t_start = time.perf_counter()
    for i in range(steps):
        rec.on_batch(batch, "batch")  # type: ignore[arg-type]
        if i % 100 == 99:
            before = rec.counters.sync_counts()
            source.host_read()
            rec.on_host_read("item", site, time.time(), time.time(), before, rec.counters.sync_counts(),
                             False)
        before2 = rec.counters.compile_counts()
        tb = time.time()
        source.step(first=i == 0)
        rec.on_barrier(tb, before2, "mark_step")
        if i + 1 in checkpoints:
            rec.flush()  # what is queued reaches the file: its size is the run's
            gc.collect()  # new tuples stay gc-tracked until a collection: count after one
            current = _xprof_bytes() if trace else float("nan")
            rows.append({"steps": i + 1, "recorder_kib": current / 1024, "rss_delta_kib": _rss_kib() - rss0,
                         "gc_objects": len(gc.get_objects()),
                         "file_bytes": os.path.getsize(path),
                         "elapsed_s": time.perf_counter() - t_start})
    rec.stop("ok", None)
    peak = float("nan")
    if trace:
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return {"checkpoints": rows, "peak_kib": peak / 1024, "final_bytes": os.path.getsize(path)}


def _xprof_bytes() -> int:
    """Live bytes allocated with an xprof frame on the stack (the recorder's own memory;
    the fake source's ring buffers are left out)."""
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/xprof/*", all_frames=True)])
    return sum(stat.size for stat in snap.statistics("filename"))


def _rss_kib() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def real(path: str, steps: int) -> dict[str, Any]:
    import xprof

    quiet_deprecations()
    loop = TinyLoop()
    loop.timed_steps(30)
    r0 = _rss_kib()
    loop.timed_steps(steps)
    r1 = _rss_kib()
    with xprof.watch(path, live=False):
        loop.timed_steps(steps)
    r2 = _rss_kib()
    size = os.path.getsize(path)
    from xprof.runfile import load_run

    run = load_run(path)
    kinds: collections.Counter[str] = collections.Counter()
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            kinds[line[9:line.index('"', 9)]] += len(line)
    return {"steps": len(run.steps), "file_bytes": size,
            "bytes_per_1k_steps": size / max(len(run.steps), 1) * 1000,
            "bytes_by_record": dict(kinds),
            "rss_delta_kib_plain": r1 - r0, "rss_delta_kib_watched": r2 - r1}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000, help="simulated barriers (RSS, object counts)")
    ap.add_argument("--trace-steps", type=int, default=20_000,
                    help="simulated barriers measured with tracemalloc (0: skip)")
    ap.add_argument("--real-steps", type=int, default=2000, help="real torch_xla steps (0: skip)")
    ap.add_argument("--json", help="write the figures here (for run_all.py)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="xprof-bench-") as tmp:
        out: dict[str, Any] = {}
        if args.trace_steps:
            tr = simulate(os.path.join(tmp, "trace.json"), args.trace_steps, trace=True)
            out["traced"] = tr
            print(f"simulated recording (fake MetricsSource, real Recorder + RunWriter), "
                  f"{args.trace_steps} steps under tracemalloc:")
            print(table([[r["steps"], r["recorder_kib"]] for r in tr["checkpoints"]],
                        ["steps", "recorder KiB (live, allocated under xprof frames)"]))
            print(f"peak traced memory: {tr['peak_kib']:.0f} KiB\n")
        sim = simulate(os.path.join(tmp, "sim.json"), args.steps, trace=False)
        out["simulated"] = sim
        print(f"simulated recording, {args.steps} steps (no tracemalloc):")
        print(table([[r["steps"], r["rss_delta_kib"], r["gc_objects"], r["file_bytes"] / 1e6,
                      r["file_bytes"] / r["steps"] * 1000 / 1024, r["elapsed_s"] / r["steps"] * 1e6]
                     for r in sim["checkpoints"]],
                    ["steps", "RSS change KiB", "gc objects", "file MB", "file KiB / 1k steps",
                     "µs / step (recorder + fake)"]))
        if args.real_steps:
            rl = real(os.path.join(tmp, "real.json"), args.real_steps)
            out["real"] = rl
            print(f"\nreal torch_xla CPU loop, {rl['steps']} steps under watch():")
            kib = rl["bytes_per_1k_steps"] / 1024
            print(f"run file {rl['file_bytes']} bytes = {kib:.1f} KiB per 1k steps")
            print("bytes by record type: " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(rl["bytes_by_record"].items())))
            print(f"RSS change over {args.real_steps} steps: plain {rl['rss_delta_kib_plain']} KiB, "
                  f"watched {rl['rss_delta_kib_watched']} KiB")
    emit_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
