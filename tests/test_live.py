"""Live notices and the exit summary.

Real torch_xla loops on the CPU: the notices appear once each, in order, with the right
cause; ``live=False``, ``XPROF_LIVE=0`` and ``xprof run --quiet`` silence them; a process
that is not rank 0 prints nothing. Then fast unit tests on exact records.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import xprof
from xprof.analysis import analyze
from xprof.diagnosis.notices import clean
from xprof.diagnosis.rules.reads import read_label
from xprof.recorder.live import LiveNotices
from xprof.runfile import load_run

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "scripts" / "tiny_loop.py"
HERE = Path(__file__).resolve()


def _loop(device: Any, lengths: list[int], hidden: int, read: bool = True) -> list[float]:
    """A tiny loop whose input length follows ``lengths`` and that reads the loss each step.

    ``hidden`` is new to this test process, so its graphs compile (torch_xla caches graphs
    in memory for the life of the process)."""
    import torch
    import torch_xla

    torch.manual_seed(0)
    model = torch.nn.Linear(1, hidden).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for n in lengths:
        x = torch.randn(4, n).to(device)
        loss = model(x.mean(dim=1, keepdim=True)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if read:
            losses.append(loss.item())  # the host read
        torch_xla.sync()
    return losses


def _line_of(marker: str) -> int:
    return next(i for i, text in enumerate(HERE.read_text().splitlines(), 1)
                if marker in text and "_line_of" not in text)


def _xprof_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("xprof:")]


@pytest.mark.xla
def test_notices_appear_once_in_order_with_their_cause(device: Any, tmp_path: Path,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "live.json"
    with xprof.watch(path):
        _loop(device, [5, 5, 5, 5, 9, 5, 9, 12, 5], hidden=29)
    lines = _xprof_lines(capfd.readouterr().err)
    notices = [line for line in lines if line.startswith("xprof: step ")]
    read_line = _line_of("# the host read")
    assert len(notices) == 2, lines
    # warm-up is steps 0-1; the read runs the device every step, so step 2 says so
    # (read inside _loop(): the call that ran it is named too)
    call_line = _line_of("_loop(device, [5, 5, 5, 5, 9, 5, 9, 12, 5], hidden=29)")
    assert notices[0] == (f"xprof: step 2: loss.item() at {os.path.relpath(HERE)}:{read_line} (called from "
                          f"{os.path.relpath(HERE)}:{call_line}) forces a host sync (every step so far)")
    # the first new length after warm-up, once: length 12 at step 7 is the same cause and input
    assert notices[1].startswith("xprof: step 4 recompiled: x took shape [4, 9] (first seen); ")
    assert "recompiles so far" in notices[1]
    summary = lines[len(notices):]
    assert len(summary) == 4, lines
    assert summary[0].startswith("xprof: 9 steps (2 warm-up) in ")
    assert "compiling took" in summary[1] and "% of the run" in summary[1]
    assert summary[2].startswith("xprof: first thing to change: ")
    assert summary[3] == f"xprof: open the report: xprof report {path} --open"
    # the summary's figures are the run file's
    run = load_run(path)
    compiles = len(run.compiles)
    assert f"; {compiles} compiles, " in summary[0]
    # and its first thing to change is the analysis' first finding: the same verdict
    from xprof.analysis import analyze

    top = analyze(run).findings[0]
    assert top.cause == "input_shape" and summary[2] == f"xprof: first thing to change: {top.title}"


@pytest.mark.xla
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_live_off_prints_nothing(device: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "environment":
        monkeypatch.setenv("XPROF_LIVE", "0")
        w = xprof.watch(tmp_path / "quiet.json")
    else:
        w = xprof.watch(tmp_path / "quiet.json", live=False)
    with w:
        _loop(device, [3, 3, 3, 6], hidden=31 if how == "argument" else 37)
    assert _xprof_lines(capfd.readouterr().err) == []
    assert w.notices is None
    run = load_run(tmp_path / "quiet.json")
    assert len(run.steps) == 4 and run.syncs  # recording is unchanged


@pytest.mark.xla
def test_ranks_other_than_0_print_nothing(device: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    watch_module = importlib.import_module("xprof.recorder.watch")
    monkeypatch.setattr(watch_module, "_process_identity", lambda: (1, 2, "CPU"))
    with xprof.watch(tmp_path / "run.json") as w:
        _loop(device, [3, 3, 3, 7], hidden=41)
    assert _xprof_lines(capfd.readouterr().err) == []
    assert w.path.endswith("run.rank1.json") and load_run(w.path).complete
    # asked for: every rank speaks
    monkeypatch.setenv("XPROF_LIVE", "all")
    with xprof.watch(tmp_path / "run2.json"):
        _loop(device, [3, 3, 3, 7], hidden=43)
    assert any(line.startswith("xprof: step 2: loss.item()") for line in _xprof_lines(capfd.readouterr().err))


@pytest.mark.xla
@pytest.mark.slow
def test_xprof_run_summary_and_quiet(tmp_path: Path) -> None:
    pytest.importorskip("torch_xla")
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    env.pop("XPROF_LIVE", None)
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "xprof", "run", "--no-debug", "-o", str(out)]
    loud = subprocess.run([*cmd, str(TINY), "--steps", "5", "--grow-at", "3"], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr[-2000:]
    lines = _xprof_lines(loud.stderr)
    assert lines[0].startswith("xprof: step 3 recompiled: x took shape [8, 8] (first seen); 1 recompile so far")
    assert lines[1].startswith("xprof: 5 steps (2 warm-up) in ")
    # The exit summary of `xprof run` is the analysis' own: the first finding of `xprof summary`.
    from xprof.analysis import analyze

    a = analyze(load_run(out))
    assert lines[1].startswith("xprof: 5 steps (2 warm-up) in ") and lines[1].endswith(
        f"; {a.totals.compiles} compiles, {a.totals.recompiles} after warm-up")
    assert lines[3] == f"xprof: first thing to change: {a.findings[0].title}"
    assert a.findings[0].input == "x"
    assert lines[4] == f"xprof: open the report: xprof report {out} --open"
    assert lines[5].startswith(f"xprof: wrote {out}")
    quiet = subprocess.run([*cmd, "--quiet", str(TINY), "--steps", "5", "--grow-at", "3"],
                           capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert [line for line in _xprof_lines(quiet.stderr) if not line.startswith("xprof: wrote")] == []
    assert len(load_run(out).compiles) == 2


# -- unit tests on exact records ------------------------------------------------------------

def test_clean_escapes_control_characters() -> None:
    # issue 14: run strings are shown with visible escapes, never acted on or dropped
    assert clean("loss\x1b[31m.item()\x07\n") == "loss\\x1b[31m.item()\\x07\\x0a"
    assert clean("a\u202eb") == "a\\u202eb"
    assert clean("x" * 200, limit=10) == "x" * 9 + "…"


def test_read_label() -> None:
    assert read_label("item", "losses.append(loss.item())") == "loss.item()"
    assert read_label("item", "total += out['loss'].item()") == "out['loss'].item()"
    assert read_label("to_cpu", "y = pred.to('cpu')") == "pred.to('cpu')"
    assert read_label("bool", "if (loss > 3).any():") == "a tensor used as a condition"
    assert read_label("item", "") == ".item()"


def _verdict(tmp_path: Path, recs: list[dict[str, Any]], t_end: float, **end: Any) -> list[str]:
    """The exit summary watch() prints for these records: the analysis' verdict on the file
    (xprof.recorder.verdict runs ``xprof summary --brief`` on it)."""
    from xprof.analysis import analyze
    from xprof.report.prose import exit_lines
    from xprof.runfile import RunWriter

    path = tmp_path / "r.json"
    writer = RunWriter(str(path), {"xprof_version": "0.1.0", "started_unix": 0.0, "meta": {}})
    writer.write_many(recs)
    writer.write({"type": "end", "t": t_end, "status": "ok", "exception": None, "steps": 0, "syncs": 0,
                  "errors": 0, **end})
    writer.close()
    return exit_lines(analyze(load_run(str(path))), "r.json")


def _steps(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Cached steps with the same input signature 0."""
    return [{"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
             "bc": 1, "sig": 0} for i in range(start, start + n)]


