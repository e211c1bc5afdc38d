"""``--explain`` on from warm-up's end when it costs under 1% of a step: a graph that changes
once (a weight reaching 1.0 once) is then named at its line, on real torch_xla."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from xprof.diagnosis.terms import explain_affordable


def test_the_mode_is_affordable_only_for_long_steps() -> None:
    assert explain_affordable(1.0, 700)  # ~4.6 ms of a 1 s step
    assert not explain_affordable(0.1, 700)  # ~4.6 ms of a 100 ms step: 4.6%
    assert not explain_affordable(10.0, None)  # graph size unknown: never
    assert not explain_affordable(0.02, 10)


@pytest.mark.xla
def test_long_steps_turn_explain_on_and_a_change_that_happens_once_gets_its_line(device: Any,
                                                                                   tmp_path: Path) -> None:
    import torch
    import torch_xla
    from torch import nn

    import xprof
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    torch.manual_seed(0)
    model = nn.Linear(6, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with xprof.watch(tmp_path / "long.json", live=False):
        for weight in [0.5] * 7 + [1.0] * 3:  # 1.0 is baked into the graph: one new graph, once
            x, y = torch.randn(4, 6).to(device), torch.randn(4, 1).to(device)
            out = model(x)
            loss = nn.functional.mse_loss(out, y) + out.abs().mean() * weight
            loss.backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.25)  # a long step (host work): the mode costs well under 1% of it
            torch_xla.sync()
    run = load_run(tmp_path / "long.json")
    turned = [d.fields for d in run.debug if d.kind == "explain"]
    assert [(t["auto"], t["why"]) for t in turned] == [(True, "long_steps")]
    a = analyze(run)
    changed = [f for f in a.findings if f.graph_changes]
    assert changed, [f.title for f in a.findings]
    assert changed[0].code is not None and changed[0].code.startswith("loss = nn.functional.mse_loss(out, y)")
    assert any("its cost is under 1% of steps this long" in n for n in a.notes)
