"""The public-scripts referee (benchmarks/referee): its debug-output parser and truth on output
captured from torch_xla 2.9 (tests/fixtures/referee, recorded from ``probe.py`` there), and its
verdict rules on exact data. No torch needed."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.referee import debuglog, truth, verdict, xprof_side
from benchmarks.referee.manifest import Entry, load
from benchmarks.referee.prepare import PrepareError, apply_edits
from benchmarks.referee.table import Row, render

FX = Path(__file__).resolve().parent / "fixtures" / "referee"
PROBE_ROOT = Path("/tmp/r39/fx")
"""Where probe.py ran when the fixtures were recorded (its frames name this folder)."""


def probe_truth() -> truth.Truth:
    counters = json.loads((FX / "probe_counters.json").read_text())
    return truth.build(counters, (FX / "probe_debug.txt").read_text(), PROBE_ROOT)


def probe_said() -> xprof_side.Said:
    return xprof_side.from_summary(json.loads((FX / "probe_summary.json").read_text()))


def test_parser_finds_one_block_per_compile_and_execution():
    blocks = debuglog.parse((FX / "probe_debug.txt").read_text())
    counters = json.loads((FX / "probe_counters.json").read_text())["exit"]
    assert sum(b.kind == "compile" for b in blocks) == counters["UncachedCompile"] == 6
    assert sum(b.kind == "execute" for b in blocks) == counters["ExecuteComputation"] == 10
    first = blocks[0]
    assert first.is_read and first.graph_hash and first.inputs == 3
    assert (Path(first.frames[0].file).name, first.frames[0].line) == ("probe.py", 12)
    barrier = next(b for b in blocks if b.is_user_barrier)
    assert barrier.frames[0].func == "sync"
    assert ("probe.py", 13) in {(Path(f.file).name, f.line) for f in barrier.frames}


def test_parser_skips_lines_of_no_block_and_survives_a_cut_file():
    text = (FX / "probe_debug.txt").read_text()
    cut = text[: len(text) // 3]
    blocks = debuglog.parse("noise\n" + cut)
    assert 0 < len(blocks) < len(debuglog.parse(text))
    assert all(b.kind in ("compile", "execute") for b in blocks)


def test_truth_of_the_probe():
    t = probe_truth()
    assert (t.compiles, t.executions, t.barriers, t.scalar_reads) == (6, 10, 4, 5)
    assert t.fallbacks == {"aten::nonzero": 1}
    # warm-up ends at the second barrier that ran a graph (2 compiles then): 4 compiles after it
    assert t.late_compiles == 4
    sites = {str(s): n for s, n in t.reads.items()}
    assert sites == {"probe.py:12": 4, "probe.py:15": 2}


def test_late_compiles_counts_compiles_after_the_second_barrier_that_ran_a_graph():
    def b(kind: str, cause: str) -> debuglog.Block:
        return debuglog.Block(kind, cause)
    sync, read = "user torch_xla.sync", "most likely user code trying to access tensor value before torch_xla.sync"
    blocks = [b("compile", read), b("execute", read), b("compile", sync), b("execute", sync),
              b("compile", sync), b("execute", sync), b("compile", read), b("execute", read), b("execute", sync)]
    assert truth.late_compiles(blocks) == 1
    assert truth.late_compiles(blocks[:4]) is None
    assert truth.late_compiles([]) is None


def test_the_probe_is_judged_on_what_the_truth_can_tell():
    t, s = probe_truth(), probe_said()
    j = verdict.judge(t, s)
    assert [str(c) for c in j.claims] == ["read probe.py:12 x4", "recompiles x4"]
    assert (j.compiles_equal, j.executions_equal) == (True, True)
    assert j.verdict == "right*" and not j.missed and not j.unsupported


def site(line: int) -> truth.Site:
    return truth.Site("/s/train.py", line, True)


def make_truth(**kw) -> truth.Truth:
    base = dict(status="ok", error=None, compiles=2, executions=10, barriers=10, transfers=0, scalar_reads=0,
                fallbacks={}, late_compiles=0)
    base.update(kw)
    return truth.Truth(**base)


def finding(cause: str, lines=(), compiles=0, minor=False, id_="f", title="") -> xprof_side.Named:
    return xprof_side.Named(id_, cause, cause, title, compiles, minor, tuple(lines))


def test_a_clean_script_is_right_only_when_nothing_stands_out():
    t = make_truth()
    assert verdict.judge(t, xprof_side.Said(compiles=2, executions=10)).verdict == "right"
    minor = xprof_side.Said(compiles=2, executions=10, findings=[finding("implicit_sync", [("x.py", 3)], minor=True)])
    assert verdict.judge(t, minor).verdict == "right"
    shape = xprof_side.Said(compiles=2, executions=10, findings=[finding("input_shape", compiles=1)])
    j = verdict.judge(t, shape)
    assert j.verdict == "miss" and "no compile after warm-up" in j.unsupported[0]


def test_a_read_every_step_named_only_as_minor_is_a_miss():
    t = make_truth(reads=Counter({site(7): 10}), scalar_reads=10)
    folded = finding("implicit_sync", [("train.py", 7)], minor=True)
    said = xprof_side.Said(compiles=2, executions=20, findings=[folded])
    j = verdict.judge(t, said)
    assert j.verdict == "miss" and "minor" in j.missed[0]
    said.findings = [finding("library", [("train.py", 7)])]
    assert verdict.judge(t, said).verdict == "right"


def test_a_read_is_matched_at_its_line_or_inside_the_library_it_called_not_at_its_callers():
    frames = [debuglog.Frame("check", "/lib/transformer.py", 300), debuglog.Frame("fwd", "/s/train.py", 7),
              debuglog.Frame("main", "/s/train.py", 40)]
    t = make_truth(reads=Counter({site(7): 5}), stacks={site(7): frames})
    owner = xprof_side.Said(findings=[finding("library", [("transformer.py", 300)])])
    assert verdict.judge(t, owner).verdict == "right"
    j = verdict.judge(t, xprof_side.Said(findings=[finding("implicit_sync", [("train.py", 40)])]))
    assert j.verdict == "miss" and j.missed == ["read train.py:7 x5"]


def test_no_barrier_needs_its_finding_at_a_read_line():
    t = make_truth(barriers=0, reads=Counter({site(49): 3}))
    good = xprof_side.Said(findings=[finding("no_barrier", [("train.py", 49)])])
    assert verdict.judge(t, good).verdict == "right"
    elsewhere = xprof_side.Said(findings=[finding("no_barrier", [("train.py", 12)])])
    assert verdict.judge(t, elsewhere).verdict == "miss"
    reads_only = xprof_side.Said(findings=[finding("implicit_sync", [("train.py", 49)])])
    assert verdict.judge(t, reads_only).missed == ["no_barrier x10 (no no_barrier finding)"]
    wrong = verdict.judge(make_truth(), xprof_side.Said(findings=[finding("no_barrier")]))
    assert wrong.verdict == "miss" and "10 barriers ran" in wrong.unsupported[0]


def test_fallbacks_and_value_dependent_ops():
    t = make_truth(fallbacks={"aten::nonzero": 8})
    assert verdict.judge(t, xprof_side.Said(findings=[finding("data_dependent")])).verdict == "right"
    assert verdict.judge(t, xprof_side.Said()).verdict == "miss"
    h = make_truth(fallbacks={"aten::histc": 4})
    named = xprof_side.Said(findings=[finding("cpu_fallback", id_="fallback:aten::histc")])
    assert verdict.judge(h, named).verdict == "right"
    assert verdict.judge(h, xprof_side.Said(findings=[finding("data_dependent")])).verdict == "miss"
    assert verdict.judge(make_truth(), named).unsupported


def test_a_read_that_ran_nothing_is_unverifiable_not_a_miss():
    said = xprof_side.Said(findings=[finding("implicit_sync", [("train.py", 9)])])
    j = verdict.judge(make_truth(scalar_reads=10), said)
    assert j.verdict == "right" and "unverifiable" in j.notes[0]
    assert verdict.judge(make_truth(), said).verdict == "miss"


def test_failures_are_their_own_verdicts(tmp_path: Path):
    (tmp_path / "xprof.log").write_text("Traceback (most recent call last):\n  ...\nValueError: boom\n")
    said = xprof_side.load(tmp_path)
    j = verdict.judge(make_truth(), said)
    assert j.verdict == "xprof-failed" and j.notes == ["Traceback (most recent call last): / ... / ValueError: boom"]
    broken = make_truth(status="error", error="Traceback\nRuntimeError: no lowering\n")
    j = verdict.judge(broken, xprof_side.Said())
    assert j.verdict == "script-error" and j.notes == ["RuntimeError: no lowering"]
    assert verdict.judge(None, xprof_side.Said()).verdict == "no-truth"


def test_edits_must_match():
    assert apply_edits("a = 1\nb = 2\n", [["a = 1", "a = 3"]], "x") == "a = 3\nb = 2\n"
    with pytest.raises(PrepareError, match="does not match"):
        apply_edits("a = 1\n", [["c = 1", "c = 2"]], "x")


def test_the_manifest_is_valid_and_its_ids_unique(tmp_path: Path):
    entries = load(Path(__file__).resolve().parents[1] / "benchmarks" / "referee" / "manifest.json")
    assert len(entries) >= 30 and len({e.repo for e in entries}) >= 8  # issue 39: 30 scripts, 8 repositories
    assert all(len(e.commit) == 40 and e.changes and e.xla_port in ("author", "device-only") for e in entries)
    assert all(e.path in e.edits or e.xla_port == "author" for e in entries)
    dup = tmp_path / "m.json"
    dup.write_text(json.dumps([vars(entries[0]), vars(entries[0])]))
    with pytest.raises(ValueError, match="appears twice"):
        load(dup)


def test_the_table_has_a_row_per_script_and_the_tally():
    e = Entry("probe", "o/r", "0" * 40, "probe.py", "none")
    t, s = probe_truth(), probe_said()
    crashed = xprof_side.Said(failure="boom")
    rows = [Row(e, t, s, verdict.judge(t, s)), Row(e, None, crashed, verdict.judge(None, crashed))]
    text = render(rows)
    lines = text.splitlines()
    assert lines[2].startswith("| probe (`probe.py`) | o/r @ 0000000000 | 6 compiles (4 late), 10 exec, 4 barriers")
    assert "| =/= | right* |" in lines[2] and "| xprof-failed | boom |" in lines[3]
    assert "Whole verdict right on 1 of 1 judged scripts" in text


def test_a_run_past_its_time_limit_is_a_timeout_not_a_failure(tmp_path: Path):
    from benchmarks.referee.table import judge_all
    e = Entry("slow", "o/r", "0" * 40, "slow.py", "none")
    (rows,) = judge_all([e], tmp_path, tmp_path / "scripts")
    assert rows.judgement.verdict == "not-run"
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "status.json").write_text(json.dumps({"truth_rc": 124, "xprof_rc": 0, "truth_s": 281.5}))
    (rows,) = judge_all([e], tmp_path, tmp_path / "scripts")
    assert rows.judgement.verdict == "timeout"
    assert rows.judgement.notes == ["stopped at the time limit: truth run after 281.5 s"]
    (tmp_path / "slow" / "status.json").write_text(json.dumps({"truth_rc": 0, "xprof_rc": 0}))
    (rows,) = judge_all([e], tmp_path, tmp_path / "scripts")
    assert rows.judgement.verdict == "xprof-failed"
    # a script that catches KeyboardInterrupt (timm's train.py) ends "ok" after the stop: still a timeout
    (tmp_path / "slow" / "counters.json").write_text((FX / "probe_counters.json").read_text())
    (tmp_path / "slow" / "summary.json").write_text((FX / "probe_summary.json").read_text())
    folder = tmp_path / "slow"
    judged = verdict.judge(truth.load(folder, tmp_path / "scripts" / "slow"), xprof_side.load(folder)).verdict
    assert judged not in ("timeout", "script-error", "xprof-failed")
    assert judge_all([e], tmp_path, tmp_path / "scripts")[0].judgement.verdict == judged
    (tmp_path / "slow" / "status.json").write_text(json.dumps({"truth_rc": 124, "xprof_rc": 124}))
    assert judge_all([e], tmp_path, tmp_path / "scripts")[0].judgement.verdict == "timeout"
    # an error after the stop (word_language_model reloads a checkpoint the stop cut) is recorded
    # "interrupted": a timeout; an error before the stop is a script-error, even if it then hung
    counters = json.loads((FX / "probe_counters.json").read_text())
    after = {**counters, "status": "interrupted", "error": "KeyboardInterrupt; then ended error: E: x"}
    (tmp_path / "slow" / "counters.json").write_text(json.dumps(after))
    assert judge_all([e], tmp_path, tmp_path / "scripts")[0].judgement.verdict == "timeout"
    (tmp_path / "slow" / "counters.json").write_text(json.dumps({**counters, "status": "error", "error": "E: x\n"}))
    assert judge_all([e], tmp_path, tmp_path / "scripts")[0].judgement.verdict == "script-error"


def test_a_library_read_without_a_script_frame_is_matched_by_a_library_finding_unchecked():
    lib = truth.Site("/site-packages/transformers/masking_utils.py", 354, False)
    t = make_truth(reads=Counter({lib: 9}), stacks={lib: [debuglog.Frame("f", lib.file, 354)]})
    j = verdict.judge(t, xprof_side.Said(findings=[finding("library", [("train.py", 163)], minor=True)]))
    assert j.verdict == "right*" and "no frame of the script" in j.notes[0]
    assert verdict.judge(t, xprof_side.Said(findings=[finding("implicit_sync", [("train.py", 163)])])).verdict == "miss"


def test_a_signal_writes_the_counters_at_once_even_while_the_main_thread_cannot_handle_it(tmp_path: Path, xla):
    """The referee's SIGINT often lands inside a long compile; the truth run's signal thread writes
    the counters without waiting for the main thread (here: a SIGINT handler that does nothing)."""
    import signal
    import time

    import torch_xla.debug.metrics as met

    from benchmarks.referee.truth_run import Recorder
    out = tmp_path / "counters.json"
    previous = signal.signal(signal.SIGINT, lambda *a: None)
    try:
        Recorder(str(out), "s.py", ["--x"], met).on_signal()
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, previous)
    record = json.loads(out.read_text())
    assert record["status"] == "interrupted" and record["args"] == ["--x"]
    assert {"UncachedCompile", "MarkStep", "ExecuteComputation"} <= set(record["exit"])


def test_a_run_that_ignores_sigint_is_killed_after_its_grace(tmp_path: Path):
    from benchmarks.referee import run
    script = tmp_path / "stuck.py"
    script.write_text("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      "print('up', flush=True)\nwhile True:\n    time.sleep(0.1)\n")
    log = tmp_path / "out.log"
    rc, secs = run._call([sys.executable, str(script)], tmp_path, run._env({}), log, timeout_s=2, grace_s=1)
    text = log.read_text()
    assert rc == 124 and 3 <= secs < 20
    assert text.index("up") < text.index("time limit of 2 s") < text.index("killed 1 s after SIGINT")


def test_resummarize_judges_the_recorded_runs_by_the_xprof_given(tmp_path: Path, capsys):
    """``--judge-only --resummarize --xprof X`` rewrites summary.json from run.json with X, runs nothing."""
    from benchmarks.referee.__main__ import main
    e = {"id": "probe", "repo": "o/r", "commit": "0" * 40, "path": "probe.py", "changes": "none"}
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps([e]))
    folder = tmp_path / "work" / "probe"
    folder.mkdir(parents=True)
    (folder / "counters.json").write_text((FX / "probe_counters.json").read_text())
    debug = (FX / "probe_debug.txt").read_text()
    (folder / "debug.txt").write_text(debug.replace(str(PROBE_ROOT), str(tmp_path / "s" / "probe")))
    (folder / "status.json").write_text(json.dumps({"truth_rc": 0, "xprof_rc": 0}))
    (folder / "run.json").write_text("{}")
    (folder / "summary.json").write_text("not json")
    fake = tmp_path / "xprof"
    fake.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'summary --json' ] && [ \"$3\" = '{folder / 'run.json'}' ] "
                    f"&& exec cat '{FX / 'probe_summary.json'}'\nexit 3\n")
    fake.chmod(0o755)
    argv = [str(tmp_path / "s"), "--manifest", str(manifest), "--work", str(tmp_path / "work"), "--judge-only"]
    assert main(argv) == 0
    assert "| xprof-failed |" in capsys.readouterr().out
    assert main([*argv, "--resummarize", "--xprof", str(fake)]) == 0
    out = capsys.readouterr()
    assert "| =/= | right* |" in out.out and f"summary by {fake} (exit 0)" in out.err
    assert json.loads((folder / "summary.json").read_text())["schema"] == "xprof-summary"
    assert main([*argv, "--xprof", str(tmp_path / "none")]) == 2


def test_a_script_that_catches_the_stop_and_fails_after_it_is_recorded_interrupted(tmp_path: Path, xla, monkeypatch):
    """word_language_model catches KeyboardInterrupt and then fails on the checkpoint the stop cut:
    that error is not the script's own failure (a script-error), the record says interrupted."""
    import faulthandler
    import signal

    from benchmarks.referee import truth_run
    script = tmp_path / "catches.py"
    script.write_text("import os, signal, time\ntry:\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n"
                      "except KeyboardInterrupt:\n    time.sleep(0.5)\nraise ValueError('checkpoint cut')\n")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    out = tmp_path / "counters.json"
    try:
        assert truth_run.main([str(out), str(script)]) == 1
    finally:
        signal.set_wakeup_fd(-1)
        faulthandler.unregister(signal.SIGUSR1)
    record = json.loads(out.read_text())
    assert record["status"] == "interrupted"
    assert record["error"].endswith("then ended error: ValueError: checkpoint cut")
