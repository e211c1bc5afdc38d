"""watch() manners on real torch_xla: options, a second thread's watch, what a step record holds."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import xprof
from xprof.runfile import load_run

pytestmark = pytest.mark.xla


def _loop(device: Any, steps: int = 3, read: bool = False) -> list[float]:
    import torch
    import torch_xla

    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(device)
    out = []
    for _ in range(steps):
        x = torch.randn(4, 5).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        if read:
            out.append(loss.item())
        torch_xla.sync()
    return out


def test_second_thread_watch_is_inert(device: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    started, release = threading.Event(), threading.Event()

    def first() -> None:
        with xprof.watch(tmp_path / "first.json"):
            started.set()
            release.wait(60)

    t = threading.Thread(target=first)
    t.start()
    assert started.wait(60)
    try:
        with caplog.at_level(logging.WARNING, logger="xprof"):
            with xprof.watch(tmp_path / "second.json") as w:
                _loop(device)  # trains normally
        assert w.inert
        assert not (tmp_path / "second.json").exists()
        assert "another thread's watch() is already recording" in caplog.text
    finally:
        release.set()
        t.join(60)
    assert load_run(tmp_path / "first.json").complete


def test_syncs_off_records_steps_and_inputs_only(device: Any, tmp_path: Path) -> None:
    with xprof.watch(tmp_path / "r.json", syncs=False):
        values = _loop(device, read=True)
    run = load_run(tmp_path / "r.json")
    assert len(values) == 3
    assert run.syncs == [] and len(run.steps) == 3
    assert run.signatures and run.signatures[0][0].shape == (4, 5)
    assert run.meta["syncs"] is False


def test_step_records_hold_counter_deltas(device: Any, tmp_path: Path) -> None:
    with xprof.watch(tmp_path / "r.json", name="deltas"):
        _loop(device, steps=4, read=True)
    run = load_run(tmp_path / "r.json")
    assert run.name == "deltas"
    assert [s.i for s in run.steps] == [0, 1, 2, 3]
    assert all(s.counters["MarkStep"] == 1 for s in run.steps)
    assert all(s.barrier == "sync" for s in run.steps)
    assert all(s.t0 <= s.tb <= s.t1 for s in run.steps)
    assert len([s for s in run.syncs if not s.deferred]) == 4
    site = run.sites[run.syncs[0].site]
    assert site.access == "item" and site.code == "out.append(loss.item())"
    assert Path(site.file).name == "test_watch.py"


def test_every_barrier_api_is_a_step(device: Any, tmp_path: Path) -> None:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def fwd_bwd() -> None:
        model(torch.randn(4, 5).to(device)).pow(2).mean().backward()

    with xprof.watch(tmp_path / "r.json"):
        fwd_bwd()
        xm.optimizer_step(opt, barrier=True)
        fwd_bwd()
        opt.step()
        xm.mark_step()
        with torch_xla.step():
            fwd_bwd()
            opt.step()
        fwd_bwd()
        opt.step()
        torch_xla.sync()
    kinds = [s.barrier for s in load_run(tmp_path / "r.json").steps]
    # torch_xla.step() syncs once on entry (nothing pending) and once on exit.
    assert kinds == ["optimizer_step", "mark_step", "compile_entry", "compile", "sync"]


def test_xm_save_mid_step_is_a_checkpoint_read_at_its_line(device: Any, tmp_path: Path) -> None:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    from xprof.analysis import analyze

    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with xprof.watch(tmp_path / "r.json", live=False):
        for step in range(8):
            model(torch.randn(4, 5).to(device)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            if step % 3 == 1:
                xm.save(model.state_dict(), str(tmp_path / "ckpt.pt"))  # before the barrier
            torch_xla.sync()
    run = load_run(tmp_path / "r.json")
    saves = [s for s in run.syncs if run.sites[s.site].access == "materialize"]
    # xm.save syncs the state dict's tensors (_xla_sync_multi): their graph runs mid-step.
    assert [s.i for s in saves] == [1, 4, 7]
    site = run.sites[saves[0].site]
    assert site.code.startswith("xm.save(model.state_dict()") and site.via == "torch_xla.core.xla_model.save"
    assert saves[0].executions >= 1
    a = analyze(run)
    assert [f.kind for f in a.findings if f.line == site.line] == ["checkpoint"]
    assert not any(f.cause == "unknown" for f in a.findings)


def test_an_eval_loop_without_a_barrier_keeps_its_batches_out_of_the_next_step(device: Any,
                                                                                  tmp_path: Path) -> None:
    import torch
    import torch_xla

    from xprof.analysis import analyze

    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def evaluate() -> float:
        model.eval()
        correct = torch.zeros((), device=device)
        with torch.no_grad():
            for _ in range(2):  # its own batch size, and no barrier: its graph runs at the read
                x = torch.randn(8, 5).to(device)
                correct += model(x).argmax(-1).eq(0).sum()
        model.train()
        return correct.item()

    with xprof.watch(tmp_path / "r.json", live=False):
        for step in range(6):
            x = torch.randn(4, 5).to(device)
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
            if step in (1, 3):
                evaluate()
    run = load_run(tmp_path / "r.json")
    shapes = {tuple(tuple(e.shape) for e in run.signatures[s.sig]) for s in run.steps if s.sig is not None}
    assert shapes == {((4, 5),)}  # the eval batches fed the read's graph, not the next step's
    assert not any(f.cause == "input_shape" for f in analyze(run).findings)


def test_tracing_tensors_printed_are_no_host_reads(device: Any, tmp_path: Path) -> None:
    """aot_autograd formats fake XLA tensors while it traces (``scan_layers`` does, every
    step): they say is_xla but hold no data, so only the real tensor's print is a read."""
    import torch
    import torch_xla
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = torch.ones(2, 3).to(device)
    torch_xla.sync()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = mode.from_tensor(real)
    assert fake.is_xla
    with xprof.watch(tmp_path / "r.json"):
        for _ in range(2):
            assert "FakeTensor" in repr(fake) and "device='xla" in f"{fake}"
            repr(real)  # the read
            torch_xla.sync()
    run = load_run(tmp_path / "r.json")
    sites = [run.sites[r.site] for r in run.syncs]
    assert [(s.access, s.code) for s in sites] == [("repr", "repr(real)  # the read")] * 2