def test_shape_notice_from_exact_records(tmp_path: Path) -> None:
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    sig = [{"name": "input_ids", "shape": [8, 32], "dtype": "int64", "src": "batch"},
           {"name": "labels", "shape": [8], "dtype": "int64", "src": "batch"}]
    recs: list[dict[str, Any]] = [
        {"type": "sig", "id": 0, "inputs": sig},
        {"type": "compile", "i": 0, "t": 0.9, "ns": 2e9, "at": "barrier"},
        {"type": "step", "i": 0, "t0": 0, "tb": 0.5, "t1": 1.0, "barrier": "mark_step", "bu": 1, "sig": 0},
        *_steps(3, 1)]
    live.feed(recs)
    assert said == []  # warm-up and steady cached steps: nothing to say
    new = [dict(sig[0], shape=[8, 47]), sig[1]]
    for i, sid in ((4, 1), (5, 2)):
        more = [{"type": "sig", "id": sid, "inputs": new if sid == 1 else [dict(sig[0], shape=[8, 50]), sig[1]]},
                {"type": "compile", "i": i, "t": i + 0.9, "ns": 1.5e9, "at": "barrier"},
                {"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
                 "bu": 1, "sig": sid}]
        live.feed(more)
        recs += more
    assert said == ["xprof: step 4 recompiled: input_ids took shape [8, 47] (first seen); "
                    "1 recompile so far, 1.5 s"]
    assert _verdict(tmp_path, recs, 10.0) == [
        "xprof: 6 steps (2 warm-up) in 10.0 s; 0 compiles, 0 after warm-up",  # (no counters in these records)
        "xprof: compiling took 5.00 s, 50% of the run",
        "xprof: first thing to change: input_ids is padded per batch (3 distinct values of dim 1: 32, 47, 50): "
        "2 recompiles, 3.00 s",
        "xprof: open the report: xprof report r.json --open",
    ]
    # The same shapes, then 30 steps that compile nothing: settled, a one-off cost.
    recs += [{"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
              "bc": 1, "sig": (0, 1, 2)[i % 3]} for i in range(6, 36)]
    assert "all by step 5" in _verdict(tmp_path, recs, 40.0)[2]


