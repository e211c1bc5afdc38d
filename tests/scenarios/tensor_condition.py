"""``if loss > x:`` on a device tensor every step."""

from typing import Any

import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup

SPIKES: list[int] = []


def train(device: Any, steps: int = 10) -> None:
    model, opt = mlp_setup(device, width=19)
    for step, (x, y) in enumerate(mlp_data(steps, 8)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        if loss > 100.0:  # expect: tensor_condition
            SPIKES.append(step)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
