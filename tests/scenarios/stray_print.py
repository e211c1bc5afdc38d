"""A stray ``print(loss)`` at one step."""

from typing import Any

import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 10) -> None:
    model, opt = mlp_setup(device, width=18)
    for step, (x, y) in enumerate(mlp_data(steps, 8)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step == 5:
            print("loss", loss)  # expect: print
        torch_xla.sync()
