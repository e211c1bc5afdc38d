"""Hand loop (MLP, fixed shapes) weighing an auxiliary loss term by a Python float that is 0.5
for 4 steps, 1.0 for 3, then 0.0 (a schedule that switches the term on fully, then off).

torch_xla bakes 0 and 1 into the graph as constants and passes 0.5 as device data, so the
step graph changes twice with the same inputs: at step 4 (the constant 1) and at step 7 (0).
"""

from typing import Any

import torch
import torch_xla
from torch import nn

AUX_WEIGHTS = [0.5] * 4 + [1.0] * 3 + [0.0] * 3


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 40), nn.ReLU(), nn.Linear(40, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(4)
    for aux_weight in AUX_WEIGHTS:
        x = torch.randn(8, 12, generator=g).to(device)
        y = torch.randn(8, 1, generator=g).to(device)
        out = model(x)
        loss = nn.functional.mse_loss(out, y) + out.abs().mean() * aux_weight
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
