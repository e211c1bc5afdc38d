"""--explain on real torch_xla: the loops whose graph changes with the same inputs (an LR
factor reaching 1.0, a term added every 4 steps, a slice bound, a list stacked at a read),
recorded in fresh processes with the mode on and off. The findings name the line each loop's
source says, and the counts are the same either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xprof.analysis import analyze
from xprof.analysis.findings.explained import GRAPH_KINDS
from xprof.runfile import load_run

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    # loop: (its source file, a piece of the line that changes the graph, what changed)
    "lr_schedule_scalar": ("tests/corpus/loops/lr_schedule_scalar.py", "* warmup", "an input became the constant 1"),
    "every_n_steps": ("tests/scenarios/every_n_steps.py", "loss = loss + 1e-3", "ops added"),
    "slice_bound": ("tests/scenarios/slice_bound.py", "# expect: bound", "slice 20 -> 24"),
    "growing_list": ("tests/corpus/loops/growing_list.py", "history.append(torch.stack(losses)",
                     "concatenate of 4 -> 8 tensors"),
}

pytestmark = [pytest.mark.xla, pytest.mark.slow]


def _record(out: Path, mode: str) -> None:
    out.mkdir()
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(ROOT), "XPROF_LIVE": "0"}
    proc = subprocess.run([sys.executable, str(ROOT / "tests/scripts/explain_runs.py"), str(out), mode],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch_xla")
    base = tmp_path_factory.mktemp("explain")
    _record(base / "on", "on")
    _record(base / "off", "off")
    return base


def _line_of(source: str, piece: str) -> int:
    return next(n for n, text in enumerate((ROOT / source).read_text().splitlines(), 1) if piece in text)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_finding_names_the_line_and_the_value(runs: Path, name: str) -> None:
    source, piece, what = EXPECTED[name]
    line = _line_of(source, piece)
    findings = analyze(load_run(runs / "on" / f"{name}.json")).findings
    explained = [f for f in findings if f.graph_changes]
    assert explained, [f.title for f in findings]
    first = explained[0].graph_changes[0]["lines"][0]  # type: ignore[index]
    assert (first["file"], first["line"]) == (str(ROOT / source), line)
    assert what in first["what"]
    for f in findings:
        if f.cause == "graph_change" and f.kind in GRAPH_KINDS:
            assert (f.file, f.line) == (str(ROOT / source), line), f.title
            assert f"{os.path.basename(source)}:{line}" in f.title and what.split(" -> ")[0] in f.title


def test_no_graph_finding_without_its_line(runs: Path) -> None:
    for name in EXPECTED:
        for f in analyze(load_run(runs / "on" / f"{name}.json")).findings:
            if f.cause == "graph_change" and f.kind in GRAPH_KINDS:
                assert f.file and f.line and f.graph_changes, (name, f.title)


def _counts(path: Path) -> tuple[list[tuple[int, int]], int]:
    """Compiles (uncached, cached) step by step, and executions in all (torch_xla counts an
    execution when it ends: one may land in the next step's counters)."""
    compiles, executions = [], 0
    for line in path.read_text().splitlines()[1:]:
        r = json.loads(line)
        c = r.get("c") if r.get("type") == "step" else r.get("tail") if r.get("type") == "end" else None
        if isinstance(c, dict):
            executions += c.get("ExecuteComputation", 0)
            if r["type"] == "step":
                compiles.append((c.get("UncachedCompile", 0), c.get("CachedCompile", 0)))
    return compiles, executions


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_counts_are_the_same_with_and_without_explain(runs: Path, name: str) -> None:
    on, off = runs / "on" / f"{name}.json", runs / "off" / f"{name}.json"
    assert _counts(on) == _counts(off)
    a, b = load_run(on), load_run(off)
    assert len(a.compiles) == len(b.compiles) and a.end is not None and b.end is not None
    assert a.errors == b.errors == []
    assert a.graph_changes and not b.graph_changes


def test_ir_debug_is_restored(runs: Path) -> None:
    for mode in ("on", "off"):
        assert json.loads((runs / mode / "ir_debug.json").read_text()) == {"before": False, "after": False}


def test_explain_switches_itself_on_where_the_rules_can_only_say_the_graph_changed(
        tmp_path: Path) -> None:
    """explain=None (the default): on at the first compile the live diagnosis calls a changed
    graph (the weight reaching 1.0 at step 4; that change gets no line), so the next one (0.0
    at step 7) is compared at its line. Padding per batch and an evaluation's own graphs are
    explained by their rules: the mode stays off, and their steps cost nothing more."""
    pytest.importorskip("torch_xla")
    _record(tmp_path / "auto", "auto")
    a = analyze(load_run(tmp_path / "auto" / "loss_weight_one_then_zero.json"))
    assert any(n.startswith("--explain switched itself on at step 4") for n in a.notes), a.notes
    line = _line_of("tests/corpus/loops/loss_weight_one_then_zero.py", "* aux_weight")
    changes = [g for f in a.findings for g in (f.graph_changes or [])]
    assert [c["step"] for c in changes] == [7], changes
    assert changes[0]["lines"][0]["line"] == line and changes[0]["lines"][0]["what"] == "the constant 1 -> 0"
    for name in ("padding_collate_loader", "eval_pass"):
        run = load_run(tmp_path / "auto" / f"{name}.json")
        assert not [d for d in run.debug if d.kind == "explain"] and not run.graph_changes, name
    assert json.loads((tmp_path / "auto" / "ir_debug.json").read_text()) == {"before": False, "after": False}
