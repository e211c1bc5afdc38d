"""A host read's cost is what removing it saves: its wait, less the part the host would have
waited for at its barrier anyway (hand-built runs with exact times; no torch needed).

torch_xla runs a barrier's graph while the host traces the next step, and the next barrier
waits for it. A ``loss.item()`` early in that step waits for it too. When the device is the
slower side (the graph outlasts the host's work), that part of the wait is not the read's:
measured on a real CPU loop (a 1024-wide MLP, ``loss.item()`` every step), the read's wait was
3.2 s, removing it saved 0.85-1.15 s, and the graph the read ran itself took 1.17 s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xprof.analysis import analyze
from xprof.runfile import RunWriter, load_run

T0 = 2_000_000.0


def _run(path: Path, graph_ms: float, host_ms: float, own_ms: float, steps: int = 12) -> Any:
    """Each step: the host works ``host_ms`` (read at 5 ms), the read waits for the graph the
    last barrier launched (``graph_ms`` from the step's start), then runs its own graph
    (``own_ms``); the barrier launches the next graph as the step ends."""
    w = RunWriter(path, {"name": "savings", "started_unix": T0, "meta": {}})
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/u/train.py", "line": 19, "func": "main",
             "via": None, "code": "total += loss.item()"})
    t = T0
    for i in range(steps):
        r0 = t + 0.005
        prev_end = t + graph_ms / 1e3 if i else t  # the first step begins with nothing running
        r1 = max(r0, prev_end) + own_ms / 1e3
        w.write({"type": "exec", "samples": [[r1, own_ms * 1e6]]})
        w.write({"type": "sync", "i": i, "site": 0, "t0": r0, "t1": r1, "x": 1, **({"u": 1} if i == 0 else {})})
        if i == 0:
            w.write({"type": "compile", "i": 0, "t": r1 - 0.0001, "ns": 1e5, "at": "step"})
        tb = r1 + (host_ms - 5) / 1e3
        t1 = tb + 0.0005
        step: dict[str, Any] = {"type": "step", "i": i, "t0": t, "tb": tb, "t1": t1, "barrier": "mark_step",
                                "o": 1, "bw": 1, "c": {"MarkStep": 1, "ExecuteComputation": 2}}
        if i == 0:
            step.update(bu=1)
            step["c"]["UncachedCompile"] = 2
            w.write({"type": "compile", "i": 0, "t": tb + 0.0002, "ns": 2e5, "at": "barrier"})
        else:
            step.update(bc=1)
            step["c"]["CachedCompile"] = 2
        w.write(step)
        w.write({"type": "exec", "samples": [[t1 + graph_ms / 1e3, graph_ms * 1e6]]})
        t = t1
    w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": steps})
    w.close()
    return analyze(load_run(path))


def _item(a: Any) -> Any:
    (f,) = [f for f in a.findings if f.kind == "item"]
    return f


def test_a_device_bound_read_costs_its_own_graph_and_the_host_work_after_it(tmp_path: Path) -> None:
    # Graph 30 ms, host 7 ms, the read's own graph 8 ms: a read waits 33 ms (25 for the last
    # graph, 8 for its own). Without it the step is max(7, 30) = 30 ms instead of 40: 10 ms.
    f = _item(_run(tmp_path / "r.json", graph_ms=30, host_ms=7, own_ms=8))
    # (step 0 began with nothing running: its read waited 8 ms, all lost, less its warm-up compile)
    assert f.seconds == pytest.approx(11 * 0.010 + 0.008 - 0.0001, abs=1e-6)
    assert f.evidence[1] == "the host waited 371.0 ms in total (30.9 ms a read)"
    assert f.evidence[2].startswith("253.0 ms of that was the device finishing the graph the previous barrier "
                                    "launched, which the host would have waited for at its barrier anyway")


def test_a_host_bound_read_costs_its_whole_wait(tmp_path: Path) -> None:
    # Graph 3 ms, host 12 ms: the last graph is done before the read (at 5 ms); only the
    # read's own graph is waited for, and all of it is lost.
    f = _item(_run(tmp_path / "r.json", graph_ms=3, host_ms=12, own_ms=4))
    assert f.seconds == pytest.approx(12 * 0.004 - 0.0001, abs=1e-6)
    assert not any("would have waited" in e for e in f.evidence)


def test_a_read_that_outlasts_the_host_work_by_part_counts_the_part_overlap_lost(tmp_path: Path) -> None:
    # Graph 12 ms, host 10 ms, own graph 2 ms: the read waits 7 + 2 ms. Without it the step is
    # max(10, 12) = 12 ms instead of 19: 7 ms saved of the 9 waited.
    f = _item(_run(tmp_path / "r.json", graph_ms=12, host_ms=10, own_ms=2))
    assert f.seconds == pytest.approx(11 * 0.007 + 0.002 - 0.0001, abs=1e-6)


@pytest.mark.parametrize("graph_ms, host_ms, own_ms", [(30, 7, 8), (3, 12, 4), (12, 10, 2)])
def test_the_exit_summary_counts_what_the_analysis_counts(tmp_path: Path, graph_ms: float, host_ms: float,
                                                          own_ms: float) -> None:
    # watch()'s exit summary is the analysis' verdict on the file (xprof.recorder.verdict): the
    # read's cost is the finding's, savings taken off; the live notice names that finding.
    from xprof.recorder.live import LiveNotices
    from xprof.report.prose import exit_lines

    a = _run(tmp_path / "r.json", graph_ms, host_ms, own_ms)
    f = _item(a)
    assert exit_lines(a, "r.json")[2] == f"xprof: first thing to change: {f.title}"
    assert f.title.endswith(f"{f.seconds:.2f} s") or f.title.endswith(f"{f.seconds * 1e3:.0f} ms"), f.title
    records = [json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:]]
    live = LiveNotices(T0, None)
    live.feed([r for r in records if r.get("type") != "end"])
    assert [key for key, _ in live.said] == [f.id]
