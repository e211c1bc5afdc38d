"""Impossible numbers never pass (issue 28): a record with a negative, NaN or infinite time,
duration or count, a count past any real run, or a step index repeated or out of order is
skipped and counted by both readers alike, said in summary, report and --json, and
``xprof compare`` refuses (exit 2) to judge such a file. No torch.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_report import XPROF, assert_one_line_error, invoke, tiny_run
from tests.test_columns import SAMPLES, assert_same_analysis, assert_same_run
from xprof.analysis import analyze
from xprof.runcolumns import load_columns
from xprof.runfile import load_run

NAN, INF = float("nan"), float("inf")
SOURCE = Path(SAMPLES[0]).with_name("item_every_step.json")

# (record type, which of them (0: the first), fields set on it)
CASES: dict[str, tuple[str, int, dict[str, Any]]] = {
    "step_negative_start": ("step", 3, {"t0": -1.0}),
    "step_nan_barrier": ("step", 3, {"tb": NAN}),
    "step_infinite_end": ("step", 3, {"t1": INF}),
    "step_huge_end": ("step", 3, {"t1": 1e300}),
    "step_ends_before_it_starts": ("step", 3, {"t1": 1.0}),
    "step_negative_compiles": ("step", 3, {"bu": -3}),
    "step_huge_count": ("step", 3, {"o": 1 << 50}),
    "step_negative_counter": ("step", 3, {"c": {"UncachedCompile": -3, "ExecuteComputation": 1}}),
    "step_nan_counter": ("step", 3, {"c": {"ExecuteComputation": NAN}}),
    "step_counter_past_64_bits": ("step", 3, {"c": {"MarkStep": 10 ** 20}}),
    "step_fractional_counter": ("step", 3, {"c": {"MarkStep": 1.5}}),
    "step_repeated_index": ("step", 3, {"i": 2}),
    "step_index_out_of_order": ("step", 3, {"i": 0}),
    "step_negative_index": ("step", 0, {"i": -1}),
    "sync_ends_before_it_starts": ("sync", 2, {"t1": 1.0}),
    "sync_nan_start": ("sync", 2, {"t0": NAN}),
    "sync_negative_executions": ("sync", 2, {"x": -1}),
    "compile_negative_time": ("compile", 1, {"ns": -5e8}),
    "compile_infinite_time": ("compile", 1, {"ns": INF}),
    "exec_negative_duration": ("exec", 0, {"samples": [[1.0, -5.0]]}),
    "graph_sizes_nan_time": ("graph_sizes", 0, {"samples": [[NAN, 30.0]]}),
    "sig_negative_dim": ("sig", 0, {"inputs": [{"name": "x", "shape": [-3, 4], "dtype": "float32", "src": "to"}]}),
    "end_nan_time": ("end", 0, {"t": NAN}),
    "end_negative_steps": ("end", 0, {"steps": -3}),
}


def _edited(tmp_path: Path, kind: str, which: int, fields: dict[str, Any]) -> Path:
    """The sample run with one record changed, written as the recorder writes (so the column
    reader takes the file itself)."""
    out, seen = [], 0
    for line in SOURCE.read_text(encoding="utf-8").splitlines(keepends=True):
        rec = json.loads(line)
        if rec.get("type") == kind:
            if seen == which:
                rec.update(fields)
                line = json.dumps(rec, separators=(",", ":")) + "\n"
            seen += 1
        out.append(line)
    path = tmp_path / "edited.json"
    path.write_text("".join(out), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_impossible_record_is_skipped_and_counted_by_both_readers(tmp_path: Path, case: str) -> None:
    path = _edited(tmp_path, *CASES[case])
    typed, cols = load_run(path), load_columns(path, engine="duckdb")
    assert (typed.impossible, typed.skipped_lines) == (1, 0)
    assert_same_run(cols, typed)
    a = analyze(cols)
    assert_same_analysis(a, analyze(typed))
    assert any("1 record with impossible values was skipped" in n for n in a.notes)
    t = a.totals
    for value in (t.compile_seconds, t.execute_seconds, t.wall_seconds, t.compiles, t.executions, t.steps):
        assert math.isfinite(value) and value >= 0


def test_the_honest_file_has_none() -> None:
    assert load_run(SOURCE).impossible == 0 and load_columns(SOURCE, engine="duckdb").run.impossible == 0


def test_summary_report_and_json_say_it_with_no_numpy_warning(tmp_path: Path) -> None:
    path = _edited(tmp_path, "compile", 1, {"ns": -5e8})
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    proc = subprocess.run([str(XPROF), "summary", str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "1 record with impossible values was skipped" in " ".join(proc.stdout.split())
    doc = json.loads(invoke(["summary", str(path), "--json"]).stdout)
    assert any("impossible values" in n for n in doc["notes"])
    assert invoke(["report", str(path), "-o", str(tmp_path / "r.html")]).exit_code == 0
    assert "1 record with impossible values was skipped" in (tmp_path / "r.html").read_text()


def _negative_compiles(path: Path) -> Path:
    lines = path.read_text().splitlines(keepends=True)
    out = []
    for line in lines:
        rec = json.loads(line)
        if rec.get("type") == "compile":
            rec["ns"] = -abs(rec["ns"])
            line = json.dumps(rec) + "\n"
        out.append(line)
    path.write_text("".join(out))
    return path


def test_compare_refuses_a_file_it_cannot_trust(tmp_path: Path) -> None:
    """The gate the honest file fails, the doctored file does not pass: exit 2."""
    base = tiny_run(tmp_path / "base.json", steps=12, change_at=99)
    honest = tiny_run(tmp_path / "new.json", steps=12, change_at=4)
    gate = ["--max-new-recompiles", "0", "--max-compile-seconds-increase", "10%"]
    assert invoke(["compare", str(base), str(honest), *gate]).exit_code == 1
    doctored = _negative_compiles(tiny_run(tmp_path / "doctored.json", steps=12, change_at=4))
    for runs in ([base, doctored], [doctored, base]):
        res = invoke(["compare", *map(str, runs), *gate])
        assert res.exit_code == 2, res.output
        assert_one_line_error(res.stderr, "impossible values", "cannot trust")


def test_compare_of_rank_folders_refuses_a_rank_file_it_cannot_trust(tmp_path: Path) -> None:
    base, new = tmp_path / "base", tmp_path / "new"
    for folder in (base, new):
        folder.mkdir()
        for rank in (0, 1):
            tiny_run(folder / f"run.rank{rank}.json")
    _negative_compiles(new / "run.rank1.json")
    res = invoke(["compare", str(base), str(new)])
    assert res.exit_code == 2 and "run.rank1.json" in res.stderr and "cannot trust" in res.stderr
