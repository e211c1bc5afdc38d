"""An extra regularization term every 4 steps: step-dependent control flow."""

from typing import Any

import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 14) -> None:
    model, opt = mlp_setup(device, width=13)
    for step, (x, y) in enumerate(mlp_data(steps, 8)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        if step % 4 == 3:
            loss = loss + 1e-3 * sum(p.pow(2).sum() for p in model.parameters())
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
