"""``loss.item()`` every step: an extra execution per step."""

from typing import Any

import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup

LOSSES: list[float] = []


def train(device: Any, steps: int = 10) -> None:
    model, opt = mlp_setup(device, width=14)
    for x, y in mlp_data(steps, 8):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        LOSSES.append(loss.item())  # expect: item
        torch_xla.sync()
