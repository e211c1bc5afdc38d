"""xprof export --format chrome-trace: structure of the Trace Event Format output."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xprof.cli.app import app
from xprof.report.trace import LANE_STRIDE, TID_EXECUTIONS, TRACKS, chrome_trace
from xprof.runfile import RunWriter, load_run

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_runs"


def _cli() -> CliRunner:
    import xprof.cli.commands  # noqa: F401  (registers the commands)

    return CliRunner()


def _exact_run(tmp_path: Path) -> Path:
    """A hand-written run with known times: 2 steps, a compile, 2 executions, a sync."""
    p = tmp_path / "exact.json"
    w = RunWriter(p, {"name": "exact", "started_unix": 1000.0, "meta": {"rank": 1, "world_size": 2}})
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/u/train.py", "line": 7,
             "func": "main", "via": None, "code": "loss.item()"})
    w.write({"type": "compile", "i": 0, "t": 1000.5, "ns": 400e6, "at": "barrier"})
    w.write({"type": "step", "i": 0, "t0": 1000.0, "tb": 1000.05, "t1": 1000.6, "barrier": "mark_step",
             "bu": 1})
    w.write({"type": "sync", "i": 1, "site": 0, "t0": 1000.7, "t1": 1000.71, "c": 1, "x": 1})
    w.write({"type": "step", "i": 1, "t0": 1000.6, "tb": 1000.8, "t1": 1000.9, "barrier": "mark_step",
             "bc": 1})
    w.write({"type": "exec", "samples": [[1000.55, 50e6], [1000.9, 20e6]]})
    w.write({"type": "end", "t": 1001.0, "status": "ok", "steps": 2, "syncs": 1, "errors": 0})
    w.close()
    return p


def _check_structure(trace: dict) -> list[dict]:
    assert isinstance(trace["traceEvents"], list)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    for e in spans:
        for key in ("name", "ph", "ts", "dur", "pid", "tid", "cat", "args"):
            assert key in e, (key, e)
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    last: dict[tuple[int, int], float] = defaultdict(float)
    for e in spans:
        key = (e["pid"], e["tid"])
        assert e["ts"] >= last[key], f"ts goes back on track {key}"
        last[key] = e["ts"]
    named = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in spans} <= named
    assert any(e["name"] == "process_name" for e in meta)
    return spans


def test_exact_run_times_and_tracks(tmp_path: Path) -> None:
    trace = chrome_trace(load_run(_exact_run(tmp_path)))
    spans = _check_structure(trace)
    by_tid = defaultdict(list)
    for e in spans:
        by_tid[e["tid"]].append(e)
    assert all(e["pid"] == 1 for e in spans)  # rank 1 of 2
    steps = [e for e in by_tid[1] if e["name"].startswith("step")]
    assert [(e["ts"], e["dur"]) for e in steps] == [(0.0, 600000.0), (600000.0, 300000.0)]
    assert steps[0]["cat"] == "compile"
    (compile_,) = by_tid[2]
    assert (compile_["ts"], compile_["dur"]) == (100000.0, 400000.0)  # stamped at its end
    assert [(e["ts"], e["dur"]) for e in by_tid[3]] == [(500000.0, 50000.0), (880000.0, 20000.0)]
    (sync,) = by_tid[4]
    assert sync["name"] == "item at train.py:7" and sync["args"]["code"] == "loss.item()"
    assert sync["args"]["executions"] == 1 and "transfers" not in sync["args"]  # x counts executions
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == set(TRACKS.values())


@pytest.mark.parametrize("name", ["item_every_step", "padded_longest", "step_closure"])
def test_recorded_sample_runs_export(name: str, tmp_path: Path) -> None:
    src = SAMPLES / f"{name}.json"
    if not src.exists():
        pytest.skip(f"{src} not recorded")
    out = tmp_path / "t.json"
    result = _cli().invoke(app, ["export", str(src), "--format", "chrome-trace", "-o", str(out)])
    assert result.exit_code == 0, result.output
    trace = json.loads(out.read_text())
    spans = _check_structure(trace)
    run = load_run(src)
    assert sum(1 for e in spans if e["tid"] % LANE_STRIDE == 2) == len(run.compiles)
    assert sum(1 for e in spans if e["tid"] % LANE_STRIDE == 3) == len(run.executions)
    assert sum(1 for e in spans if e["tid"] % LANE_STRIDE == 4) == len(run.syncs)
    assert_nested_per_track(trace)


def assert_nested_per_track(trace: dict) -> None:
    """The rule Perfetto's JSON importer applies: on one track (pid, tid), each complete event
    either starts after the open one ends or ends within it; one that ends past it is dropped
    (``slice_drop_overlapping_complete_event``). Times are read as the importer reads them,
    ``llround(us * 1000)`` nanoseconds for ``ts`` and ``dur`` each."""
    tracks: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            start = round(e["ts"] * 1000)
            tracks[(e["pid"], e["tid"])].append((start, start + round(e["dur"] * 1000), e["name"]))
    for key, slices in tracks.items():
        open_: list[tuple[int, int, str]] = []
        for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ and open_[-1][1] <= start:
                open_.pop()
            assert not open_ or end <= open_[-1][1], f"track {key}: {name} [{start}, {end}] overlaps {open_[-1]}"
            open_.append((start, end, name))


def test_slices_nest_per_track_at_unix_times(tmp_path: Path) -> None:
    """Steps back to back at unix times (where a float holds ~0.2 µs), each with its barrier
    ending with it, compiles inside, and executions that overlap (torch_xla ran them
    concurrently): no slice crosses another on its track, the overlapping ones get a lane."""
    rng = random.Random(30)
    p = tmp_path / "unix.json"
    t = 1_765_000_000.0 + rng.random()
    w = RunWriter(p, {"name": "unix", "started_unix": t})
    samples = []
    for i in range(300):
        t1 = t + rng.uniform(0.0005, 0.4)
        tb = t + (t1 - t) * rng.random()
        w.write({"type": "compile", "i": i, "t": tb + (t1 - tb) / 2, "ns": (t1 - tb) / 2 * 1e9, "at": "barrier"})
        w.write({"type": "step", "i": i, "t0": t, "tb": tb, "t1": t1, "barrier": "mark_step", "bu": 1})
        samples.append([t1, (t1 - t) * 1e9 * 1.5])  # starts before the previous one ended
        t = t1
    w.write({"type": "exec", "samples": samples})
    w.write({"type": "end", "t": t, "status": "ok", "steps": 300, "syncs": 0, "errors": 0})
    w.close()
    trace = chrome_trace(load_run(p))
    assert_nested_per_track(trace)
    executions = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] % LANE_STRIDE == TID_EXECUTIONS]
    assert len(executions) == 300 and {3, 13} <= {e["tid"] for e in executions}
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names[13] == "executions (2)"


def test_bad_input_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("hello\n")
    for args in (["export", str(bad)], ["export", str(tmp_path / "missing.json")],
                 ["export", str(_exact_run(tmp_path)), "--format", "svg"]):
        proc = subprocess.run([sys.executable, "-m", "xprof", *args], capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("xprof: error: ") and proc.stderr.count("\n") == 1
        assert "Traceback" not in proc.stderr


def test_unwritable_output_exit_2(tmp_path: Path) -> None:
    result = _cli().invoke(app, ["export", str(_exact_run(tmp_path)), "-o", str(tmp_path / "no" / "t.json")])
    assert result.exit_code == 2
