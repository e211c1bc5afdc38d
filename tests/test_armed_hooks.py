"""Hooks installed once a counter shows they can matter (boolean-mask indexing's
``Tensor.__getitem__``): on exact counters, then on real torch_xla."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fake_metrics import Counters
from xprof.recorder.core import Recorder
from xprof.runfile import RunWriter

NONZERO = "aten::nonzero"


def _counters(**values: int) -> Counters:
    """Counters by keyword (``aten__nonzero`` for ``aten::nonzero``)."""
    return Counters({k.replace("__", "::"): v for k, v in values.items()})


def _recorder(tmp_path: Path, source: Counters) -> tuple[Recorder, list[str]]:
    rec = Recorder(RunWriter(str(tmp_path / "r.json"), {"xprof_version": "0.1.0", "meta": {}}), source)
    installed: list[str] = []
    rec.arm_on_counter(NONZERO, "mask_index", lambda: installed.append("mask_index"))
    return rec, installed


def _barrier(rec: Recorder, source: Counters, compiled: bool) -> None:
    before = (source.values.get("UncachedCompile", 0), source.values.get("CachedCompile", 0))
    if compiled:
        source.values["UncachedCompile"] = before[0] + 1
    source.values["ExecuteComputation"] = source.values.get("ExecuteComputation", 0) + 1
    rec.on_barrier(0.0, before, "mark_step")


def _debug(tmp_path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:]]
    return [r for r in rows if r.get("type") == "debug"]


def test_hook_waits_for_its_counter_then_installs_once_at_a_barrier(tmp_path: Path) -> None:
    source = _counters(UncachedCompile=0)
    rec, installed = _recorder(tmp_path, source)
    rec.start()
    _barrier(rec, source, compiled=True)  # step 0 compiles; no nonzero yet
    assert installed == []
    source.values[NONZERO] = 1  # step 1 indexes by a mask: torch_xla's fallback counter appears
    _barrier(rec, source, compiled=True)
    assert installed == ["mask_index"]
    source.values[NONZERO] = 2
    _barrier(rec, source, compiled=True)
    assert installed == ["mask_index"]  # once
    rec.stop("ok", None)
    hooks = [d for d in _debug(tmp_path) if d["kind"] == "hook"]
    assert [(d["hook"], d["counter"], d["i"]) for d in hooks] == [("mask_index", NONZERO, 1)]


def test_hook_installs_at_start_when_the_counter_exists(tmp_path: Path) -> None:
    source = _counters(UncachedCompile=3, aten__nonzero=4)
    rec, installed = _recorder(tmp_path, source)
    rec.start()
    assert installed == ["mask_index"]
    rec.stop("ok", None)
    assert not [d for d in _debug(tmp_path) if d["kind"] == "hook"]  # on from the first step: nothing to say


def test_writer_thread_installs_it_without_a_compile(tmp_path: Path) -> None:
    """A mask read in a step whose graph was cached: the writer's counter refresh finds it."""
    source = _counters(UncachedCompile=1)
    rec, installed = _recorder(tmp_path, source)
    rec.start()
    source.values[NONZERO] = 1
    _barrier(rec, source, compiled=False)
    rec.flush()
    deadline = time.monotonic() + 5
    while not installed and time.monotonic() < deadline:
        time.sleep(0.05)
    rec.stop("ok", None)
    assert installed == ["mask_index"]


def test_failing_install_is_recorded_not_raised(tmp_path: Path) -> None:
    source = _counters(UncachedCompile=0)
    rec = Recorder(RunWriter(str(tmp_path / "r.json"), {"xprof_version": "0.1.0", "meta": {}}), source)

    def broken() -> None:
        raise RuntimeError("cannot patch")

    rec.arm_on_counter(NONZERO, "mask_index", broken)
    rec.start()
    source.values[NONZERO] = 1
    _barrier(rec, source, compiled=True)
    rec.stop("ok", None)
    assert rec.errors == 1
    assert not [d for d in _debug(tmp_path) if d["kind"] == "hook"]


@pytest.mark.xla
def test_mask_index_hook_arrives_with_the_first_mask_on_real_torch_xla(device: Any, tmp_path: Path) -> None:
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    import xprof
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    met.clear_counters()  # as in a fresh process: torch_xla has not run aten::nonzero yet
    original = torch.Tensor.__dict__.get("__getitem__")
    original_set = torch.Tensor.__dict__.get("__setitem__")
    x = torch.arange(12.0).reshape(6, 2)
    with xprof.watch(tmp_path / "m.json", live=False):
        for step in range(4):
            w = torch.ones(2, device=device)
            rows = x.to(device) * w
            if step == 0:
                assert torch.Tensor.__dict__.get("__getitem__") is original  # plain indexing pays nothing
            else:
                assert torch.Tensor.__dict__.get("__getitem__") is not original
            mask = rows[:, 0] > step
            rows[mask].sum()  # a boolean mask: aten::nonzero on the CPU
            rows[mask] = 0.0  # assigned through one: index_put_ runs aten::nonzero too
            rows[0] = 1.0  # an int index: passes through
            torch_xla.sync()
    assert torch.Tensor.__dict__.get("__getitem__") is original  # restored
    assert torch.Tensor.__dict__.get("__setitem__") is original_set
    run = load_run(tmp_path / "m.json")
    hooks = [d.fields for d in run.debug if d.kind == "hook"]
    assert [(h["hook"], h["i"]) for h in hooks] == [("mask_index", 0)]  # installed at step 0's barrier
    reads = [s for s in run.syncs if run.sites[s.site].access == "mask_index"]
    assert sorted({s.i for s in reads}) == [1, 2, 3]  # every mask read after it, with its line
    assigned = [s for s in run.syncs if run.sites[s.site].access == "mask_assign"]
    assert sorted({s.i for s in assigned}) == [1, 2, 3]
    assert {run.sites[s.site].code.split("  #")[0] for s in assigned} == {"rows[mask] = 0.0"}
    a = analyze(run)
    assert any("hooked once torch_xla has run aten::nonzero" in n and "up to step 0" in n for n in a.notes)


@pytest.mark.xla
def test_one_argument_where_is_a_value_dependent_read_on_real_torch_xla(device: Any, tmp_path: Path) -> None:
    """``torch.where(mask)`` is ``nonzero``: armed with the mask hooks, its calls are reads of
    kind ``where`` with their line; the three-argument form passes through unrecorded."""
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    import xprof
    from xprof.runfile import load_run

    met.clear_counters()
    original = torch.where
    with xprof.watch(tmp_path / "w.json", live=False):
        for step in range(4):
            x = torch.arange(8.0, device=device) - step
            (rows,) = torch.where(x > 2)  # routing rows by value: nonzero on the CPU
            torch.where(x > 0, x, torch.zeros_like(x)).sum()  # the elementwise form
            (x[rows] * 2).sum()
            torch_xla.sync()
        assert torch.where is not original
    assert torch.where is original  # restored
    run = load_run(tmp_path / "w.json")
    wheres = [s for s in run.syncs if run.sites[s.site].access == "where"]
    assert sorted({s.i for s in wheres}) == [1, 2, 3]  # once armed (step 0's barrier), every step
    assert {run.sites[s.site].code.split("  #")[0] for s in wheres} == {"(rows,) = torch.where(x > 2)"}
