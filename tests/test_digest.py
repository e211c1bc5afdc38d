"""Digests (docs/run-format.md, "Digests"): the pod view from digests is the pod view from run
files (a differential test on the sample pods: JSON, terminal text, the report's ranks
section, the numbers over the steps every rank reached); a digest that disagrees with its
run file, or is not one, is named and its rank read from the run file; a newer digest is
refused in one line; ``xprof digest`` and the exit of ``watch()`` write them.

The rank files are hand-made (tests/test_pod.py's ``write_rank``) or copies of the sample
runs. No torch.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from tests.test_pod import pod, write_rank
from xprof.cli import commands  # noqa: F401  (registers the commands)
from xprof.cli.app import EXIT_BAD_INPUT, app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


def cli(*args: str) -> Any:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in res.output, res.output
    return res


def _faulty(folder: Path) -> Path:
    pod(folder)
    (folder / "run.rank5.json").write_text("this is not a run file\n")
    (folder / "run.rank6.json").unlink()
    write_rank(folder, 3, 8, cut_at=7)
    write_rank(folder, 9, 16)
    write_rank(folder, 4, 8, recompile_at=(10, 12, 15))
    return folder


def _uneven(folder: Path) -> Path:
    """Ranks that reached different steps (none stopped): judged over steps 0-19."""
    folder.mkdir(parents=True)
    write_rank(folder, 0, 3, steps=20)
    write_rank(folder, 1, 3, steps=30, recompile_at=(10, 12, 15, 25))
    write_rank(folder, 2, 3, steps=25, recompile_at=(10, 15, 21))
    return folder


def _many(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for r in range(20):
        write_rank(folder, r, 20, recompile_at=(10, 12, 15) if r == 7 else (10, 15))
    return folder


def _samples(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(SAMPLES / "padded_fixed.json", folder / "run.rank0.json")
    shutil.copy(SAMPLES / "padded_longest.json", folder / "run.rank1.json")
    return folder


PODS = {"faulty": _faulty, "uneven": _uneven, "many": _many, "samples": _samples}


def _ranks_section(html: str) -> str:
    found = re.search(r'<section id="ranks">.*?</section>', html, re.S)
    assert found, "no ranks section"
    return found.group(0)


def _views(folder: Path, out: Path) -> dict[str, Any]:
    """Everything the pod view prints, each way (the report's ranks section of the HTML)."""
    report = cli("report", str(folder), "-o", str(out))
    assert report.exit_code == 0, report.output
    summary, ranks = cli("summary", str(folder)), cli("ranks", str(folder))
    assert summary.exit_code == 0 and ranks.exit_code == 0, summary.output + ranks.output
    return {"summary_json": json.loads(cli("summary", str(folder), "--json").stdout),
            "ranks_json": json.loads(cli("ranks", str(folder), "--json").stdout),
            "summary": summary.stdout, "ranks": ranks.stdout, "report": _ranks_section(out.read_text())}


def _without_sources(views: dict[str, Any]) -> dict[str, Any]:
    out = dict(views)
    for k in ("summary_json", "ranks_json"):
        out[k] = {**views[k], "read_from": None}
    for k in ("summary", "ranks"):
        out[k] = "".join(line for line in views[k].splitlines(True) if not line.startswith("read from digests: "))
    return out


@pytest.mark.parametrize("name", sorted(PODS))
def test_the_pod_view_from_digests_is_the_view_from_run_files(name: str, tmp_path: Path) -> None:
    folder = PODS[name](tmp_path / name)
    files = _views(folder, tmp_path / "files.html")
    assert files["ranks_json"]["read_from"]["digests"] == []
    made = cli("digest", str(folder))
    assert made.exit_code == (EXIT_BAD_INPUT if name == "faulty" else 0), made.output
    digests = _views(folder, tmp_path / "digests.html")
    assert digests["ranks_json"]["read_from"] == {"digests": files["ranks_json"]["read_from"]["run_files"],
                                                  "run_files": []}
    assert digests["ranks_json"]["notes"] == []
    assert "read from digests: " in digests["summary"]
    assert _without_sources(digests) == _without_sources(files)
    assert files["summary_json"]["stragglers"]  # (each pod has one: the differential covers its sentence)
    if name == "uneven":
        assert "in steps 0-19" in files["summary_json"]["stragglers"][0]["message"]


def test_numbers_over_the_common_steps_are_the_arrays_numbers(tmp_path: Path) -> None:
    """:func:`judged` over fewer steps: from a digest (SQL), the same numbers as from the arrays."""
    from xprof.analysis import analyze_path
    from xprof.analysis.digest import digest_file, read_digests
    from xprof.analysis.ranks import _windowed, rank_run

    folder = _uneven(tmp_path / "pod")
    paths = sorted(str(p) for p in folder.glob("*.json"))
    from_files = [rank_run(analyze_path(p), k) for k, p in enumerate(paths)]
    for p in paths:
        digest_file(p)
    got = read_digests(list(enumerate(paths)))
    assert not got.fallback and not got.notes
    from_digests = [got.ranks[k] for k in range(len(paths))]
    for upto in (0, 1, 3, 11, 13, 16, 20, 22, 25, 30, 31):
        assert _windowed(from_digests, upto) == _windowed(from_files, upto), upto
    assert [r.row for r in from_digests] == [r.row for r in from_files]
    assert [[f.to_json() for f in r.findings] for r in from_digests] == [[f.to_json() for f in r.findings]
                                                                          for r in from_files]


def _copy_digest(src: Path, dst: Path, replace: str) -> None:
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * REPLACE ({replace}) FROM read_parquet('{src}')) TO '{dst}' (FORMAT parquet)")
    con.close()


