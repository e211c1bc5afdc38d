"""xprof run: __main__ semantics, argv, exit codes, the run file in every case, debug capture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from xprof.cli.app import app
from xprof.recorder.debuginfo import debug_records, parse_debug_text
from xprof.runfile import load_run

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "scripts" / "tiny_loop.py"

# Real PT_XLA_DEBUG_LEVEL=2 output of torch_xla 2.9.0 (CPU), abridged to one compile and one
# execution of a barrier, and one of a host read; the first block is as it looks under watch().
# (torch_xla ends "Graph Info:" and the frames header with a blank, dropped here for ruff.)
DEBUG_29 = """
Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Compilation Analysis: Graph Info:
Compilation Analysis:   Graph Hash: bb669620370fd602265a4a904e08a82e
Compilation Analysis:   Number of Graph Inputs: 6
Compilation Analysis:   Number of Graph Outputs: 7
Compilation Analysis: Python Frame Triggered Execution:
Compilation Analysis:   _xla_step_marker (/work/main/xprof/recorder/hooks.py:109)
Compilation Analysis:   sync (/v/lib/python3.11/site-packages/torch_xla/torch_xla.py:87)
Compilation Analysis:   mark_step (/v/lib/python3.11/site-packages/torch_xla/core/xla_model.py:1032)
Compilation Analysis:   main (/home/u/train.py:46)
Compilation Analysis:   <module> (/home/u/train.py:56)
Compilation Analysis: --------------------------------------------------------------------------------
Compilation Analysis: ================================================================================

Computation hash: 180bee9045a347b8351bf809f74928f7

