"""``xprof report``, ``xprof summary`` and ``xprof demo`` through typer's CliRunner and as
the real ``xprof`` executable in a subprocess.

Bad input must always be one ``xprof: error: ...`` line on stderr and exit code 2,
never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import xprof.cli.commands  # noqa: F401  (registers the commands)
from xprof.cli.app import EXIT_BAD_INPUT, app
from xprof.runfile import RunWriter

ROOT = Path(__file__).resolve().parent.parent
XPROF = ROOT / ".venv" / "bin" / "xprof"
PY = ROOT / ".venv" / "bin" / "python"


def tiny_run(path: Path, steps: int = 8, change_at: int = 4, name: str = "tiny") -> Path:
    """A complete run: one input, its length changes at ``change_at`` (a recompile)."""
    w = RunWriter(path, {"xprof_version": "0.1.0", "name": name,
                         "meta": {"argv": ["train.py"], "device": "CPU", "inputs": True}})
    t = 100.0
    for i in range(steps):
        length = 16 if i < change_at else 24
        sid = 0 if i < change_at else 1
        if i in (0, change_at):
            w.write({"type": "sig", "id": sid, "inputs": [
                {"name": "input_ids", "shape": [4, length], "dtype": "int64", "src": "batch"}]})
        compiled = i in (0, change_at)
        tb = t + 0.001
        if compiled:
            w.write({"type": "compile", "i": i, "t": tb + 0.1, "ns": 2e8, "at": "barrier"})
        t1 = tb + (0.2 if compiled else 0.0) + 0.001
        w.write({"type": "exec", "samples": [[t1 - 0.0001, 5e5]]})
        w.write({"type": "step", "i": i, "t0": t, "tb": tb, "t1": t1, "barrier": "sync", "sig": sid,
                 "c": {"UncachedCompile" if compiled else "CachedCompile": 1, "ExecuteComputation": 1,
                       "MarkStep": 1}, **({"bu": 1} if compiled else {"bc": 1})})
        t = t1
    w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": steps, "syncs": 0,
             "errors": 0})
    w.close()
    return path


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    return tiny_run(tmp_path / "tiny.json")


def invoke(args: list[str], cwd: Path | None = None) -> Any:
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(app, args, prog_name="xprof")
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, args, prog_name="xprof")
    finally:
        os.chdir(old)


def real(args: list[str], cwd: Path | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(XPROF), *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, **(env or {})})


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("xprof: error: "), stderr
    assert "Traceback" not in stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


# -- report ----------------------------------------------------------------------------


def test_report_writes_the_file_and_prints_its_path(run_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "r.html"
    res = invoke(["report", str(run_file), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    assert "This run trained 8 steps" in page and "input_ids" in page


def test_report_default_path_is_reports_run_name(run_file: Path, tmp_path: Path) -> None:
    res = invoke(["report", str(run_file)], cwd=tmp_path)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "reports" / "tiny.html").is_file()
    assert res.stdout.strip() == os.path.join("reports", "tiny.html")


def test_reports_of_two_runs_of_one_script_do_not_overwrite(tmp_path: Path) -> None:
    """Both runs are named after the script (train); each report is named after its file."""
    for stem in ("before", "after"):
        tiny_run(tmp_path / f"{stem}.json", name="train", change_at=4 if stem == "before" else 99)
        res = invoke(["report", f"{stem}.json"], cwd=tmp_path)
        assert res.exit_code == 0, res.output
        assert res.stdout.strip() == os.path.join("reports", f"{stem}.html")
    before = (tmp_path / "reports" / "before.html").read_text(encoding="utf-8")
    after = (tmp_path / "reports" / "after.html").read_text(encoding="utf-8")
    assert "recompile" in before and before != after
    assert not (tmp_path / "reports" / "train.html").exists()


def test_report_of_rank_files_is_named_after_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for rank in (0, 1):
        tiny_run(runs / f"bert.rank{rank}.json", name="train")
    assert invoke(["report", "runs"], cwd=tmp_path).stdout.strip() == os.path.join("reports", "runs.html")
    res = invoke(["report", "runs/bert.rank0.json", "runs/bert.rank1.json"], cwd=tmp_path)
    assert res.stdout.strip() == os.path.join("reports", "bert.html")


def test_open_without_a_browser_says_where_the_report_is(run_file: Path, tmp_path: Path) -> None:
    """BROWSER names a command that fails: webbrowser finds no browser that opened it."""
    res = real(["report", str(run_file), "-o", "r.html", "--open"], cwd=tmp_path, env={"BROWSER": "false"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "r.html"
    assert res.stderr.strip() == f"xprof: no browser to open here; the report is {tmp_path.resolve() / 'r.html'}"


def test_report_as_a_real_subprocess(run_file: Path, tmp_path: Path) -> None:
    res = real(["report", str(run_file)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == os.path.join("reports", "tiny.html")
    assert res.stderr == ""
    assert (tmp_path / "reports" / "tiny.html").stat().st_size > 1_000_000  # plotly.js inlined


def test_report_help_has_an_example() -> None:
    res = invoke(["report", "--help"])
    assert res.exit_code == 0 and "Example" in res.stdout and "--open" in res.stdout


# -- summary ---------------------------------------------------------------------------


def test_summary_prints_the_numbers_and_the_advice(run_file: Path) -> None:
    res = invoke(["summary", str(run_file)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "This run trained 8 steps" in out
    assert "Compiling took" in out and "not warm-up" in " ".join(out.split())
    assert "input_ids" in out and "fix:" in out


def test_summary_json_is_the_documented_object(run_file: Path) -> None:
    res = real(["summary", str(run_file), "--json"])
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["schema"] == "xprof-summary" and data["version"] == 1
    assert data["steps"] == 8 and data["compiles"] == 2 and data["recompiles"] == 1
    assert data["findings"] and data["findings"][0]["input"] == "input_ids"


def test_summary_json_matches_analysis_summary(run_file: Path) -> None:
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    res = invoke(["summary", str(run_file), "--json"])
    assert res.exit_code == 0
    expected = json.loads(json.dumps(analyze(load_run(run_file)).summary(), default=str))
    assert json.loads(res.stdout) == expected


# -- bad input -------------------------------------------------------------------------


BAD_FILES = {
    "missing": (None, "no such file"),
    "empty": ("", "empty file"),
    "garbage": ("\x00\x01 not json at all\n", "not an xprof run file"),
    "foreign": ('{"hello": "world"}\n{"type": "step", "i": 0}\n', "not an xprof run file"),
    "newer": ('{"format": "xprof-run", "version": 99, "xprof_version": "9.0"}\n', "newer"),
    "truncated_header": ('{"format": "xprof-run", "vers', "truncated"),
}


def _bad(tmp_path: Path, case: str) -> Path:
    content, _ = BAD_FILES[case]
    p = tmp_path / f"{case}.json"
    if content is not None:
        p.write_text(content, encoding="utf-8")
    return p


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_run_files_exit_2_with_one_line_real(case: str, tmp_path: Path) -> None:
    path = _bad(tmp_path, case)
    res = real(["report", str(path), "-o", str(tmp_path / "r.html")])
    assert res.returncode == EXIT_BAD_INPUT, (res.stdout, res.stderr)
    assert_one_line_error(res.stderr, BAD_FILES[case][1])
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("args", [["summary"], ["summary", "--json"]])
def test_bad_run_files_exit_2_with_one_line_summary(case: str, args: list[str], tmp_path: Path) -> None:
    path = _bad(tmp_path, case)
    res = invoke([args[0], str(path), *args[1:]])
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    assert_one_line_error(res.stderr, BAD_FILES[case][1])
    assert res.stdout == ""


def test_a_directory_is_not_a_run_file(tmp_path: Path) -> None:
    res = invoke(["summary", str(tmp_path)])
    assert res.exit_code == EXIT_BAD_INPUT
    assert_one_line_error(res.stderr, "directory")


def test_unwritable_output_exits_2(run_file: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x", encoding="utf-8")
    for target in (blocker / "r.html", blocker / "sub" / "r.html", tmp_path):
        res = real(["report", str(run_file), "-o", str(target)])
        assert res.returncode == EXIT_BAD_INPUT, (target, res.stderr)
        assert_one_line_error(res.stderr, "cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "tiny.json"]


def test_unwritable_demo_output_exits_2_before_training(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x", encoding="utf-8")
    res = invoke(["demo", "-o", str(blocker / "d.html")])
    if "needs torch_xla" in (res.stderr or ""):
        pytest.skip("torch_xla is not installed")
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    assert_one_line_error(res.stderr, "cannot write")


# -- demo ------------------------------------------------------------------------------


def test_demo_without_torch_xla_is_one_line_exit_2(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['torch_xla'] = None; import xprof.cli.commands; "
            "from xprof.cli.app import run_app; sys.exit(run_app(sys.argv[1:]))")
    res = subprocess.run([str(PY), "-c", code, "demo", "-o", str(tmp_path / "d.html")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == EXIT_BAD_INPUT, res.stderr
    assert_one_line_error(res.stderr, "needs torch_xla")


@pytest.mark.xla
def test_demo_trains_records_and_reports(xla: Any, tmp_path: Path) -> None:
    out = tmp_path / "r" / "demo.html"
    res = invoke(["demo", "-o", str(out), "--steps", "12"])
    assert res.exit_code == 0, res.output
    run_path = out.with_suffix(".json")
    assert f"run file: {run_path}" in res.stdout and f"report:   {out}" in res.stdout
    assert "loss tensor(" in res.stdout  # the demo's own print(loss)
    tail = res.stdout.strip().splitlines()[-3:]
    assert "compiling took" in tail[0] and "host read" in tail[1] and "Change this first" in tail[2]

    from xprof.analysis import analyze
    from xprof.runfile import load_run

    a = analyze(load_run(run_path))
    assert a.totals.steps == 12 and a.totals.recompiles >= 1 and a.totals.syncs >= 1
    causes = {f.cause for f in a.findings}
    assert "input_shape" in causes and "implicit_sync" in causes
    pad = next(f for f in a.findings if f.cause == "input_shape")
    assert pad.input in ("input_ids", "attention_mask", "labels")
    sync = next(f for f in a.findings if f.cause == "implicit_sync")
    assert sync.file and sync.file.endswith("demo.py"), sync.file
    assert sync.code and "print(" in sync.code and "loss" in sync.code
    page = out.read_text(encoding="utf-8")
    assert re.search(r"demo\.py:\d+", page) and "input_ids" in page


def test_summary_brief_is_the_exit_summary_of_watch_and_xprof_run(tmp_path: Path) -> None:
    """``watch()`` prints these lines (xprof.recorder.verdict runs this command in a child
    process); ``xprof run`` prints the same function's lines in its own process."""
    from xprof.analysis import analyze
    from xprof.report.prose import exit_lines
    from xprof.runfile import load_run

    sample = Path(__file__).resolve().parent.parent / "sample_runs" / "padded_longest.json"
    out = CliRunner().invoke(app, ["summary", "--brief", str(sample)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == exit_lines(analyze(load_run(sample)), str(sample))
    assert out.output.splitlines()[2].startswith("xprof: first thing to change: input_ids is padded per batch")
    two = CliRunner().invoke(app, ["summary", "--brief", str(sample), str(sample.with_name("clean_a.json"))])
    assert two.exit_code == EXIT_BAD_INPUT and "--brief takes one run file" in two.output


def test_the_exit_summary_of_watch_comes_from_the_child_and_says_why_when_it_cannot(tmp_path: Path) -> None:
    from xprof.recorder.verdict import exit_lines

    sample = tmp_path / "padded_longest.json"  # (a copy: the child writes the run file's digest beside it)
    shutil.copy(Path(__file__).resolve().parent.parent / "sample_runs" / "padded_longest.json", sample)
    lines = exit_lines(str(sample))
    assert len(lines) == 4 and lines[0].startswith("xprof: 24 steps (2 warm-up) in ")
    assert Path(str(sample) + ".digest.parquet").is_file()
    missing = exit_lines(str(tmp_path / "gone.json"))
    assert len(missing) == 1 and missing[0].startswith("xprof: no summary (") and "gone.json" in missing[0]