def test_a_short_accumulation_window_is_said_as_such(tmp_path: Path) -> None:
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    ids = {"name": "input_ids", "shape": [4, 16], "dtype": "int64", "src": "batch"}
    full = [dict(ids, name=n) for n in ("input_ids", "input_ids#2", "input_ids#3", "input_ids#4")]
    recs: list[dict[str, Any]] = [{"type": "sig", "id": 0, "inputs": full},
                                  {"type": "sig", "id": 1, "inputs": full[:2]}]
    for i in range(9):
        short, new = i % 3 == 2, i in (0, 2)
        if new:
            recs.append({"type": "compile", "i": i, "t": i + 0.9, "ns": 1e9, "at": "barrier"})
        # the short window's graph is about half the size: smaller, but a training step's
        recs.append({"type": "graph_sizes", "samples": [[i + 0.9, 300 if short else 600]]})
        recs.append({"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
                     "o": 1, "bw": 1, "sig": 1 if short else 0, **({"bu": 1} if new else {"bc": 1})})
    live.feed(recs)
    assert said == ["xprof: step 2 recompiled: the step ran 2 micro-batches of input_ids where an earlier one "
                    "ran 4; 1 recompile so far, 1.0 s"]
    assert _verdict(tmp_path, recs, 10.0)[2] == (
        "xprof: first thing to change: Steps accumulating 2 micro-batches instead of 4 compiled graphs of their "
        "own: 1 recompile, 1.00 s")


def test_an_image_size_change_asks_for_a_fixed_size_not_padding(tmp_path: Path) -> None:
    live = LiveNotices(0.0, None)
    sizes = [24, 24, 24, 40, 40, 32, 32]
    sid = {24: 0, 40: 1, 32: 2}
    recs: list[dict[str, Any]] = [{"type": "sig", "id": k, "inputs": [
        {"name": "images", "shape": [4, 3, n, n], "dtype": "float32", "src": "batch"}]} for n, k in sid.items()]
    for i, n in enumerate(sizes):
        new = i == 0 or n != sizes[i - 1]
        if new:
            recs.append({"type": "compile", "i": i, "t": i + 0.9, "ns": 1e9, "at": "barrier"})
        recs.append({"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
                     "sig": sid[n], **({"bu": 1} if new else {"bc": 1})})
    live.feed(recs)
    assert _verdict(tmp_path, recs, 10.0)[2] == (
        "xprof: first thing to change: images changes size in dims 2, 3 (3 sizes: 24x24, 40x40, 32x32): "
        "2 recompiles, 2.00 s")


def _one_read_a_step(steps: int, code: str, ran: Callable[[int], bool]) -> list[dict[str, Any]]:
    """An ``.item()`` site at train.py:88 (``code``), read once in each of ``steps`` cached
    steps; ``ran(i)``: step i's read ran the device."""
    recs: list[dict[str, Any]] = [{"type": "site", "id": 0, "kind": "item", "file": "/x/train.py", "line": 88,
                                   "func": "main", "via": None, "code": code}]
    for i in range(steps):
        recs.append({"type": "sync", "i": i, "site": 0, "t0": i + 0.1, "t1": i + 0.2, **({"x": 1} if ran(i) else {})})
        recs.extend(_steps(1, i))
    return recs


def test_sync_notice_needs_a_read_that_ran_the_device() -> None:
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    # the value was already on the host in steps 0-2 (no execution inside the read)
    recs = _one_read_a_step(4, "print(f'{loss.item():.3f}\x1b[2J')", lambda i: i == 3)
    site = recs[0]
    live.feed(recs)
    assert said == ["xprof: step 3: loss.item() at train.py:88 forces a host sync (every step so far)"]
    # a deferred read (inside xm.add_step_closure) never counts
    live2: list[str] = []
    other = LiveNotices(0.0, live2.append)
    other.feed([site, *_steps(3), {"type": "sync", "i": 3, "site": 0, "t0": 3.1, "t1": 3.2, "x": 1, "deferred": True},
                *_steps(1, 3)])
    assert live2 == []


