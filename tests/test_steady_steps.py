"""Steady steps are written from parts encoded once (``Recorder._steady_step``): the run
file must hold exactly what building every step field by field writes, whatever happens
between them (compiles, counter resets, new fallback counters, new input shapes, notes,
eval mode, graphs run mid-step by a host read or by an eager op). On exact counters, the two ways side by side."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fake_metrics import Counters
from xprof.recorder import core
from xprof.recorder.core import Recorder
from xprof.runfile import RunWriter


class _Leaf:
    def __init__(self, *shape: int) -> None:
        self.shape = shape
        self.dtype = "torch.float32"


def _add(values: dict[str, int], name: str, n: int = 1) -> None:
    values[name] = values.get(name, 0) + n


def _drive(path: Path, monkeypatch: pytest.MonkeyPatch, observer: Any = None) -> int:
    """A loop of 60 steps with a bit of everything; returns the steps written steadily.
    ``observer`` gets the records as they are written (the live notices' feed)."""
    clock = iter(range(10_000))
    monkeypatch.setattr(core, "time", SimpleNamespace(**{**vars(time), "time": lambda: 1e9 + next(clock) / 7}))
    source = Counters({"UncachedCompile": 1, "CachedCompile": 0, "ExecuteComputation": 1})
    v = source.values
    rec = Recorder(RunWriter(str(path), {"xprof_version": "0.1.0", "meta": {}}), source, observer)
    steady = 0
    original = rec._steady_step

    def counting(ev: tuple[Any, ...], out: list[dict[str, Any]]) -> bool:
        nonlocal steady
        hit = original(ev, out)
        steady += hit
        return hit

    rec._steady_step = counting  # type: ignore[method-assign]
    rec.start()
    t = 100.0
    for i in range(60):
        if i in (41, 42, 43, 44, 45):
            # mid-step, a graph looked up in the cache: inside a host read (41, 42), or by an
            # op run eagerly (43-45): the same counters, only the read tells them apart
            b = (v["UncachedCompile"], v["CachedCompile"], v["ExecuteComputation"])
            _add(v, "CachedCompile")
            if i < 43:
                rec.on_host_read("item", None, t, t, b, (b[0], b[1] + 1, b[2]), False)
        before = (v.get("UncachedCompile", 0), v.get("CachedCompile", 0))
        width = 8 if i < 30 or i % 7 else 9  # a new input shape now and then
        rec.on_batch([("x", _Leaf(4, width)), ("y", _Leaf(4))], "batch")
        rec.eval_mode = i in (10, 11, 12)  # modules left in eval mode: only that differs
        if i not in (14, 15):
            rec.on_backward()
        if i != 16:
            rec.on_optimizer_step()
        if i == 20:
            rec.note_step("epoch", 1)  # a field the recorder does not know
        if i in (52, 53):
            rec.grad_turned_off = True  # torch.no_grad() entered since the last barrier
        if i == 25:
            v["aten::nonzero"] = 1  # a CPU fallback appears: the counter names change
            rec.counters.refresh()
        if i in (40, 50):
            # torch.compile's bridge clears the counters: read as counting from 0, so the two
            # steps go down by as much but their deltas differ
            v["CachedCompile"] -= 7
            v["ExecuteComputation"] -= 7
        if width == 9 and i % 14 == 2:
            _add(v, "UncachedCompile")  # the new shape compiles
        else:
            _add(v, "CachedCompile")
        _add(v, "ExecuteComputation")
        if i % 5 == 0:
            _add(v, "aten::_local_scalar_dense")  # a host read this step
        rec.on_barrier(t + 0.0007, before, "mark_step")
        t += 0.001
        if i % 13 == 0:
            rec.flush()
    rec.stop("ok", None)
    return steady


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def test_steady_steps_write_what_field_by_field_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steady = _drive(tmp_path / "steady.json", monkeypatch)
    monkeypatch.setattr(core.Recorder, "_steady_step", lambda self, ev, out: False)
    assert _drive(tmp_path / "plain.json", monkeypatch) == 0
    got, want = _records(tmp_path / "steady.json"), _records(tmp_path / "plain.json")
    assert got == want
    assert [r["i"] for r in got if r["type"] == "step"] == list(range(60))
    assert [r["i"] for r in got if r["type"] == "step" and r.get("mg")] == [43, 44, 45]
    assert [r["i"] for r in got if r["type"] == "step" and r.get("gd")] == [52, 53]
    assert steady >= 35  # most steps took the steady path (39 of 60 today)


def test_steady_step_line_is_the_record_it_carries(tmp_path: Path) -> None:
    """What the live notices read (the record) and what the file holds (its line) agree."""
    fed: list[dict[str, Any]] = []

    class _Observer:
        def feed(self, records: list[dict[str, Any]]) -> None:
            fed.extend(records)

    source = Counters({"UncachedCompile": 1, "CachedCompile": 0, "ExecuteComputation": 1})
    rec = Recorder(RunWriter(str(tmp_path / "r.json"), {"xprof_version": "0.1.0", "meta": {}}), source,
                   _Observer())
    rec.start()
    for i in range(5):
        before = (source.values["UncachedCompile"], source.values["CachedCompile"])
        _add(source.values, "CachedCompile")
        _add(source.values, "ExecuteComputation")
        rec.on_barrier(1.0 + i, before, "mark_step")
    rec.stop("ok", None)
    steps = [r for r in _records(tmp_path / "r.json") if r["type"] == "step"]
    assert [dict(r) for r in fed if r.get("type") == "step"] == steps
    assert any(type(r).__name__ == "EncodedRecord" for r in fed)


def test_a_loader_batch_passed_to_a_compiled_step_is_recorded_once(tmp_path: Path) -> None:
    """MpDeviceLoader's batch handed to a torch_xla.compile step as fn(data, target): the loader's
    names, not those and the parameters' too; a new tensor in the call is still an input."""
    source = Counters({"UncachedCompile": 1, "CachedCompile": 0, "ExecuteComputation": 1})
    rec = Recorder(RunWriter(str(tmp_path / "r.json"), {"xprof_version": "0.1.0", "meta": {}}), source)
    rec.start()
    data, target, extra = _Leaf(8, 3), _Leaf(8), _Leaf(2)
    rec.on_batch([("batch[0]", data), ("batch[1]", target)], "loader")
    rec.on_call_args([("data", data), ("target", target), ("scale", extra)])
    source.values["ExecuteComputation"] += 1
    rec.on_barrier(time.time(), (0, 0), "compile")
    rec.stop("ok", None)
    sigs = [r for r in map(json.loads, (tmp_path / "r.json").read_text().splitlines()) if r.get("type") == "sig"]
    assert [(i["name"], i["src"]) for i in sigs[0]["inputs"]] == [
        ("batch[0]", "loader"), ("batch[1]", "loader"), ("scale", "arg")]


def test_live_notices_take_the_steady_path_and_say_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The live notices skip the work of a steady step like the last one (LiveNotices._step):
    on the records of the 60-step loop above, everything they count and say is what the full
    path gives."""
    from xprof.recorder.live import LiveNotices
    from xprof.runfile import step_record

    fed: list[dict[str, Any]] = []

    class _Observer:
        def feed(self, records: list[dict[str, Any]]) -> None:
            fed.extend(records)

    _drive(tmp_path / "r.json", monkeypatch, _Observer())
    fast, full = LiveNotices(0.0, None), LiveNotices(0.0, None)
    full._step = lambda rec: full._barrier(step_record(rec))  # type: ignore[method-assign]
    taken = 0
    barrier = fast._barrier

    def counting(step: Any) -> Any:
        nonlocal taken
        taken -= 1
        return barrier(step)

    fast._barrier = counting  # type: ignore[method-assign]
    for live in (fast, full):
        for k in range(0, len(fed), 7):  # fed in batches, as the writer does
            live.feed(fed[k:k + 7])
        live.close()
    taken += sum(1 for r in fed if r.get("type") == "step")
    assert taken >= 10  # steady steps that took the short path
    assert fast.said == full.said
    keep = ("_recompiles", "_recompile_s", "_eager")
    assert {k: getattr(fast, k) for k in keep} == {k: getattr(full, k) for k in keep}
    assert (fast._at.k, fast._at.work, fast.walk.seen_sigs, fast.walk.seen_keys) == (
        full._at.k, full._at.work, full.walk.seen_sigs, full.walk.seen_keys)


def test_a_barriers_graph_counted_during_a_read_is_not_the_reads(tmp_path: Path) -> None:
    """torch_xla runs a barrier's graph asynchronously and counts it late: a read right after
    the barrier sees it inside its window. That execution is the barrier's; one the read
    starts itself, or any after the barrier's was counted, is the read's."""
    source = Counters({"UncachedCompile": 1, "CachedCompile": 0, "ExecuteComputation": 1})
    rec = Recorder(RunWriter(str(tmp_path / "r.json"), {"xprof_version": "0.1.0", "meta": {}}), source)
    rec.start()
    x = lambda: source.values["ExecuteComputation"]  # noqa: E731
    for i in range(4):
        before = (source.values["UncachedCompile"], source.values["CachedCompile"], x())
        _add(source.values, "CachedCompile")  # the barrier ran a graph; not counted yet ...
        if i == 3:
            _add(source.values, "ExecuteComputation")  # ... except here: counted before it returned
        rec.on_barrier(1.0 + i, before, "mark_step")
        b = (1, source.values["CachedCompile"], x())
        if i == 0:  # a ready read: the barrier's execution counted while it waited
            rec.on_host_read("item", None, 1.1, 1.2, b, (b[0], b[1], b[2] + 1), False)
        elif i == 1:  # the same, and a graph of the read's own
            rec.on_host_read("item", None, 2.1, 2.2, b, (b[0], b[1] + 1, b[2] + 2), False)
        elif i == 2:  # counted before the read began: the read's execution is its own
            rec.on_host_read("item", None, 3.1, 3.2, (b[0], b[1], b[2] + 1), (b[0], b[1] + 1, b[2] + 2), False)
            _add(source.values, "ExecuteComputation")
        else:  # counted by the barrier itself (xm.save right after it, say): the read's own
            rec.on_host_read("item", None, 4.1, 4.2, b, (b[0], b[1] + 1, b[2] + 1), False)
        _add(source.values, "ExecuteComputation", 2 if i == 1 else 1)
    rec.stop("ok", None)
    syncs = [r for r in _records(tmp_path / "r.json") if r["type"] == "sync"]
    assert [r.get("x", 0) for r in syncs] == [0, 1, 1, 1]
