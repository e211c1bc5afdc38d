"""A fixed-shape loop in eager mode (``torch_xla.experimental.eager_mode(True)``): every op
compiles once and then runs on its own as it is called; the barriers have nothing left to
run. pytorch/xla's examples/eager/train_decoder_only_eager.py trains this way."""

from typing import Any

import torch_xla
from torch_xla.experimental import eager_mode_context

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 10) -> None:
    with eager_mode_context(True):
        model, opt = mlp_setup(device, width=33)
        for x, y in mlp_data(steps, batch=8, seed=3):
            x, y = x.to(device), y.to(device)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
