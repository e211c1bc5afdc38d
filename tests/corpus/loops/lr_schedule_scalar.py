"""Hand loop (MLP, fixed shapes) that scales the loss by a warm-up factor `min(1.0, step / 3)`.

The factor is a Python float: 0.0 (step 0) and 1.0 (steps 3+) are baked into the graph as
constants, 1/3 and 2/3 travel as device data, so the step graph recompiles when it hits 1.0.
"""

from typing import Any

import torch
import torch_xla
from torch import nn


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(14, 44), nn.ReLU(), nn.Linear(44, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(9)
    for step in range(10):
        warmup = min(1.0, step / 3)
        x = torch.randn(8, 14, generator=g).to(device)
        y = torch.randn(8, 1, generator=g).to(device)
        loss = nn.functional.mse_loss(model(x), y) * warmup
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
