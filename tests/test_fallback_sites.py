"""The forward line of a backward op that fell back to the CPU: on real torch_xla, and the
names that join an autograd node to a fallback counter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from xprof.recorder.fallback_sites import node_key


def test_node_and_counter_names_meet() -> None:
    assert node_key("UpsampleBilinear2DBackward0") == node_key("aten::upsample_bilinear2d_backward")
    assert node_key("UpsampleNearest2DBackward1") == node_key("aten::upsample_nearest2d_backward")
    assert node_key("AddmmBackward0") != node_key("aten::upsample_bilinear2d_backward")


@pytest.mark.xla
def test_backward_fallback_is_located_at_its_forward_call(device: Any, tmp_path: Path) -> None:
    import torch
    import torch_xla
    from torch.nn import functional as F

    import xprof
    from xprof.runfile import load_run

    conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(device)
    opt = torch.optim.SGD(conv.parameters(), lr=0.01)
    anomaly_before = torch.is_anomaly_enabled()
    with xprof.watch(tmp_path / "f.json", live=False):
        for _ in range(4):
            x = torch.randn(2, 3, 6, 6).to(device)
            up = F.interpolate(conv(x), scale_factor=2, mode="bilinear", align_corners=False)
            up.square().mean().backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
    assert torch.is_anomaly_enabled() is anomaly_before  # on for one step, then as it was
    run = load_run(tmp_path / "f.json")
    sites = [d.fields for d in run.debug if d.kind == "fallback_site"]
    assert len(sites) == 1  # once per op
    site = sites[0]
    assert site["op"] == "aten::upsample_bilinear2d_backward"
    assert site["file"] == __file__ and site["code"].startswith("up = F.interpolate(conv(x)")
    assert not run.errors
