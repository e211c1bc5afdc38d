"""report, summary and compare on multi-rank runs: a folder of run.rankN.json files.

The rank files are copies of the real sample runs: rank 1 of the "new" folder pads per
batch, the other ranks do not, so rank 1 is the straggler.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.pod_paths import invoke, read_path  # noqa: F401  (read_path: both paths)
from xprof.cli import commands  # noqa: F401  (registers the commands)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    base, new = tmp_path / "base", tmp_path / "new"
    base.mkdir()
    new.mkdir()
    for rank in (0, 1):
        shutil.copy(SAMPLES / "padded_fixed.json", base / f"run.rank{rank}.json")
    shutil.copy(SAMPLES / "padded_fixed.json", new / "run.rank0.json")
    shutil.copy(SAMPLES / "padded_longest.json", new / "run.rank1.json")
    return base, new


def test_summary_of_a_rank_folder_names_the_straggler(folders: tuple[Path, Path]) -> None:
    res = invoke(["summary", str(folders[1])], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert "straggler: rank 1 recompiled 2 times" in res.output
    assert "[ranks 1 (not 0)]" in res.output  # the padding finding is rank 1's alone
    assert "Details below: rank 1." in res.output


def test_summary_json_of_ranks(folders: tuple[Path, Path]) -> None:
    res = invoke(["summary", str(folders[1] / "run.rank0.json"),
                                   str(folders[1] / "run.rank1.json"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["schema"] == "xprof-ranks-summary"
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [r["recompiles"] for r in doc["ranks"]] == [0, 2]
    assert doc["stragglers"][0]["rank"] == 1
    assert doc["findings"][0]["ranks"] == [1] and doc["findings"][0]["missing_on"] == [0]
    assert len(doc["per_rank"]) == 2


def test_report_of_a_rank_folder_has_a_ranks_section(folders: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "ranks.html"
    res = invoke(["report", str(folders[1]), "-o", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert '<section id="ranks">' in html
    assert "rank 1 recompiled 2 times" in html
    assert "The rest of this report is about rank 1 (the straggler)" in html


def test_compare_rank_folders_gates_per_rank(folders: tuple[Path, Path]) -> None:
    base, new = folders
    res = invoke(["compare", str(base), str(new), "--max-new-recompiles", "0"])
    assert res.exit_code == 1
    assert "regression: rank 1: --max-new-recompiles" in res.output
    assert "regression: rank 0" not in res.output
    same = invoke(["compare", str(base), str(base), "--max-new-recompiles", "0", "--json"])
    assert same.exit_code == 0, same.output
    doc = json.loads(same.output)
    assert (doc["schema"], doc["version"]) == ("xprof-compare-ranks", 1)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and all(r["schema"] == "xprof-compare" for r in doc["ranks"])


def test_compare_folders_with_a_rank_missing_is_a_regression(folders: tuple[Path, Path]) -> None:
    base, new = folders
    (new / "run.rank1.json").unlink()
    res = invoke(["compare", str(base), str(new)])
    assert res.exit_code == 1
    assert f"rank 1: no file in {new}" in res.output


def test_empty_folder_is_bad_input(tmp_path: Path) -> None:
    res = invoke(["summary", str(tmp_path)])
    assert res.exit_code == 2
    assert "no xprof run files in this folder" in res.output
    assert "Traceback" not in res.output
