"""A pod's rank files with faults: unreadable (garbage), missing, cut off (the host died),
extra (a world size that disagrees). summary, report, ranks and compare name them and
analyse the rest; the rank table groups alike ranks; stragglers are judged step for step.

The rank files are written by hand with exact numbers (RunWriter). No torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.pod_paths import digest_all, digesting, invoke, read_path  # noqa: F401  (read_path: both paths)
from xprof.cli import commands  # noqa: F401  (registers the commands)
from xprof.runfile import RunWriter

ROOT = Path(__file__).resolve().parent.parent


def write_rank(folder: Path, rank: int, world: int, steps: int = 20, recompile_at: Sequence[int] = (10, 15),
               name: str = "run", cut_at: int | None = None) -> Path:
    """A rank file of ``steps`` steps: two warm-up compiles, a recompile at each step of
    ``recompile_at`` (a new input shape), a host read every 5 steps. ``cut_at``: the file
    ends in the middle of that step's record (the host died)."""
    p = folder / f"{name}.rank{rank}.json"
    w = RunWriter(p, {"name": name, "started_unix": 0.0, "meta": {"rank": rank, "world_size": world}})
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/u/train.py", "line": 9, "func": "train",
             "via": None, "code": "loss.item()"})
    w.write({"type": "sig", "id": 0, "inputs": [{"name": "x", "shape": [8, 16], "dtype": "float32", "src": "batch"}]})
    t = 0.0
    sig = 0
    for i in range(steps):
        compiled = i < 2 or i in recompile_at
        if i in recompile_at:
            sig += 1
            w.write({"type": "sig", "id": sig, "inputs": [{"name": "x", "shape": [8, 16 + sig], "dtype": "float32",
                                                           "src": "batch"}]})
        if compiled:
            w.write({"type": "compile", "i": i, "t": t + 0.09, "ns": 8e7, "at": "barrier"})
        if i % 5 == 4:
            w.write({"type": "sync", "i": i, "site": 0, "t0": t + 0.001, "t1": t + 0.002, "x": 1})
        rec = {"type": "step", "i": i, "t0": t, "tb": t + 0.005, "t1": t + 0.1, "barrier": "mark_step", "sig": sig,
               "c": {"UncachedCompile" if compiled else "CachedCompile": 1, "ExecuteComputation": 1, "MarkStep": 1}}
        rec["bu" if compiled else "bc"] = 1
        if cut_at == i:
            w.close()
            with open(p, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec)[:30])  # the last line, cut off mid-write
            return p
        w.write(rec)
        t += 0.1
    w.write({"type": "end", "t": t + 1, "status": "ok", "steps": steps, "syncs": steps // 5, "errors": 0})
    w.close()
    return p


def pod(folder: Path, world: int = 8, **faults: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(world):
        write_rank(folder, r, world)
    return folder


def cli(*args: str) -> object:
    res = invoke(args, env={"COLUMNS": "200"})
    assert "Traceback" not in res.output, res.output
    return res


@pytest.fixture
def faulty(tmp_path: Path) -> Path:
    """8 ranks: rank 5 garbage, rank 6 without a file, rank 3 cut off at step 7 of 20, and a
    rank 9 file left over from a run of 16 ranks."""
    folder = pod(tmp_path / "runs")
    (folder / "run.rank5.json").write_text("this is not a run file\n")
    (folder / "run.rank6.json").unlink()
    write_rank(folder, 3, 8, cut_at=7)
    write_rank(folder, 9, 16)
    return folder


FAULTS = ("rank 5: unreadable", "rank 6 of 8 has no file", "rank 3 stopped at step 7 of 20, file incomplete",
          "rank 9:", "from a run of 16 ranks")


def test_summary_names_every_fault_and_analyses_the_rest(faulty: Path) -> None:
    res = cli("summary", str(faulty))
    assert res.exit_code == 0, res.output
    for text in FAULTS:
        assert text in res.output
    assert "No straggler" in res.output  # rank 3 compiled less only because it stopped
    assert "Ranks (6 of 8)" in res.output


def test_summary_json_lists_the_faults(faulty: Path) -> None:
    res = cli("summary", str(faulty), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "xprof-ranks-summary" and doc["world_size"] == 8
    kinds = {(f["kind"], tuple(f["ranks"])) for f in doc["faults"]}
    assert kinds == {("unreadable", (5,)), ("missing", (6,)), ("incomplete", (3,)), ("extra", (9,))}
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3, 4, 7]
    assert [r["status"] for r in doc["ranks"]].count("incomplete") == 1
    assert doc["stragglers"] == []
    assert len(doc["per_rank"]) == 6


def test_ranks_command_names_the_faults(faulty: Path) -> None:
    res = cli("ranks", str(faulty))
    assert res.exit_code == 0, res.output
    for text in FAULTS:
        assert text in res.output
    doc = json.loads(cli("ranks", str(faulty), "--json").stdout)
    assert {f["kind"] for f in doc["faults"]} == {"unreadable", "missing", "incomplete", "extra"}


def test_report_shows_the_faults(faulty: Path, tmp_path: Path) -> None:
    out = tmp_path / "pod.html"
    res = cli("report", str(faulty), "-o", str(out))
    assert res.exit_code == 0, res.output
    html = out.read_text()
    for text in FAULTS:
        assert text in html
    assert 'class="panel fault"' in html


def test_two_missing_ranks_are_named_together(tmp_path: Path) -> None:
    folder = pod(tmp_path / "runs")
    (folder / "run.rank5.json").unlink()
    (folder / "run.rank6.json").unlink()
    res = cli("summary", str(folder))
    assert res.exit_code == 0 and "ranks 5, 6 of 8 have no file" in res.output


def test_a_straggler_is_still_named_among_faults(faulty: Path) -> None:
    write_rank(faulty, 4, 8, recompile_at=(10, 12, 15))
    doc = json.loads(cli("ranks", str(faulty), "--json").stdout)
    assert [(s["rank"], s["metric"]) for s in doc["stragglers"]] == [(4, "recompiles")]
    assert doc["focus"] == 4


def test_stragglers_are_judged_on_the_steps_every_rank_reached(tmp_path: Path) -> None:
    # Rank 1 ran 30 steps and recompiled at step 25; rank 0 ran 20: not a straggler.
    folder = tmp_path / "runs"
    folder.mkdir()
    write_rank(folder, 0, 2, steps=20)
    write_rank(folder, 1, 2, steps=30, recompile_at=(10, 15, 25))
    doc = json.loads(cli("ranks", str(folder), "--json").stdout)
    assert doc["stragglers"] == []
    # ... but a recompile within the common steps is.
    write_rank(folder, 1, 2, steps=30, recompile_at=(10, 12, 15, 25))
    doc = json.loads(cli("ranks", str(folder), "--json").stdout)
    assert [(s["rank"], s["value"]) for s in doc["stragglers"]] == [(1, 3)]
    assert "in steps 0-19" in doc["stragglers"][0]["message"]


def test_every_file_unreadable_is_bad_input(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for r in (0, 1):
        (folder / f"run.rank{r}.json").write_text("garbage\n")
    res = cli("summary", str(folder))
    assert res.exit_code == 2
    assert "no rank file could be read" in res.output and "run.rank1.json" in res.output


def test_many_alike_ranks_are_one_row_and_outliers_are_listed(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for r in range(20):
        write_rank(folder, r, 20, recompile_at=(10, 12, 15) if r == 7 else (10, 15))
    res = cli("ranks", str(folder))
    assert res.exit_code == 0, res.output
    assert "19 ranks: 0-6, 8-19" in res.output
    assert "Other ranks, one by one" in res.output
    doc = json.loads(cli("ranks", str(folder), "--json").stdout)
    assert [(g["count"], g["recompiles"]) for g in doc["groups"]] == [(19, 2), (1, 3)]
    assert len(doc["ranks"]) == 20


def test_parallel_workers_read_the_same_pod(faulty: Path) -> None:
    from xprof.analysis.pod import load_pod

    files = sorted(str(p) for p in faulty.iterdir())
    if digesting():
        digest_all(files)
    alone, together = load_pod(files, workers=1).view(), load_pod(files, workers=2).view()
    assert alone.to_json() == together.to_json()
    assert alone.per_rank == together.per_rank


def _compare_folders(tmp_path: Path) -> tuple[Path, Path]:
    return pod(tmp_path / "base", world=4), pod(tmp_path / "new", world=4)


def test_compare_names_a_rank_missing_on_one_side_and_fails(tmp_path: Path) -> None:
    base, new = _compare_folders(tmp_path)
    assert cli("compare", str(base), str(new)).exit_code == 0
    (new / "run.rank2.json").unlink()
    res = cli("compare", str(base), str(new), "--max-new-recompiles", "0")
    assert res.exit_code == 1
    assert f"rank 2: no file in {new}" in res.output
    assert "xprof: regression: rank 2: no file" in res.stderr
    doc = json.loads(cli("compare", str(base), str(new), "--json").stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 3]
    assert doc["problems"] == [{"rank": 2, "kind": "missing", "side": "new",
                                "message": f"rank 2: no file in {new} (the base has {base / 'run.rank2.json'})",
                                "path": str(base / "run.rank2.json")}]
    md = cli("compare", str(base), str(new), "--markdown")
    assert md.exit_code == 1 and "### ranks not compared" in md.stdout


def test_compare_names_an_unreadable_rank_and_fails(tmp_path: Path) -> None:
    base, new = _compare_folders(tmp_path)
    (base / "run.rank1.json").write_text("garbage\n")
    res = cli("compare", str(base), str(new))
    assert res.exit_code == 1
    assert "rank 1:" in res.stderr and "not an xprof run file" in res.stderr
    doc = json.loads(cli("compare", str(base), str(new), "--json").stdout)
    assert [(p["rank"], p["kind"], p["side"]) for p in doc["problems"]] == [(1, "unreadable", "base")]


def test_progress_bar_only_on_stderr_and_never_with_json(tmp_path: Path) -> None:
    from xprof.cli.progress import wanted

    assert not wanted(machine_output=True)
    folder = pod(tmp_path / "runs", world=4)
    env = {**os.environ, "XPROF_PROGRESS": "1", "XPROF_PROGRESS_DELAY": "0", "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-m", "xprof", "ranks", str(folder)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "reading rank files" in shown.stderr or "comparing ranks" in shown.stderr
    assert "reading rank files" not in shown.stdout
    quiet = subprocess.run([sys.executable, "-m", "xprof", "ranks", str(folder), "--json"], capture_output=True,
                           text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == ""
    json.loads(quiet.stdout)


def test_progress_waits_before_it_draws() -> None:
    import io

    from rich.console import Console

    from xprof.cli.progress import Progress

    out = io.StringIO()
    with Progress(True, "reading", delay=30, console=Console(file=out, force_terminal=True)) as bar:
        bar.update(1, 2)
    assert out.getvalue() == "" and not bar.shown
    with Progress(False, "reading", delay=0, console=Console(file=out, force_terminal=True)) as bar:
        bar.update(1, 2)
    assert out.getvalue() == ""


def test_compare_with_a_cut_off_rank_compares_it_as_incomplete(tmp_path: Path) -> None:
    base, new = _compare_folders(tmp_path)
    write_rank(new, 2, 4, cut_at=7)
    res = cli("compare", str(base), str(new), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rank2 = next(r for r in doc["ranks"] if r["rank"] == 2)
    assert [run["status"] for run in rank2["runs"]] == ["ok", "incomplete"]
    assert doc["problems"] == []


def test_compare_names_a_rank_of_another_world_and_fails(tmp_path: Path) -> None:
    base, new = _compare_folders(tmp_path)
    write_rank(new, 9, 16)  # left over from a run of 16 ranks
    res = cli("compare", str(base), str(new))
    assert res.exit_code == 1
    assert f"rank 9: no file in {base}" in res.stderr
