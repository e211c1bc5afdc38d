"""A step closure that reads the predictions' argmax (``.tolist()``) every 5 steps: a small
graph compiled once after the barrier, deferred."""

from typing import Any

import torch_xla
import torch_xla.core.xla_model as xm

from tests.scenarios.common import mlp_data, mlp_setup

SEEN: list[list[int]] = []


def train(device: Any, steps: int = 12) -> None:
    model, opt = mlp_setup(device, width=29)
    for step, (x, y) in enumerate(mlp_data(steps, 8, seed=5)):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = (out - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 5 == 4:
            xm.add_step_closure(lambda o: SEEN.append(o.argmax(0).tolist()), args=(out.detach(),))  # expect: closure
        torch_xla.sync()