Post Compilation Analysis: ================================================================================
Post Compilation Analysis: Graph input size: 0.000001 GB
Post Compilation Analysis: Graph output size: 0.000002 GB
Post Compilation Analysis: Compiled program size: 0.000000 GB
Post Compilation Analysis: --------------------------------------------------------------------------------
Post Compilation Analysis: ================================================================================

Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
Execution Analysis:   user torch_xla.sync
Execution Analysis: Graph Info:
Execution Analysis:   Graph Hash: e36816fddb77f895ce712157353c21f5
Execution Analysis:   Number of Graph Inputs: 4
Execution Analysis:   Number of Graph Outputs: 7
Execution Analysis: Python Frame Triggered Execution:
Execution Analysis:   sync (/v/lib/python3.11/site-packages/torch_xla/torch_xla.py:87)
Execution Analysis:   <module> (/home/u/train.py:17)
Execution Analysis: --------------------------------------------------------------------------------
Execution Analysis: ================================================================================

Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
Execution Analysis:   user torch_xla.sync
Execution Analysis: Graph Info:
Execution Analysis:   Graph Hash: e36816fddb77f895ce712157353c21f5
Execution Analysis:   Number of Graph Inputs: 4
Execution Analysis:   Number of Graph Outputs: 7
Execution Analysis: Python Frame Triggered Execution:
Execution Analysis:   sync (/v/lib/python3.11/site-packages/torch_xla/torch_xla.py:87)
Execution Analysis:   <module> (/home/u/train.py:17)
Execution Analysis: --------------------------------------------------------------------------------
Execution Analysis: ================================================================================

Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Compilation Analysis: Graph Info:
Compilation Analysis:   Graph Hash: 502c5e741b85cf61a09fe29ab138fceb
Compilation Analysis:   Number of Graph Inputs: 3
Compilation Analysis:   Number of Graph Outputs: 1
Compilation Analysis: Python Frame Triggered Execution:
Compilation Analysis:   <module> (/home/u/train.py:16)
Compilation Analysis: --------------------------------------------------------------------------------
Compilation Analysis: ================================================================================
"""


def _cli() -> CliRunner:
    import xprof.cli.commands  # noqa: F401

    return CliRunner()


# -- the parser, on exact text ----------------------------------------------------------------

def test_parse_real_29_output() -> None:
    entries = parse_debug_text(DEBUG_29)
    assert [e.kind for e in entries] == ["compile", "execute", "execute", "compile"]
    c0 = entries[0]
    assert c0.graph_hash == "bb669620370fd602265a4a904e08a82e"
    assert (c0.inputs, c0.outputs) == (6, 7)
    assert c0.computation_hash == "180bee9045a347b8351bf809f74928f7"
    assert c0.post == {"graph_input_size_gb": 0.000001, "graph_output_size_gb": 0.000002,
                       "compiled_program_size_gb": 0.0}
    # torch_xla says "access tensor value" because watch()'s wrapper is the top frame.
    assert c0.through_barrier_hook and c0.cause_kind == "barrier"
    assert c0.user_frames() == [("main", "/home/u/train.py", 46), ("<module>", "/home/u/train.py", 56)]
    assert entries[1].cause == "user torch_xla.sync" and entries[1].cause_kind == "barrier"
    assert entries[3].cause_kind == "host_read" and entries[3].user_frames() == [
        ("<module>", "/home/u/train.py", 16)]
    recs = debug_records(entries)
    assert [(r["kind"], r.get("count")) for r in recs] == [("compile", None), ("execute", 2),
                                                           ("compile", None)]
    assert all(r["type"] == "debug" for r in recs)
    assert recs[0]["user_frames"] == [["main", "/home/u/train.py", 46], ["<module>", "/home/u/train.py", 56]]


def test_parse_is_loose() -> None:
    older = DEBUG_29.replace("torch_xla.sync", "mark_step").replace("Graph Hash", "graph hash")
    entries = parse_debug_text("noise line\n" + older + "\nCompilation Analysis: truncated")
    assert [e.kind for e in entries][:4] == ["compile", "execute", "execute", "compile"]
    assert entries[1].cause == "user mark_step" and entries[1].cause_kind == "barrier"
    assert entries[1].graph_hash == "e36816fddb77f895ce712157353c21f5"
    assert parse_debug_text("") == [] and parse_debug_text("garbage\n\x00\n") == []


# -- in process (torch_xla already imported: no debug capture) ---------------------------------

def _run_in_process(tmp_path: Path, *script_args: str, extra: tuple[str, ...] = ()) -> tuple[Any, Path]:
    out = tmp_path / "run.json"
    result = _cli().invoke(app, ["run", "-o", str(out), *extra, str(TINY), *script_args])
    return result, out


@pytest.mark.xla
def test_argv_path_and_main(device: Any, tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    saved_argv, saved_path0 = sys.argv[:], sys.path[0]
    result, out = _run_in_process(tmp_path, "--steps", "3", "--argv-to", str(argv_file),
                                  "-o", "mine", "--name", "x", "--no-debug", extra=("--no-debug",))
    assert result.exit_code == 0, result.output
    seen = json.loads(argv_file.read_text())
    assert seen["argv"] == [str(TINY), "--steps", "3", "--argv-to", str(argv_file), "-o", "mine",
                            "--name", "x", "--no-debug"]
    assert seen["path0"] == str(TINY.parent) and seen["name"] == "__main__"
    assert sys.argv == saved_argv and sys.path[0] == saved_path0
    run = load_run(out)
    assert run.complete and run.end is not None and run.end.status == "ok"
    assert run.name == "tiny_loop" and len(run.steps) == 3
    assert run.meta["argv"][0] == str(TINY)
    # --no-debug: none of torch_xla's debug analysis; the recorder's own description of the
    # optimizer stays
    assert [d.kind for d in run.debug] == ["optimizer"]


@pytest.mark.xla
@pytest.mark.parametrize(("args", "code", "status"), [
    (("--exit", "3"), 3, "error"),
    (("--exit", "0"), 0, "ok"),
    (("--raise",), 1, "error"),
    (("--interrupt",), 130, "interrupted"),
])
def test_exit_codes_and_status(device: Any, tmp_path: Path, args: tuple[str, ...], code: int,
                               status: str) -> None:
    result, out = _run_in_process(tmp_path, "--steps", "2", *args, extra=("--no-debug",))
    assert result.exit_code == code, result.output
    run = load_run(out)
    assert run.complete and run.end is not None and run.end.status == status
    assert len(run.steps) == 2
    if "--raise" in args:
        assert "ValueError: boom from the script" in (run.end.exception or "")


@pytest.mark.xla
def test_sigterm_closes_the_run_file(device: Any, tmp_path: Path) -> None:
    import signal

    from xprof.analysis import analyze

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("this test process handles SIGTERM itself")
    result, out = _run_in_process(tmp_path, "--steps", "3", "--sigterm", extra=("--no-debug",))
    assert result.exit_code == 143, result.output
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored
    run = load_run(out)
    assert run.complete and run.end is not None
    assert (run.end.status, run.end.exception) == ("interrupted", "SIGTERM")
    assert len(run.steps) == 3
    notes = analyze(run).notes
    assert any("stopped (SIGTERM)" in n for n in notes), notes


def test_missing_script_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", str(tmp_path / "nope.py")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == f"xprof: error: {tmp_path / 'nope.py'}: no such script\n"
    assert not (tmp_path / "run.json").exists()


# -- a real subprocess: debug capture, user traceback -------------------------------------------

@pytest.mark.xla
@pytest.mark.slow
def test_subprocess_debug_capture(tmp_path: Path) -> None:
    pytest.importorskip("torch_xla")
    out = tmp_path / "run.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    before = set(tmp.glob("xprof-xla-debug-*"))
    env = {**os.environ, "PJRT_DEVICE": "CPU", "TMPDIR": str(tmp)}
    env.pop("PT_XLA_DEBUG_LEVEL", None)
    env.pop("PT_XLA_DEBUG_FILE", None)
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", "-o", str(out), str(TINY),
                           "--steps", "5", "--grow-at", "3", "--raise"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    # The user's traceback starts at their script, not in xprof or runpy.
    tb = proc.stderr[proc.stderr.index("Traceback"):]
    assert tb.splitlines()[1].startswith(f'  File "{TINY}"')
    assert "runpy" not in tb and "xprof/runner.py" not in tb
    assert "ValueError: boom from the script" in tb
    run = load_run(out)
    assert run.complete and run.end is not None and run.end.status == "error"
    capture = [d for d in run.debug if d.kind == "capture"]
    assert len(capture) == 1 and capture[0].fields["level"] == "2"
    compiles = [d for d in run.debug if d.kind == "compile"]
    assert len(compiles) == len(run.compiles) == 2  # warm-up graph, then the larger batch
    mark_step_line = next(i for i, line in enumerate(TINY.read_text().splitlines(), 1)
                          if "xm.mark_step()" in line)
    for d in compiles:
        assert d.fields["cause_kind"] == "barrier" and d.fields["hooked"] is True
        # torch_xla's own words, as without xprof (not "most likely user code trying to
        # access tensor value", which it says when the innermost frame is not mark_step)
        assert d.fields["cause"] == "user torch_xla.sync"
        assert [str(TINY), mark_step_line] in [f[1:] for f in d.fields["user_frames"]]
        assert d.graph_hash and d.fields["inputs"] and d.fields["outputs"]
    execs = [d for d in run.debug if d.kind == "execute"]
    assert sum(d.fields["count"] for d in execs) == 5
    assert set(tmp.glob("xprof-xla-debug-*")) == before  # the temporary capture is removed


def test_debug_output_the_user_asked_for_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from xprof.recorder import runner

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(runner.tempfile, "tempdir", None)
    monkeypatch.delenv("PT_XLA_DEBUG_FILE", raising=False)
    monkeypatch.delenv("PT_XLA_DEBUG_LEVEL", raising=False)
    ours = runner._start_capture()
    assert ours is not None and ours.owned and not ours.asked  # xprof's own: deleted after the run
    monkeypatch.delenv("PT_XLA_DEBUG_FILE")
    monkeypatch.setenv("PT_XLA_DEBUG_LEVEL", "1")
    theirs = runner._start_capture()
    # PT_XLA_DEBUG_LEVEL=1 with no file prints to stderr without xprof: the file is kept
    # (its path printed at the end) and the level is the user's.
    assert theirs is not None and theirs.asked and not theirs.owned and theirs.level == "1"
    assert os.environ["PT_XLA_DEBUG_FILE"] == theirs.path and theirs.path.startswith(str(tmp_path))
