"""Hand loop (MLP, fixed shapes) that reads `loss.item()` every step and prints the loss
tensor every 5 steps.

Each `.item()` is a host read at its line that runs the forward graph before the barrier;
`print(loss)` reads the already-computed value (prints go to a StringIO here).
"""

import contextlib
import io
from typing import Any

import torch
import torch_xla
from torch import nn


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(13, 40), nn.ReLU(), nn.Linear(40, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    g = torch.Generator().manual_seed(8)
    total = 0.0
    out = io.StringIO()
    for step in range(10):
        x = torch.randn(8, 13, generator=g).to(device)
        y = torch.randn(8, 1, generator=g).to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        total += loss.item()
        if step % 5 == 0:
            with contextlib.redirect_stdout(out):
                print(loss)
        torch_xla.sync()