def test_reads_after_the_last_barrier_are_not_the_first_thing_to_change(tmp_path: Path) -> None:
    """The analysis counts a final print or evaluation after the last barrier in no finding;
    the exit summary does not rank it either (seen on pytorch/xla's SPMD linear-model test,
    whose last line is ``m(t).cpu()``)."""
    live = LiveNotices(0.0, None)
    sites = [{"type": "site", "id": k, "kind": "item", "file": "/x/train.py", "line": 10 + k, "func": "main",
              "via": None, "code": "loss.item()"} for k in (0, 1)]
    recs: list[dict[str, Any]] = list(sites)
    for i in range(6):
        recs.extend(_steps(1, i))
        if i in (2, 4):  # a read that runs the device, closed by the next barrier
            recs.append({"type": "sync", "i": i + 1, "site": 0, "t0": i + 1.1, "t1": i + 1.15, "x": 1})
    recs.append({"type": "sync", "i": 6, "site": 1, "t0": 6.1, "t1": 9.1, "x": 1, "u": 1})  # after the last one
    live.feed(recs)
    line = _verdict(tmp_path, recs, 10.0)[2]
    assert "train.py:10 " in line and "train.py:11" not in line, line


def test_a_steps_several_barriers_share_its_ordinal_as_in_the_analysis(tmp_path: Path) -> None:
    """The HF Trainer syncs at its loader before the first optimizer step, so step 0 has two
    graph barriers. The live notices number steps like the analysis (the optimizer step a
    barrier follows): step 0's shape is not a steady one, and its return at step 4 is the
    padding's recompile, not 'same input shapes, different graph' (seen on a BERT Trainer
    run with DataCollatorWithPadding)."""
    from xprof.analysis import analyze
    from xprof.runfile import RunWriter

    def inputs(length: int) -> list[dict[str, Any]]:
        return [{"name": "input_ids", "shape": [8, length], "dtype": "int64", "src": "batch"}]

    recs: list[dict[str, Any]] = [{"type": "sig", "id": sid, "inputs": inputs(n)}
                                  for sid, n in enumerate((28, 30, 26))]
    layout = [(None, False, None), (0, True, True), (1, True, True), (2, True, True), (2, True, False),
              (0, True, True)]  # (sig, optimizer step, compiled): barrier 0 is the loader's sync
    for i, (sig, opt, compiled) in enumerate(layout):
        step: dict[str, Any] = {"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0,
                                "barrier": "loader", "c": {"UncachedCompile" if compiled in (True, None) else
                                                           "CachedCompile": 1, "ExecuteComputation": 1}}
        if compiled in (True, None):
            recs.append({"type": "compile", "i": i, "t": i + 0.9, "ns": 1e9, "at": "barrier"})
            step["bu"] = 1
        else:
            step["bc"] = 1
        if opt:
            step.update(o=1, bw=1)
        if sig is not None:
            step["sig"] = sig
        recs.append(step)
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    live.feed(recs)
    assert said == ["xprof: step 2 recompiled: input_ids took shape [8, 26] (first seen): padded per batch (3 sizes "
                    "of dim 1 so far); 1 recompile so far, 1.0 s"]

    writer = RunWriter(str(tmp_path / "run.json"), {"xprof_version": "0.1.0", "meta": {}})
    writer.write_many(recs)
    writer.write({"type": "end", "t": 7.0, "status": "ok", "exception": None, "steps": len(layout), "syncs": 0,
                  "errors": 0})
    writer.close()
    a = analyze(load_run(str(tmp_path / "run.json")))
    assert a.compiles.loc[a.compiles["step"] == 5, "cause"].tolist() == ["input_shape"]  # the referee


def _eager_step(i: int, mg: int, **extra: Any) -> dict[str, Any]:
    return {"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
            "c": {"CachedCompile": mg}, "mg": mg, "o": 1, "bw": 1, **extra}


def test_eager_notice_from_exact_records(tmp_path: Path) -> None:
    """A steady training step whose graphs all ran between barriers is said once, judged when
    the next step starts; a compiled step is not one (nor do an eval barrier's eager ops make
    it one)."""
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    recs = [{"type": "compile", "i": 0, "t": 0.1, "ns": 1e6, "at": "op"}, _eager_step(0, 30), _eager_step(1, 30),
            # step 2 compiled at its barrier (torch_xla.compile), with an eval barrier run eagerly after it
            _eager_step(2, 2, bc=1), {**_eager_step(3, 12, ev=1), "o": 0, "bw": 0},
            _eager_step(4, 30)]  # starts step 3: step 2 is judged (compiled: nothing to say)
    live.feed(recs)
    assert said == []
    more = [_eager_step(5, 30), _eager_step(6, 30)]  # starts step 4: step 3 ran op by op
    live.feed(more)
    assert said == ["xprof: step 3 ran op by op (eager mode): 30 graphs dispatched one at a time; "
                    "compile the step with torch_xla.compile"]
    assert live.said[0][0] == "eager"
    assert _verdict(tmp_path, recs + more, 10.0)[2].startswith(
        "xprof: first thing to change: The training step runs op by op")


