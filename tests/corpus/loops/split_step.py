"""Hand loop (MLP, fixed shapes, Adam) whose step is cut by an extra barrier every step.

`torch_xla.sync()` after `loss.backward()` and again after `opt.step()`: two barriers, each
running its own graph every step (forward+backward, then the optimizer update); no recompiles.
"""

from typing import Any

import torch
import torch_xla
from torch import nn


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 28), nn.ReLU(), nn.Linear(28, 3)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(3)
    for _ in range(10):
        x = torch.randn(16, 12, generator=g).to(device)
        y = torch.randint(0, 3, (16,), generator=g).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        torch_xla.sync()  # "materialize the grads"
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
