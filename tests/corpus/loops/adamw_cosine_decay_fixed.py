"""The fixed twin of ``adamw_cosine_decay``: the same loop with the schedule floored at 3e-4, the
floor xprof's advice computes from the run's weight decay (3e-8 / 1e-4): its prediction is one graph.

The original: AdamW with weight decay under a cosine schedule that runs to zero.

AdamW scales each weight by ``1 - lr * weight_decay`` every step. torch_xla passes Python
floats to the graph as device data, except 0 and 1, which it bakes in as constants: once the
learning rate is small enough that ``1 - lr * wd`` rounds to 1.0 in float32 (lr * wd under about
6e-8), that factor is the constant 1 and the step graph changes once, with the same inputs.
"""

from typing import Any

import torch
import torch_xla
from torch import nn

STEPS = 10


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 31), nn.ReLU(), nn.Linear(31, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS - 2, eta_min=3e-4)
    g = torch.Generator().manual_seed(3)
    for _ in range(STEPS):
        x = torch.randn(8, 10, generator=g).to(device)
        y = torch.randn(8, 1, generator=g).to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()
        torch_xla.sync()
