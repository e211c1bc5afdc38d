"""Per-rank comparison: path expansion, the table, stragglers, and a real xmp.spawn run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from xprof.analysis.ranks import rank_table, stragglers
from xprof.cli.app import app
from xprof.runfile import RunWriter, expand_run_paths

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "scripts" / "spawn_ranks.py"


def _cli() -> CliRunner:
    import xprof.cli.commands  # noqa: F401

    return CliRunner()


def _write_rank(folder: Path, rank: int, compiles: int, sync_s: float) -> Path:
    """A hand-made rank file: 6 steps, ``compiles`` uncached compiles, one sync of ``sync_s``."""
    p = folder / f"run.rank{rank}.json"
    w = RunWriter(p, {"name": "run", "started_unix": 0.0, "meta": {"rank": rank, "world_size": 2}})
    t = 0.0
    for i in range(6):
        compiled = i < compiles
        if compiled:
            w.write({"type": "compile", "i": i, "t": t + 0.09, "ns": 8e7, "at": "barrier"})
        rec = {"type": "step", "i": i, "t0": t, "tb": t + 0.005, "t1": t + 0.1, "barrier": "mark_step",
               "c": {"UncachedCompile" if compiled else "CachedCompile": 1, "ExecuteComputation": 1,
                     "MarkStep": 1}}
        rec["bu" if compiled else "bc"] = 1
        w.write(rec)
        t += 0.1
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/u/t.py", "line": 3, "func": "f",
             "via": None, "code": "x.item()"})
    w.write({"type": "sync", "i": 5, "site": 0, "t0": t, "t1": t + sync_s, "x": 1})
    w.write({"type": "end", "t": t + 1, "status": "ok", "steps": 6, "syncs": 1, "errors": 0})
    w.close()
    return p


def test_expand_run_paths(tmp_path: Path) -> None:
    for r in (1, 0, 10):
        _write_rank(tmp_path, r, 2, 0.01)
    (tmp_path / "notes.json").write_text("{}\n")
    got = expand_run_paths([str(tmp_path)])
    assert [os.path.basename(p) for p in got] == ["run.rank0.json", "run.rank1.json", "run.rank10.json"]
    single = tmp_path / "single"
    single.mkdir()
    (single / "other.json").write_text("[1]\n")
    w = RunWriter(single / "a.json", {"name": "a"})
    w.close()
    assert expand_run_paths([str(single)]) == [str(single / "a.json")]
    # several files, duplicates dropped, order kept
    files = [str(tmp_path / "run.rank1.json"), str(tmp_path / "run.rank0.json")]
    assert expand_run_paths([*files, files[0]]) == files
    with pytest.raises(ValueError, match="no such file"):
        expand_run_paths([str(tmp_path / "nope")])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no xprof run files"):
        expand_run_paths([str(empty)])


def test_table_and_stragglers_on_exact_runs(tmp_path: Path) -> None:
    from xprof.analysis.ranks import analyze_ranks
    from xprof.runfile import load_run

    _write_rank(tmp_path, 0, 2, 0.01)
    _write_rank(tmp_path, 1, 4, 0.01)
    _write_rank(tmp_path, 2, 2, 0.50)
    runs = [load_run(p) for p in expand_run_paths([str(tmp_path)])]
    table = rank_table(analyze_ranks(runs))
    assert list(table["rank"]) == [0, 1, 2]
    assert list(table["steps"]) == [6, 6, 6]
    assert list(table["compiles"]) == [2, 4, 2]
    assert list(table["recompiles"]) == [0, 2, 0]
    assert table["compile_s"].tolist() == pytest.approx([0.16, 0.32, 0.16])
    assert table["sync_wait_s"].tolist() == pytest.approx([0.01, 0.01, 0.5])
    notes = stragglers(table)
    assert [(n.rank, n.metric) for n in notes] == [(1, "recompiles"), (2, "sync_wait")]
    assert "rank 1 recompiled 2 times where the fewest was 0" in notes[0].message


def test_no_stragglers_when_alike() -> None:
    table = pd.DataFrame({"rank": [0, 1], "name": ["a", "b"], "steps": [5, 5], "compiles": [2, 2],
                          "recompiles": [0, 0], "compile_s": [1.0, 1.1], "syncs": [0, 0],
                          "sync_wait_s": [0.0, 0.01], "step_ms_median": [10.0, 11.0], "path": ["", ""]})
    assert stragglers(table) == []
    assert stragglers(table.iloc[:1]) == []


@pytest.mark.parametrize("digests", [False, True])
def test_ranks_command(tmp_path: Path, digests: bool) -> None:
    _write_rank(tmp_path, 0, 2, 0.01)
    _write_rank(tmp_path, 1, 3, 0.01)
    if digests:
        assert _cli().invoke(app, ["digest", str(tmp_path)]).exit_code == 0
    r = _cli().invoke(app, ["ranks", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert (data["schema"], data["version"]) == ("xprof-ranks", 1)
    assert [row["rank"] for row in data["ranks"]] == [0, 1]
    assert data["stragglers"][0]["rank"] == 1
    assert data["read_from"]["digests" if digests else "run_files"] == [0, 1]
    r = _cli().invoke(app, ["ranks", str(tmp_path)])
    assert r.exit_code == 0 and "rank 1 recompiled" in r.output
    proc = subprocess.run([sys.executable, "-m", "xprof", "ranks", str(tmp_path / "missing")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("xprof: error: ")


@pytest.mark.xla
@pytest.mark.slow
def test_real_xmp_spawn_two_ranks(tmp_path: Path) -> None:
    """xmp.spawn on PJRT_DEVICE=CPU CPU_NUM_DEVICES=2: one watch() per rank, run.rankN.json each.

    Launched with ``xprof run``: the launcher's own watch() must not start the torch_xla
    runtime, or xmp.spawn refuses to start the workers.
    """
    pytest.importorskip("torch_xla")
    env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "2"}
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", "-o", str(tmp_path / "launcher.json"),
                           str(SCRIPT), str(runs / "run.json")], env=env, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Each rank's watch() wrote its run file and, at its exit, the digest beside it.
    assert sorted(os.listdir(runs)) == ["run.rank0.json", "run.rank0.json.digest.parquet",
                                        "run.rank1.json", "run.rank1.json.digest.parquet"]
    from xprof.runfile import load_run as _load

    launcher = _load(tmp_path / "launcher.json")
    assert launcher.complete and launcher.steps == [] and launcher.meta["world_size"] is None
    r = _cli().invoke(app, ["ranks", str(runs), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    rows = data["ranks"]
    assert [row["rank"] for row in rows] == [0, 1]
    assert [row["steps"] for row in rows] == [5, 5]
    assert rows[1]["recompiles"] > rows[0]["recompiles"]
    assert any(s["rank"] == 1 and s["metric"] == "recompiles" for s in data["stragglers"])
    assert data["read_from"] == {"digests": [0, 1], "run_files": []} and data["notes"] == []
    for digest in runs.glob("*.parquet"):
        digest.unlink()
    again = json.loads(_cli().invoke(app, ["ranks", str(runs), "--json"]).output)
    assert again["read_from"] == {"digests": [], "run_files": [0, 1]}
    assert {**again, "read_from": None} == {**data, "read_from": None}  # the same view from the run files
    from xprof.runfile import load_run

    metas = [load_run(runs / f"run.rank{i}.json").meta for i in (0, 1)]
    assert [(m["rank"], m["world_size"]) for m in metas] == [(0, 2), (1, 2)]