def test_a_digest_that_disagrees_or_is_not_one_is_named_and_its_run_file_read(tmp_path: Path) -> None:
    folder = pod(tmp_path / "runs", world=6)
    assert cli("digest", str(folder)).exit_code == 0
    digest = {r: Path(f"{folder}/run.rank{r}.json.digest.parquet") for r in range(6)}
    write_rank(folder, 1, 6, recompile_at=(10, 12, 15))  # recorded again: its digest is older
    digest[2].write_bytes(digest[2].read_bytes()[:300])  # cut off
    digest[3].write_text("garbage\n")
    duckdb.connect().execute(f"COPY (SELECT 1 AS a) TO '{digest[4]}' (FORMAT parquet)")  # foreign
    moved = tmp_path / "newer.parquet"
    shutil.move(digest[5], moved)
    _copy_digest(moved, digest[5], "CASE WHEN kind = 0 THEN 99 END AS version")
    doc = json.loads(cli("ranks", str(folder), "--json").stdout)
    assert doc["read_from"] == {"digests": [0], "run_files": [1, 2, 3, 4, 5]}
    notes = dict(zip(range(1, 6), doc["notes"]))
    assert "run.rank1.json.digest.parquet: made from other bytes than the run file has now" in notes[1]
    for r in (2, 3, 4):
        assert "not a" in notes[r] and f"run.rank{r}.json.digest.parquet" in notes[r], notes[r]
    assert "digest format version 99 (written by xprof " in notes[5] and "is newer than this xprof reads" in notes[5]
    assert all(n.endswith(f"; read run.rank{r}.json instead") for r, n in notes.items())
    assert [(s["rank"], s["metric"]) for s in doc["stragglers"]] == [(1, "recompiles")]  # the new bytes
    text = cli("ranks", str(folder)).stdout
    assert "digest not used: " in text and "read from digests: rank 0; from run files: ranks 1-5" in text


def test_xprof_digest_refuses_to_replace_a_newer_digest_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    shutil.copy(SAMPLES / "padded_fixed.json", run)
    assert cli("digest", str(run)).exit_code == 0
    digest = Path(f"{run}.digest.parquet")
    moved = tmp_path / "d.parquet"
    shutil.move(digest, moved)
    _copy_digest(moved, digest, "CASE WHEN kind = 0 THEN 2 END AS version")
    before = digest.read_bytes()
    res = cli("digest", str(run))
    assert res.exit_code == EXIT_BAD_INPUT
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("xprof: error: ")
    assert "digest format version 2" in res.stderr and "upgrade xprof" in res.stderr
    assert digest.read_bytes() == before


def test_xprof_digest_writes_many_names_the_bad_ones_and_keeps_fresh_ones(tmp_path: Path) -> None:
    folder = pod(tmp_path / "runs", world=4)
    (folder / "run.rank2.json").write_text("garbage\n")
    res = cli("digest", str(folder))
    assert res.exit_code == EXIT_BAD_INPUT
    assert res.stdout.split() == [f"{folder}/run.rank{r}.json.digest.parquet" for r in (0, 1, 3)]
    assert res.stderr.startswith("xprof: error: ") and "run.rank2.json: not an xprof run file" in res.stderr
    stamp = Path(res.stdout.split()[0]).stat().st_mtime_ns
    again = cli("digest", str(folder / "run.rank0.json"))
    assert again.exit_code == 0 and Path(again.stdout.strip()).stat().st_mtime_ns == stamp  # up to date: kept
    assert cli("digest", str(tmp_path / "nowhere")).exit_code == EXIT_BAD_INPUT


def test_the_exit_summary_child_writes_the_digest(tmp_path: Path) -> None:
    """watch() ends by running ``xprof summary --brief --digest`` (recorder/verdict.py): the lines
    as before, then the digest, which the pod view takes."""
    from xprof.analysis.digest import digest_state

    run = tmp_path / "run.json"
    shutil.copy(SAMPLES / "padded_longest.json", run)
    plain = cli("summary", "--brief", str(run))
    assert not Path(f"{run}.digest.parquet").exists()
    res = cli("summary", "--brief", "--digest", str(run))
    assert res.exit_code == 0 and res.stdout == plain.stdout
    assert digest_state(str(run))[0] == "fresh"
