"""``torch.histc`` has no XLA lowering: it runs on the CPU every step."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup

HISTOGRAMS: list[torch.Tensor] = []


def train(device: Any, steps: int = 8) -> None:
    model, opt = mlp_setup(device, width=21)
    for x, y in mlp_data(steps, 8):
        x, y = x.to(device), y.to(device)
        out = model(x)
        HISTOGRAMS.append(torch.histc(out.detach(), bins=4))
        loss = (out - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
