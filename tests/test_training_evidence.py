"""What the recorder keeps of how a loop trains, on real torch_xla: backward passes with no
optimizer and no barrier (a manual SGD port), and each optimizer's learning rate and weight
decay (the advice on a value that reached 0 or 1 computes its example from them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.mark.xla
def test_training_without_an_optimizer_or_a_barrier_is_kept_and_told(device: Any, tmp_path: Path) -> None:
    import torch

    import xprof
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    torch.manual_seed(0)
    w = torch.zeros(4, 1, device=device, requires_grad=True)
    with xprof.watch(tmp_path / "sgd.json", live=False):
        for _ in range(5):
            x = torch.randn(8, 4).to(device)
            loss = (x @ w - 1.0).square().mean()
            loss.backward()
            with torch.no_grad():
                w.data.add_(w.grad, alpha=-0.1)
                w.grad.zero_()
            loss.item()  # the only thing that runs the graph: no barrier anywhere
    run = load_run(tmp_path / "sgd.json")
    assert run.end is not None and run.end.tail_bw == 5 and run.end.tail_opt == 0
    marks = [d.fields for d in run.debug if d.kind == "no_barrier"]
    assert [(m["opt"], m["bw"]) for m in marks] == [(0, 4)]  # the live notice's evidence
    a = analyze(run)
    f = a.findings[0]
    assert f.cause == "no_barrier" and f.kind == "no_barrier"
    assert (f.code or "").startswith("loss.item()")
    assert f.advice.startswith("Add torch_xla.sync() at the end of each iteration")


@pytest.mark.xla
def test_each_optimizer_is_described_once(device: Any, tmp_path: Path) -> None:
    import torch
    import torch_xla

    import xprof
    from xprof.runfile import load_run

    model = torch.nn.Linear(4, 1).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    with xprof.watch(tmp_path / "opt.json", live=False):
        for _ in range(3):
            model(torch.randn(2, 4).to(device)).sum().backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
    described = [d.fields for d in load_run(tmp_path / "opt.json").debug if d.kind == "optimizer"]
    assert [(d["cls"], d["groups"]) for d in described] == [("AdamW", [{"lr": 1e-3, "weight_decay": 1e-4}])]
