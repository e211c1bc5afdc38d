"""SPMD runs (issue 15) on real torch_xla with 4 virtual CPU devices.

SPMD must be switched on before any device use and needs ``CPU_NUM_DEVICES=4``, so the
scenarios run once per session in a process of their own (tests/scripts/spmd_scenarios.py,
about 15 s); the tests read the run files it wrote, its stderr (the live notices) and
torch_xla's own counters over each loop. The shared pytest process keeps its one device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import xprof.cli.commands  # noqa: F401  (registers the commands)
from tests.scenarios.common import SPMD_UNSHARDED_AT as UNSHARDED_AT
from xprof.analysis import Analysis, analyze
from xprof.cli.app import app
from xprof.comparison.graphs import diff_shapes
from xprof.runfile import load_run

pytestmark = pytest.mark.xla

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "scripts" / "spmd_scenarios.py"
SHARDED_2D = "{devices=[4,1]0,1,2,3}"
SHARDED_1D = "{devices=[4]0,1,2,3}"


def _env() -> dict[str, str]:
    env = dict(os.environ, PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4", PYTHONPATH=str(ROOT))
    for key in ("XLA_USE_SPMD", "XPROF_LIVE", "PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_FILE"):
        env.pop(key, None)
    return env


class Scenarios:
    def __init__(self, folder: Path, stderr: str) -> None:
        self.folder = folder
        self.stderr = stderr

    def load(self, name: str) -> tuple[Analysis, dict[str, float]]:
        counters = json.loads((self.folder / f"{name}.counters.json").read_text())
        return analyze(load_run(self.folder / f"{name}.json")), counters

    def notices(self, name: str) -> list[str]:
        """The live lines the scenario printed (each scenario ends with its report command)."""
        out: list[str] = []
        for line in self.stderr.splitlines():
            if line.startswith("xprof:"):
                out.append(line)
                if line.startswith("xprof: open the report") and f"{name}.json" in line:
                    return out
                if line.startswith("xprof: open the report"):
                    out = []
        raise AssertionError(f"no notices for {name}")


@pytest.fixture(scope="session")
def spmd_runs(tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    out = tmp_path_factory.mktemp("spmd")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out)], env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Scenarios(out, proc.stderr)


def test_spmd_executions_and_padding(spmd_runs: Scenarios) -> None:
    a, counters = spmd_runs.load("spmd_padding")
    t = a.totals
    # SPMD executions are counted by ExecuteReplicated, not ExecuteComputation.
    assert counters["ExecuteComputation"] == 0 and counters["ExecuteReplicated"] == 20
    assert t.executions == counters["ExecuteReplicated"]
    assert t.steps == 20 and t.extra_executions == 0 and t.syncs == 0
    # ExecuteReplicatedTime: every sample torch_xla took over the loop, and only those.
    assert counters["ExecuteReplicatedTime_samples"] == 20 and len(a.run.executions) == 20
    assert abs(t.execute_seconds - counters["ExecuteReplicatedTime_ns"] / 1e9) < 1e-6
    steady = a.steps[a.steps["work"] & (a.steps["ordinal"] >= 2) & (a.steps["uncached"] == 0)]
    assert len(steady) and (steady["execute_ms"] > 0).mean() > 0.8
    assert t.execute_ms_median is not None and t.execute_ms_median > 0
    assert t.compiles == counters["UncachedCompile"]
    # The step evidence (one optimizer step a barrier) and the padding finding are as without SPMD.
    assert a.steps["opt"].tolist() == [1] * 20
    assert [(f.cause, f.kind, f.input, f.dim) for f in a.findings] == [
        ("input_shape", "dynamic_padding", "input_ids", 1)]
    assert a.findings[0].compiles == 3  # 12 (step 2), 23, 30 after the warm-up's 12 and 17
    spmd = a.run.spmd
    assert spmd is not None
    assert (spmd.devices, spmd.local_devices, spmd.process_index, spmd.process_count) == (4, 4, 0, 1)
    assert spmd.mesh_shape == (4, 1) and spmd.axis_names == ("data", "model")
    # One process drives the 4 devices: one run file, not one per device.
    assert (a.run.meta["rank"], a.run.meta["world_size"]) == (0, 1) and a.run.rank is None
    assert sorted(p.name for p in spmd_runs.folder.glob("spmd_padding*.json")) == [
        "spmd_padding.counters.json", "spmd_padding.json"]
    # Every input's sharding is recorded beside its shape.
    assert set(a.inputs["sharding"]) == {SHARDED_2D, SHARDED_1D}
    # (lengths 12, 17, 12: step 0's graph for 12 was the one-off first step's)
    assert spmd_runs.notices("spmd_padding")[0].startswith(
        "xprof: step 2 recompiled: input_ids took shape [8, 12], which only the one-off first step had")


def test_sharding_change_is_its_own_cause(spmd_runs: Scenarios) -> None:
    a, counters = spmd_runs.load("spmd_sharding_change")
    assert a.totals.compiles == counters["UncachedCompile"] == 3
    assert a.totals.recompiles == 1  # the other unsharded step reuses that graph
    assert a.totals.executions == counters["ExecuteReplicated"] == 20
    assert [(f.cause, f.kind, f.input) for f in a.findings] == [("input_sharding", "sharding_change", "input_ids")]
    f = a.findings[0]
    assert f.steps == list(UNSHARDED_AT)
    assert f.shardings == [SHARDED_2D, "{replicated}"]  # read after the barrier: XLA replicated it
    assert f.shapes == [[8, 16]]
    assert f.evidence[0].startswith(f"step {UNSHARDED_AT[0]}: input_ids sharded {{replicated}}, at step 0 ")
    # DataLoader leaves: the sharding of the tensor each was moved to.
    assert set(a.inputs["src"]) == {"batch"} and len(a.inputs) == 6
    compiled = a.compiles[a.compiles["cause"] == "input_sharding"]
    assert compiled["step"].tolist() == [UNSHARDED_AT[0]]
    # The live notice names the same input and shardings, and the summary the same first fix.
    lines = spmd_runs.notices("spmd_sharding_change")
    assert lines[0].startswith(f"xprof: step {UNSHARDED_AT[0]} recompiled: input_ids sharded {{replicated}} "
                               f"(before: {SHARDED_2D}), same shapes; 1 recompile so far")
    assert "first thing to change: input_ids is sharded 2 ways with the same shape" in lines[-2]
    # Compare's shape diff tells the two shardings of the same shape apart.
    base, _ = spmd_runs.load("spmd_padding")
    only_new = [(s.input, s.shape, s.sharding) for s in diff_shapes(base, a) if s.side == "new"]
    assert ("input_ids", [8, 16], "{replicated}") in only_new
    assert ("input_ids", [8, 16], SHARDED_2D) in only_new


def test_host_read_under_spmd_counts_its_executions(spmd_runs: Scenarios) -> None:
    a, counters = spmd_runs.load("spmd_item")
    t = a.totals
    assert t.executions == counters["ExecuteReplicated"] == 24  # a barrier and a read each step
    assert t.syncs == 12 and t.extra_executions == 12
    assert [(f.cause, f.kind) for f in a.findings] == [("implicit_sync", "item")]
    assert int(a.syncs["executions"].sum()) == 12 and a.findings[0].execute_seconds > 0
    assert abs(t.execute_seconds - counters["ExecuteReplicatedTime_ns"] / 1e9) < 1e-6
    assert not any(f.cause == "data_dependent" for f in a.findings)


def test_fsdpv2_loop_is_clean(spmd_runs: Scenarios) -> None:
    a, counters = spmd_runs.load("spmd_fsdpv2")
    assert a.findings == []
    assert a.totals.recompiles == 0 and a.totals.syncs == 0
    assert a.totals.steps == 12
    assert a.totals.executions == counters["ExecuteReplicated"] == 12
    # The mesh was set inside the loop (after the header): read from the later spmd record.
    spmd = a.run.spmd
    assert spmd is not None and spmd.mesh_shape == (4, 1) and spmd.axis_names == ("fsdp", "model")
    # MpDeviceLoader(..., input_sharding=...) leaves, named as `for x, y in loader:` unpacks
    # them: the sharding the loader gave them.
    x = a.inputs[a.inputs["name"] == "x"]
    assert x["src"].tolist() == ["loader"] and x["sharding"].tolist() == [SHARDED_2D]
    assert "nothing stands out" in spmd_runs.notices("spmd_fsdpv2")[-2]


def test_spmd_in_summary_and_report(spmd_runs: Scenarios, tmp_path: Path) -> None:
    run = spmd_runs.folder / "spmd_sharding_change.json"
    cli = CliRunner()
    summary = cli.invoke(app, ["summary", str(run)], env={"COLUMNS": "140"})
    assert summary.exit_code == 0, summary.output
    assert "SPMD: 4 devices, mesh 4x1 (data, model)" in summary.output
    assert "input sharding changed" in summary.output
    assert f"[8, 16] sharded {SHARDED_2D} / {{replicated}}" in summary.output
    js = json.loads(cli.invoke(app, ["summary", "--json", str(run)]).output)
    assert js["spmd"]["devices"] == 4 and js["spmd"]["mesh_shape"] == [4, 1]
    assert js["findings"][0]["shardings"] == [SHARDED_2D, "{replicated}"]
    html = tmp_path / "r.html"
    rep = cli.invoke(app, ["report", str(run), "-o", str(html)])
    assert rep.exit_code == 0, rep.output
    text = html.read_text()
    assert "Sharded 2 ways with the same shape" in text and SHARDED_2D in text
    assert "4 devices, mesh 4x1 (data, model)" in text  # the run's metadata table


def test_xprof_run_finds_spmd_switched_on_by_the_script(tmp_path: Path) -> None:
    """``xprof run`` starts recording before the script calls ``xr.use_spmd()``; torch_xla's
    own analysis (PT_XLA_DEBUG_LEVEL=2, captured by ``xprof run``) referees the result."""
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", "-o", str(out), str(SCRIPT),
                           "--bare", "spmd_sharding_change"], env=_env(), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a = analyze(load_run(out))
    assert a.run.spmd is not None and a.run.spmd.devices == 4 and a.run.spmd.mesh_shape == (4, 1)
    assert "spmd" not in a.run.meta  # found at the first barrier, written as an spmd record
    assert a.totals.executions == 20
    assert [(f.cause, f.input, f.steps) for f in a.findings] == [("input_sharding", "input_ids", list(UNSHARDED_AT))]
    # Three distinct graph hashes, the resharded step's one of its own, and 20 executions.
    hashes = a.compiles["graph_hash"].tolist()
    assert len(hashes) == 3 and len(set(hashes)) == 3 and all(hashes)
    assert a.compiles["cause"].tolist() == ["warmup", "warmup", "input_sharding"]
    capture = next(d for d in a.run.debug if d.kind == "capture")
    assert capture.fields["executions"] == 20 and capture.fields["compiles"] == 3


def test_single_device_run_records_no_sharding(device: Any, tmp_path: Path) -> None:
    """Without SPMD (the shared one-device process) nothing of the above is written."""
    import torch
    import torch_xla

    import xprof

    path = tmp_path / "plain.json"
    with xprof.watch(path) as w:
        wt = torch.ones(4, 4).to(device)
        for _ in range(3):
            x = torch.randn(2, 4).to(device)
            wt = wt + x.sum()
            torch_xla.sync()
        rec = w.recorder
        assert rec is not None and not rec.spmd and not rec.keep_devices  # decided at the first graph
    run = load_run(path)
    assert len(run.steps) == 3 and all(s.ran_graph for s in run.steps)
    assert run.spmd is None and "spmd" not in run.meta
    assert run.signatures and all(i.sharding is None for sig in run.signatures.values() for i in sig)
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert not any("sharding" in e for r in raw if r.get("type") == "sig" for e in r["inputs"])
    assert not any(r.get("type") == "spmd" for r in raw)


def test_spmd_ranks_are_processes(device: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A pod: each host's process writes its own file, ranked by xr.process_index()."""
    import importlib

    watch_mod = importlib.import_module("xprof.recorder.watch")

    monkeypatch.setattr(watch_mod, "process_rank", lambda: (1, 2))
    rank, world, _ = watch_mod._process_identity()
    assert (rank, world) == (1, 2)
    assert watch_mod.rank_path(str(tmp_path / "run.json"), rank, world) == str(tmp_path / "run.rank1.json")
    monkeypatch.setattr(watch_mod, "process_rank", lambda: None)  # not SPMD: torch_xla's ordinal
    assert watch_mod._process_identity()[:2] == (0, 1)


def test_columnar_reader_gives_the_same_analysis_of_spmd_runs(spmd_runs: Scenarios) -> None:
    """Each SPMD run read by DuckDB into columns analyses exactly as the record reader's."""
    from tests.test_columns import assert_same_analysis, assert_same_run
    from xprof.runcolumns import load_columns

    runs = sorted(p for p in spmd_runs.folder.glob("*.json") if not p.name.endswith(".counters.json"))
    assert runs
    for path in runs:
        cols, typed = load_columns(path, engine="duckdb"), load_run(path)
        assert_same_run(cols, typed)
        assert_same_analysis(analyze(cols), analyze(typed))
