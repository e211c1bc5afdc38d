"""Eager mode with the training step compiled (pytorch/xla's
examples/eager/train_decoder_only_eager_with_compile.py): the step runs as one graph, and a
step closure checks the loss every 3 steps with an op that runs eagerly after the barrier."""

from typing import Any

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla.experimental import eager_mode_context

from tests.scenarios.common import mlp_data, mlp_setup


def check(loss: torch.Tensor) -> None:
    assert not torch.isnan(loss).item()


def train(device: Any, steps: int = 10) -> None:
    with eager_mode_context(True):
        model, opt = mlp_setup(device, width=35)

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        compiled = torch_xla.compile(step)
        for k, (x, y) in enumerate(mlp_data(steps, batch=8, seed=4)):
            loss = compiled(x.to(device), y.to(device))
            if k % 4 == 0:  # (steps 0, 4, 8: each closure runs at the next step's barrier)
                xm.add_step_closure(check, args=(loss,))
