"""``torch.compile(model, backend="openxla")``; the last batch of each epoch is shorter, so
dynamo's guard on the batch size fails and it traces a new graph."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_setup


def train(device: Any, epochs: int = 2) -> None:
    model, opt = mlp_setup(device, width=31)
    compiled = torch.compile(model, backend="openxla")
    g = torch.Generator().manual_seed(6)
    data = [(torch.randn(8, 8, generator=g), torch.randn(8, 1, generator=g)) for _ in range(5)]
    data.append((torch.randn(3, 8, generator=g), torch.randn(3, 1, generator=g)))
    for _ in range(epochs):
        for x, y in data:
            x, y = x.to(device), y.to(device)
            loss = (compiled(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
