"""Hand loop (MLP, fixed shapes) under a tqdm bar that shows the loss tensor every step.

`pbar.set_postfix(loss=loss)` turns the tensor into a string inside tqdm: a host read every
step at that line, which runs the forward graph early; the bar writes to a StringIO.
"""

import io
from typing import Any

import torch
import torch_xla
from torch import nn
from tqdm import tqdm


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(11, 22), nn.Tanh(), nn.Linear(22, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    data = [(torch.randn(8, 11, generator=g), torch.randn(8, 1, generator=g)) for _ in range(10)]
    pbar = tqdm(data, file=io.StringIO(), mininterval=0)
    for x, y in pbar:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        pbar.set_postfix(loss=loss)
        torch_xla.sync()
    pbar.close()
