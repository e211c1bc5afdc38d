"""SPMD runs (issue 15) on real torch_xla with 4 virtual CPU devices.

SPMD must be switched on before any device use and needs ``CPU_NUM_DEVICES=4``, so the
scenarios run once per session in a process of their own (tests/scripts/spmd_scenarios.py,
about 10 s); the tests read the run files it wrote and torch_xla's own counters over each
loop. The shared pytest process keeps its one device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios.common import SPMD_UNSHARDED_AT as UNSHARDED_AT
from xprof.analysis import Analysis, analyze
from xprof.comparison.graphs import diff_shapes
from xprof.runfile import load_run

pytestmark = pytest.mark.xla

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "scripts" / "spmd_scenarios.py"
SHARDED_2D = "{devices=[4,1]0,1,2,3}"


def _env() -> dict[str, str]:
    env = dict(os.environ, PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4", PYTHONPATH=str(ROOT))
    env.pop("XLA_USE_SPMD", None)
    return env


@pytest.fixture(scope="session")
def spmd_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spmd")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out)], env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _load(folder: Path, name: str) -> tuple[Analysis, dict[str, int]]:
    counters = json.loads((folder / f"{name}.counters.json").read_text())
    return analyze(load_run(folder / f"{name}.json")), counters


def test_spmd_executions_and_padding(spmd_runs: Path) -> None:
    a, counters = _load(spmd_runs, "spmd_padding")
    t = a.totals
    # SPMD executions are counted by ExecuteReplicated, not ExecuteComputation.
    assert counters["ExecuteComputation"] == 0 and counters["ExecuteReplicated"] == 20
    assert t.executions == counters["ExecuteReplicated"]
    assert t.steps == 20 and t.extra_executions == 0
    assert t.execute_seconds > 0
    steady = a.steps[a.steps["work"] & (a.steps["ordinal"] >= 2) & (a.steps["uncached"] == 0)]
    assert len(steady) and (steady["execute_ms"] > 0).mean() > 0.8  # ExecuteReplicatedTime samples
    assert t.execute_ms_median is not None and t.execute_ms_median > 0
    assert t.compiles == counters["UncachedCompile"]
    # The padding finding is the same as without SPMD.
    assert [(f.cause, f.kind, f.input, f.dim) for f in a.findings] == [
        ("input_shape", "dynamic_padding", "input_ids", 1)]
    assert a.findings[0].compiles == 3  # 12 (step 2), 23, 30 after the warm-up's 12 and 17
    spmd = a.run.spmd
    assert spmd is not None
    assert (spmd.devices, spmd.process_index, spmd.process_count) == (4, 0, 1)
    # One process drives the 4 devices: one run file, not one per device.
    assert (a.run.meta["rank"], a.run.meta["world_size"]) == (0, 1) and a.run.rank is None
    assert sorted(p.name for p in spmd_runs.glob("spmd_padding*.json")) == ["spmd_padding.counters.json",
                                                                             "spmd_padding.json"]
    assert spmd.mesh_shape == (4, 1) and spmd.axis_names == ("data", "model")
    # Every input's sharding is recorded beside its shape.
    assert set(a.inputs["sharding"]) == {SHARDED_2D, "{devices=[4]0,1,2,3}"}


def test_sharding_change_is_its_own_cause(spmd_runs: Path) -> None:
    a, counters = _load(spmd_runs, "spmd_sharding_change")
    assert a.totals.compiles == counters["UncachedCompile"] == 3
    assert a.totals.recompiles == 1  # the other unsharded step reuses that graph
    assert a.totals.executions == counters["ExecuteReplicated"]
    assert [(f.cause, f.kind, f.input) for f in a.findings] == [("input_sharding", "sharding_change", "input_ids")]
    f = a.findings[0]
    assert f.steps == list(UNSHARDED_AT)
    assert f.shardings is not None and f.shardings[0] == SHARDED_2D and len(f.shardings) == 2
    replicated = f.shardings[1]
    assert replicated != SHARDED_2D
    assert f.shapes == [[8, 16]]
    assert "MpDeviceLoader" in f.advice and "input_sharding" in f.advice
    assert f"step {UNSHARDED_AT[0]}: input_ids" in f.evidence[0]
    compiled = a.compiles[a.compiles["cause"] == "input_sharding"]
    assert compiled["step"].tolist() == [UNSHARDED_AT[0]]
    # Compare's shape diff tells the two shardings of the same shape apart.
    base, _ = _load(spmd_runs, "spmd_padding")
    only_new = [(s.input, s.shape, s.sharding) for s in diff_shapes(base, a) if s.side == "new"]
    assert ("input_ids", [8, 16], replicated) in only_new
    assert ("input_ids", [8, 16], SHARDED_2D) in only_new


def test_fsdpv2_loop_is_clean(spmd_runs: Path) -> None:
    a, counters = _load(spmd_runs, "spmd_fsdpv2")
    assert a.findings == []
    assert a.totals.recompiles == 0
    assert a.totals.steps == 12
    assert a.totals.executions == counters["ExecuteReplicated"] == 12
    # The mesh was set inside the loop (after the header): read from the later spmd record.
    spmd = a.run.spmd
    assert spmd is not None and spmd.mesh_shape == (4, 1) and spmd.axis_names == ("fsdp", "model")
    # MpDeviceLoader(..., input_sharding=...) leaves: the sharding the loader gave them.
    x = a.inputs[a.inputs["name"] == "batch[0]"]
    assert x["src"].tolist() == ["loader"] and x["sharding"].tolist() == [SHARDED_2D]


def test_spmd_in_summary_and_report(spmd_runs: Path, tmp_path: Path) -> None:
    run = spmd_runs / "spmd_sharding_change.json"
    env = _env()
    summary = subprocess.run([sys.executable, "-m", "xprof", "summary", str(run)], env=env,
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "SPMD: 4 devices, mesh 4x1 (data, model)" in summary.stdout
    assert "input sharding changed" in summary.stdout
    js = json.loads(subprocess.run([sys.executable, "-m", "xprof", "summary", "--json", str(run)], env=env,
                                   capture_output=True, text=True, timeout=120).stdout)
    assert js["spmd"]["devices"] == 4 and js["spmd"]["mesh_shape"] == [4, 1]
    assert js["findings"][0]["shardings"][0] == SHARDED_2D
    html = tmp_path / "r.html"
    rep = subprocess.run([sys.executable, "-m", "xprof", "report", str(run), "-o", str(html)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    text = html.read_text()
    assert "Sharded 2 ways with the same shape" in text and SHARDED_2D in text
    assert "4 devices, mesh 4x1 (data, model)" in text  # the run's metadata table


def test_xprof_run_finds_spmd_switched_on_by_the_script(tmp_path: Path) -> None:
    """``xprof run`` starts recording before the script calls ``xr.use_spmd()``."""
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", "-o", str(out), str(SCRIPT),
                           "--bare", "spmd_sharding_change"], env=_env(), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a = analyze(load_run(out))
    assert a.run.spmd is not None and a.run.spmd.devices == 4 and a.run.spmd.mesh_shape == (4, 1)
    assert a.totals.executions == 20
    assert [(f.cause, f.input) for f in a.findings] == [("input_sharding", "input_ids")]
    # torch_xla's own analysis (PT_XLA_DEBUG_LEVEL=2, captured by xprof run) is the referee:
    # three distinct graph hashes, the resharded step's one of its own, and 20 executions.
    hashes = a.compiles["graph_hash"].tolist()
    assert len(hashes) == 3 and len(set(hashes)) == 3 and all(hashes)
    capture = next(d for d in a.run.debug if d.kind == "capture")
    assert capture.fields["executions"] == 20


def test_single_device_run_records_no_sharding(device: Any, tmp_path: Path) -> None:
    """Without SPMD (the shared one-device process) nothing of the above is written."""
    import torch
    import torch_xla

    import xprof

    path = tmp_path / "plain.json"
    with xprof.watch(path):
        w = torch.ones(4, 4).to(device)
        for _ in range(3):
            x = torch.randn(2, 4).to(device)
            (x @ w).sum()
            torch_xla.sync()
    run = load_run(path)
    assert run.spmd is None and "spmd" not in run.meta
    assert run.signatures and all(i.sharding is None for sig in run.signatures.values() for i in sig)
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert not any("sharding" in e for r in raw if r.get("type") == "sig" for e in r["inputs"])
    assert not any(r.get("type") == "spmd" for r in raw)
