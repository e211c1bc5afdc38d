"""Training with batch 8, and every 4 steps an eval pass of 2 batches of 16."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 12) -> None:
    model, opt = mlp_setup(device, width=12)
    evals = mlp_data(2, 16, seed=9)
    for step, (x, y) in enumerate(mlp_data(steps, 8)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if step % 4 == 3:
            with torch.no_grad():
                for ex, ey in evals:
                    ex, ey = ex.to(device), ey.to(device)
                    _ = (model(ex) - ey).pow(2).mean()
                    torch_xla.sync()
