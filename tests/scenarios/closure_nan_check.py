"""Logging through ``xm.add_step_closure`` every 4 steps, with a NaN check in the closure
(``torch.isnan(loss).item()``): the check compiles a small graph of its own the first time,
after the barrier. Deferred, never a mid-step sync."""

from typing import Any

import torch
import torch_xla
import torch_xla.core.xla_model as xm

from tests.scenarios.common import mlp_data, mlp_setup

LOGGED: list[float] = []


def _log(loss: torch.Tensor) -> None:
    assert not torch.isnan(loss).item()  # expect: closure
    LOGGED.append(0.0)


def train(device: Any, steps: int = 12) -> None:
    model, opt = mlp_setup(device, width=27)
    for step, (x, y) in enumerate(mlp_data(steps, 8, seed=4)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 4 == 3:
            xm.add_step_closure(_log, args=(loss,))
        torch_xla.sync()
