"""20 samples in batches of 8: the last batch of every epoch has 4. Three epochs."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_setup


def train(device: Any, epochs: int = 3) -> None:
    model, opt = mlp_setup(device, width=17)
    g = torch.Generator().manual_seed(2)
    data = torch.utils.data.TensorDataset(torch.randn(20, 8, generator=g), torch.randn(20, 1, generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