@pytest.mark.xla
def test_eager_last_step_after_the_last_barrier_counts_everywhere(device: Any, tmp_path: Path,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """Eager mode with the barrier at the start of each step (as MpDeviceLoader's next batch):
    the last step's ops run and no barrier follows. The end record, the analysis and the exit
    summary all count it."""
    import torch
    import torch_xla
    from torch_xla.experimental import eager_mode_context

    from xprof.analysis import analyze

    with eager_mode_context(True):
        torch.manual_seed(0)
        model = torch.nn.Linear(6, 43).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with xprof.watch(tmp_path / "tail.json", live=True) as w:
            for _ in range(5):
                torch_xla.sync()  # the step's barrier comes first, as a loader's does
                model(torch.randn(4, 6).to(device)).sum().backward()
                opt.step()
                opt.zero_grad()
    assert w.recorder is not None and w.recorder.tail_step
    run = load_run(tmp_path / "tail.json")
    assert run.end is not None and run.end.tail_opt == 1 and run.end.tail_graphs > 0
    assert analyze(run).totals.steps == 5
    assert any(line.startswith("xprof: 5 steps ") for line in _xprof_lines(capfd.readouterr().err))


def test_a_compile_between_a_library_calls_reads_is_the_calls_in_the_summary(tmp_path: Path) -> None:
    """As the analysis (causes._library_call_around): model.generate() at line 23 reads its stop
    condition twice in step 4; between the reads an op on the CPU cut a graph, compiled outside
    any read. The exit summary puts it on the call, not on the op (0.1 s of compile + 0.02 s of
    the reads' waits)."""
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    site = {"type": "site", "id": 0, "kind": "bool", "file": "/u/t.py", "line": 23, "func": "main",
            "via": "lib.Model.generate", "code": "out = model.generate(x)", "inner": "lib.StopCheck.__call__"}
    recs = [{"type": "compile", "i": 0, "t": 0.9, "ns": 1e9, "at": "barrier"},
            {"type": "step", "i": 0, "t0": 0, "tb": 0.5, "t1": 1.0, "barrier": "mark_step", "bu": 1}, *_steps(3, 1),
            site,
            {"type": "sync", "i": 4, "site": 0, "t0": 4.10, "t1": 4.11, "x": 1},
            {"type": "sync", "i": 4, "site": 0, "t0": 4.30, "t1": 4.31, "x": 1},
            {"type": "compile", "i": 4, "t": 4.25, "ns": 1e8, "at": "step"},
            {"type": "step", "i": 4, "t0": 4, "tb": 4.5, "t1": 5.0, "barrier": "mark_step", "bc": 1, "sig": 0,
             "c": {"aten::isin.Tensor_Tensor": 2, "UncachedCompile": 1}}]
    live.feed(recs)
    assert said == ["xprof: step 4: lib.Model.generate (called from t.py:23) reads values on the host (1 of 5 "
                    "steps so far)"]
    assert live.said[0][0] == "lib:lib.Model.generate@/u/t.py:23"
    line = _verdict(tmp_path, recs, 10.0)[2]
    assert line.startswith("xprof: first thing to change: lib.Model.generate (called from t.py:23)"), line


@pytest.mark.parametrize("loop_line, first", [
    (20, "lib.Model.generate (called from t.py:23) forces a host sync"),
    (23, ".item() at t.py:30 forces a host sync"),
])
def test_a_library_calls_reads_are_one_cost_unless_the_loop_runs_inside_it(loop_line: int, first: str,
                                                                          tmp_path: Path) -> None:
    """The analysis' grouping (test_steps_and_mechanisms): by call, or by inner function inside trainer.train()."""
    live = LiveNotices(0.0, lambda line: None)
    recs: list[dict[str, Any]] = [{"type": "site", "id": 9, "kind": "barrier", "file": "/u/t.py", "line": loop_line,
                                   "func": "main", "via": None, "code": "xm.mark_step()"}]
    for k, inner in ((0, "lib.StopCheck.__call__"), (1, "lib.Model._prepare_special_tokens")):
        recs.append({"type": "site", "id": k, "kind": "bool", "file": "/u/t.py", "line": 23, "func": "main",
                     "via": "lib.Model.generate", "code": "out = model.generate(x)", "inner": inner})
    for i in range(8):
        # the stop check waits 30 ms a step, the special tokens 20 ms: apart, neither beats the
        # item()'s 40 ms; together (one call) they do
        recs += [{"type": "sync", "i": i, "site": 0, "t0": i + 0.1, "t1": i + 0.13, "x": 1},
                 {"type": "sync", "i": i, "site": 1, "t0": i + 0.2, "t1": i + 0.22, "x": 1},
                 {"type": "sync", "i": i, "site": 2, "t0": i + 0.3, "t1": i + 0.34, "x": 1}]
        recs += _steps(1, i)
    recs = [{"type": "site", "id": 2, "kind": "item", "file": "/u/t.py", "line": 30, "func": "main", "via": None,
             "code": "print(loss.item())"}, *recs]
    live.feed(recs)
    assert _verdict(tmp_path, recs, 10.0)[2].startswith(f"xprof: first thing to change: {first}")
    ids = {f.id for f in analyze(load_run(str(tmp_path / "r.json"))).findings}
    assert {key for key, _ in live.said} <= ids


def test_torch_compiles_own_syncs_in_the_first_steps_are_warm_up(tmp_path: Path) -> None:
    """As the analysis (test_steps_and_mechanisms): a graph compiled at torch.compile's own sync while
    it traces the first step is warm-up, not a recompile."""
    live = LiveNotices(0.0, None)
    recs = [{"type": "compile", "i": 0, "t": 0.3, "ns": 5e7, "at": "step"},
            {"type": "step", "i": 0, "t0": 0, "tb": 0.5, "t1": 0.6, "barrier": "dynamo", "bu": 1, "ng": 1,
             "c": {"UncachedCompile": 1}},
            {"type": "compile", "i": 1, "t": 1.9, "ns": 1e9, "at": "barrier"},
            {"type": "step", "i": 1, "t0": 1, "tb": 1.5, "t1": 2.0, "barrier": "mark_step", "bu": 1, "o": 1,
             "c": {"UncachedCompile": 1}},
            *[dict(s, o=1) for s in _steps(3, 2)]]
    live.feed(recs)
    assert live._recompiles == 0
    assert _verdict(tmp_path, recs, 10.0)[0] == "xprof: 4 steps (2 warm-up) in 10.0 s; 2 compiles, 0 after warm-up"


def test_a_read_after_the_last_barrier_says_nothing() -> None:
    """print(metric.compute()) after the loop: in no step (the analysis counts it in no
    finding), so no notice; the same read inside a step is one when its barrier comes."""
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    site = {"type": "site", "id": 0, "kind": "format", "file": "/x/train.py", "line": 30, "func": "main",
            "via": None, "code": "print(acc.compute())"}
    live.feed([site, *_steps(4), {"type": "sync", "i": 4, "site": 0, "t0": 4.1, "t1": 4.2, "x": 1, "u": 1}])
    live.close()
    assert said == []
    live.feed([*_steps(1, 4)])  # had a barrier come after it, the read was step 4's
    assert said == ["xprof: step 4: formatting a tensor at train.py:30 forces a host sync and a compile "
                    "(1 of 5 steps so far)"]


def test_a_barrier_recompile_after_a_library_calls_first_run_is_the_calls(tmp_path: Path) -> None:
    """As the analysis (test_steps_and_mechanisms): generate() at line 23 runs for the first time in
    step 4 with torch.isin on the CPU, and the step's barrier compiles a new graph. Whether the
    op is the call's needs the whole run: live, the read is said, and the compile is not said
    as the op's."""
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    sites = [{"type": "site", "id": 9, "kind": "barrier", "file": "/u/t.py", "line": 20, "func": "main",
              "via": None, "code": "xm.mark_step()"},
             {"type": "site", "id": 0, "kind": "bool", "file": "/u/t.py", "line": 23, "func": "main",
              "via": "lib.Model.generate", "code": "out = model.generate(x)", "inner": "lib.StopCheck.__call__"}]
    recs = [*sites, *_steps(4),
            {"type": "sync", "i": 4, "site": 0, "t0": 4.1, "t1": 4.11, "x": 1},
            {"type": "compile", "i": 4, "t": 4.9, "ns": 1e9, "at": "barrier"},
            {"type": "step", "i": 4, "t0": 4, "tb": 4.5, "t1": 5.0, "barrier": "mark_step", "bu": 1, "sig": 0,
             "c": {"aten::isin.Tensor_Tensor": 9, "UncachedCompile": 1}}, *_steps(2, 5),
            {"type": "sync", "i": 7, "site": 0, "t0": 7.1, "t1": 7.11, "x": 1},  # the next call, cached
            {"type": "step", "i": 7, "t0": 7, "tb": 7.5, "t1": 8.0, "barrier": "mark_step", "bc": 1, "sig": 0,
             "c": {"aten::isin.Tensor_Tensor": 9}}]
    live.feed(recs)
    assert said[0] == ("xprof: step 4: lib.Model.generate (called from t.py:23) reads values on the host "
                       "(1 of 5 steps so far)")
    assert not any("recompiled" in line for line in said)
    assert _verdict(tmp_path, recs, 9.0)[2].startswith(
        "xprof: first thing to change: lib.Model.generate (called from t.py:23)")
    assert {key for key, _ in live.said} <= {f.id for f in analyze(load_run(str(tmp_path / "r.json"))).findings}


def test_a_loop_that_never_reaches_a_barrier_is_said_at_once() -> None:
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    live.feed([{"type": "debug", "kind": "no_barrier", "i": 0, "t": 0.5, "opt": 3}])
    assert said == ["xprof: 3 optimizer steps and no step barrier yet: the pending graph grows with every step "
                    "until a value is read; end each step with torch_xla.sync() (or iterate an MpDeviceLoader)"]
    assert live.said[0][0] == "no_barrier"  # (the exit summary's, from the analysis: test_analysis_unit)


def test_steps_left_pending_after_the_last_barrier_never_ran(tmp_path: Path) -> None:
    sig = [{"name": "x", "shape": [16, 32], "dtype": "float32", "src": "to"}]
    steps = [{"type": "sig", "id": 0, "inputs": sig}, *[dict(s, o=1) for s in _steps(10)]]
    # A sync every 4 optimizer steps, the last 3 after the last barrier: nothing read or compiled them.
    assert "never ran" in _verdict(tmp_path, steps, 12.0, tail_opt=3)[2]
    # A read after the loop ran them (a final loss.item()): nothing to say about them.
    read = [*steps, {"type": "site", "id": 0, "kind": "item", "file": "/x/train.py", "line": 30,
                     "func": "main", "via": None, "code": "print(loss.item())"},
            {"type": "sync", "i": 10, "site": 0, "t0": 10.1, "t1": 10.2, "x": 1}]
    assert "never ran" not in _verdict(tmp_path, read, 12.0, tail_opt=3)[2]


def test_a_read_every_step_is_counted_not_stored() -> None:
    """A read at the same site every step: the notice's 'every step so far' comes from a count
    per site (a set of steps, scanned at every read, made such a run quadratic: 286 µs a step
    at 20k steps, replayed)."""
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    live.feed(_one_read_a_step(300, "losses.append(loss.item())", lambda i: True))
    assert live._sites._steps == {0: (0, 299, 300)}
    assert said == ["xprof: step 2: loss.item() at train.py:88 forces a host sync (every step so far)"]


def test_a_mask_read_seen_since_its_hook_was_armed_is_every_step_so_far() -> None:
    # The mask hooks arm once aten::nonzero first runs (step 0 here): step 0's mask read went
    # unseen, steps 1 and 2 were seen; "every step so far" counts from the hook.
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    recs: list[dict[str, Any]] = [
        {"type": "debug", "kind": "hook", "i": 0, "t": 0.5, "hook": "mask_index", "counter": "aten::nonzero"},
        *_steps(1),
        {"type": "site", "id": 3, "kind": "mask_index", "file": "/x/det.py", "line": 12, "func": "main",
         "via": None, "code": "loss = ce(out[pos], y[pos])"}]
    for i in (1, 2):
        recs.append({"type": "sync", "i": i, "site": 3, "t0": i + 0.1, "t1": i + 0.2, "x": 1})
        recs.extend(_steps(1, i))
    live.feed(recs)
    assert said == ["xprof: step 2: boolean-mask indexing at det.py:12 has a value-dependent shape; it runs on "
                    "the CPU and runs the graph early (every step so far)"]


def test_a_read_after_the_barrier_is_every_step_since_its_first() -> None:
    # `if loss < eps: break` after torch_xla.sync(): the read lands in the next step, so step 0
    # has none; it is every step since step 1, not "2 of 3 steps so far".
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    recs = _one_read_a_step(4, "print(loss.item())", lambda i: True)
    live.feed([r for r in recs if not (r["type"] == "sync" and r["i"] == 0)])
    assert said == ["xprof: step 2: loss.item() at train.py:88 forces a host sync (every step since step 1)"]


def test_an_inference_loop_whose_state_grows_gets_its_notice(tmp_path: Path) -> None:
    # Decoding under torch.no_grad() with a KV cache grown by torch.cat: grad off at every
    # barrier (no optimizer step in the run: these are its steps, not an eval pass), nothing
    # from the host after the prompt, the same 208-node graph compiled at every step.
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    live.feed([{"type": "sig", "id": 0, "inputs": [{"name": "prompt", "shape": [1, 6], "dtype": "int64",
                                                    "src": "to"}]}])
    for i in range(6):
        step: dict[str, Any] = {"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0,
                                "barrier": "sync", "bu": 1, "ng": True}
        if i == 0:
            step["sig"] = 0
        live.feed([{"type": "compile", "i": i, "t": i + 0.9, "ns": 1e9, "at": "barrier"},
                   {"type": "graph_sizes", "samples": [[i + 0.6, 300.0 if i == 0 else 208.0]]}, step])
    assert said == ["xprof: step 2 recompiled: nothing new came from the host, yet the graph is new: a tensor "
                    "kept on the device changed shape (a cache grown with torch.cat?), the step used other "
                    "tensors, or a Python number changed; 1 recompile so far, 1.0 s"]


def test_another_pass_inside_a_training_step_is_noticed_as_such() -> None:
    # An evaluation with no barrier of its own: its batches join the next training step's
    # inputs and its ops the graph (112 nodes against 84), as the analysis' pass_joined.
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    x = {"name": "x", "shape": [16, 8], "dtype": "float32", "src": "to"}
    vx = {"name": "vx", "shape": [32, 8], "dtype": "float32", "src": "to"}
    recs: list[dict[str, Any]] = [{"type": "sig", "id": 0, "inputs": [x]}, {"type": "sig", "id": 1, "inputs": [x, vx]}]
    for i in range(9):
        joined, new = i == 6, i in (0, 1, 6)
        if new:
            recs.append({"type": "compile", "i": i, "t": i + 0.9, "ns": 1e9, "at": "barrier"})
        recs.append({"type": "graph_sizes", "samples": [[i + 0.9, 112 if joined else 84]]})
        recs.append({"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
                     "o": 1, "bw": 1, "sig": 1 if joined else 0, **({"bu": 1} if new else {"bc": 1})})
    live.feed(recs)
    assert said == ["xprof: step 6 recompiled: another pass's ops and inputs (vx), with no barrier of their own, "
                    "ran in this training step's graph; 1 recompile so far, 1.0 s"]


def test_a_ready_read_is_not_what_changed_the_graph(tmp_path: Path) -> None:
    # An epoch's running sum read after its last barrier (ready: it ran nothing), then reset
    # with torch.zeros(device=...): step 10's new graph is a graph change, as in the analysis,
    # not the read's (which had said nothing, and the exit summary "nothing stands out").
    def notices(ran: bool) -> list[str]:
        said: list[str] = []
        live = LiveNotices(0.0, said.append)
        recs: list[dict[str, Any]] = [{"type": "site", "id": 0, "kind": "item", "file": "/x/train.py", "line": 20,
                                       "func": "main", "via": None, "code": "print(running.item())"}]
        for i in range(14):
            new = i in (0, 1, 10)
            if i == 10:
                ran_x = {"x": 1} if ran else {}
                recs.append({"type": "sync", "i": i, "site": 0, "t0": i + 0.1, "t1": i + 0.2, **ran_x})
            if new:
                recs.append({"type": "compile", "i": i, "t": i + 0.9, "ns": 1e9, "at": "barrier"})
            recs.append({"type": "graph_sizes", "samples": [[i + 0.9, 63 if i == 10 else 65]]})
            recs.append({"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
                         "o": 1, "bw": 1, "sig": 0, **({"bu": 1} if new else {"bc": 1})})
        live.feed(recs)
        live.close()
        return said + _verdict(tmp_path, recs, 14.0)[2:3]

    said = notices(False)
    assert said[0] == "xprof: step 10 recompiled: same input shapes, different graph; 1 recompile so far, 1.0 s"
    assert said[1].startswith("xprof: first thing to change: The graph changed with the same input shapes")
    assert notices(True)[0] == "xprof: step 10: running.item() at train.py:20 forces a host sync (1 of 11 steps so far)"


def test_a_step_graph_that_grows_is_said_at_its_third_growth(tmp_path: Path) -> None:
    # losses.append(loss) every step, torch.stack(losses).mean().item() every 10: the steps
    # with the read compile graphs of 50, 60, 70 nodes (39 a training step), as the
    # analysis' graph_grows; the exit summary's first thing agrees.
    said: list[str] = []
    live = LiveNotices(0.0, said.append)
    x = {"name": "x", "shape": [16, 32], "dtype": "float32", "src": "to"}
    recs: list[dict[str, Any]] = [{"type": "sig", "id": 0, "inputs": [x]},
                                  {"type": "site", "id": 0, "kind": "item", "file": "/x/train.py", "line": 16,
                                   "func": "main", "via": None, "code": "print(torch.stack(losses).mean().item())"}]
    for i in range(30):
        grown = (i + 1) % 10 == 0
        new = i in (0, 1) or grown
        if grown:
            recs.append({"type": "sync", "i": i, "site": 0, "t0": i + 0.1, "t1": i + 0.2, "x": 1})
        if new:
            recs.append({"type": "compile", "i": i, "t": i + 0.9, "ns": 3e8, "at": "barrier"})
        recs.append({"type": "graph_sizes", "samples": [[i + 0.9, 40 + i if grown else 39]]})
        recs.append({"type": "step", "i": i, "t0": i, "tb": i + 0.5, "t1": i + 1.0, "barrier": "mark_step",
                     "o": 1, "bw": 1, "sig": 0, **({"bu": 1} if new else {"bc": 1})})
    live.feed(recs)
    assert said[-1] == ("xprof: step 29 recompiled: same input shapes, a graph larger each time it changed "
                        "(49, 59, 69 nodes): something kept across steps grows in it (a list of device tensors "
                        "stacked at a read?); 3 recompiles so far, 0.90 s")
    assert live.said[-1][0] == "grows" and not any("different graph" in line for line in said)
    first = _verdict(tmp_path, recs, 30.0)[2]
    assert first.startswith("xprof: first thing to change: The step graph grows: 3 new graphs"), first
    assert {key for key, _ in live.said} <= {f.id for f in analyze(load_run(str(tmp_path / "r.json"))).findings}
