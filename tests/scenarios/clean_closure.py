"""A clean loop: fixed shapes, loss logged through a step closure. Expect no findings."""

from typing import Any

import torch_xla
import torch_xla.core.xla_model as xm

from tests.scenarios.common import mlp_data, mlp_setup

LOGGED: list[float] = []


def train(device: Any, steps: int = 10) -> None:
    model, opt = mlp_setup(device, width=11)
    for x, y in mlp_data(steps, 8):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        xm.add_step_closure(lambda t: LOGGED.append(t.item()), (loss,))
        torch_xla.sync()
