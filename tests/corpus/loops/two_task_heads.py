"""Hand loop: a shared trunk with two task heads taking turns, one batch each (classification
targets [16] int64 on even steps, regression targets [16, 3] float32 on odd ones), Adam.

Each task's first step builds its head's optimizer state (a one-off graph), its second step
runs its steady graph: the second step of a kind compiles once more, then both graphs stay
cached. Batches of different kinds, not a shape to pad.
"""

from typing import Any

import torch
import torch_xla
from torch import nn


def train(device: Any) -> None:
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(21, 37), nn.ReLU()).to(device)
    heads = nn.ModuleList([nn.Linear(37, 5), nn.Linear(37, 3)]).to(device)
    opt = torch.optim.Adam([*trunk.parameters(), *heads.parameters()], lr=1e-3)
    g = torch.Generator().manual_seed(5)
    for step in range(12):
        task = step % 2
        x = torch.randn(16, 21, generator=g).to(device)
        out = heads[task](trunk(x))
        if task == 0:
            y = torch.randint(0, 5, (16,), generator=g).to(device)
            loss = nn.functional.cross_entropy(out, y)
        else:
            y = torch.randn(16, 3, generator=g).to(device)
            loss = nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
