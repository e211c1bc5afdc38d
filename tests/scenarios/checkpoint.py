"""A ``torch.save`` checkpoint every 5 steps: an expected host copy, reported as info."""

import os
import tempfile
from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 20) -> None:
    model, opt = mlp_setup(device, width=22)
    with tempfile.TemporaryDirectory() as tmp:
        for step, (x, y) in enumerate(mlp_data(steps, 8)):
            x, y = x.to(device), y.to(device)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
            if step % 5 == 4:
                torch.save(model.state_dict(), os.path.join(tmp, "ckpt.pt"))  # expect: checkpoint
