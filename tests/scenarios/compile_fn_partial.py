"""``torch_xla.compile(fn)`` called with tensors moved inline; the last batch of each epoch
is shorter. The inputs are named by the step function's parameters."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_setup


def train(device: Any, epochs: int = 3) -> None:
    model, opt = mlp_setup(device, width=23)

    def step(features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        opt.zero_grad()
        loss = (model(features) - targets).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    compiled = torch_xla.compile(step)
    g = torch.Generator().manual_seed(3)
    data = [(torch.randn(8, 8, generator=g), torch.randn(8, 1, generator=g)) for _ in range(3)]
    data.append((torch.randn(5, 8, generator=g), torch.randn(5, 1, generator=g)))
    for _ in range(epochs):
        for x, y in data:
            compiled(x.to(device), y.to(device))
