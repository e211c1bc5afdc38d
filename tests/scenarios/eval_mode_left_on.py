"""An evaluation at step 4 calls ``model.eval()`` and never switches back: the training steps
after it run with dropout off, a graph of their own (torch_xla's debug output: the same
input shapes, another graph)."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_data

WIDTH = 53


def train(device: Any, steps: int = 10) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, WIDTH), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(WIDTH, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    val = torch.randn(4, 8).to(device)
    for i, (x, y) in enumerate(mlp_data(steps, 8, seed=9)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if i == 4:
            model.eval()  # forgotten model.train() after it
            with torch.no_grad():
                model(val).sum()
            torch_xla.sync()
