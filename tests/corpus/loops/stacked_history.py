"""Hand loop that keeps every step's loss on the device and adds their mean to the loss:
``history.append(loss.detach())`` then ``torch.stack(history).mean()`` inside the step.

The list grows a tensor a step, so the step graph is larger each time from the same inputs:
a graph that grows (a new, larger graph every step, never cached).
"""

from typing import Any

import torch
import torch_xla
from torch import nn


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(9, 23), nn.ReLU(), nn.Linear(23, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(2)
    history: list[torch.Tensor] = []
    for _ in range(8):
        x = torch.randn(6, 9, generator=g).to(device)
        y = torch.randn(6, 1, generator=g).to(device)
        loss = nn.functional.mse_loss(model(x), y)
        if history:
            loss = loss + 0.0 * torch.stack(history).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        history.append(loss.detach())
        torch_xla.sync()
