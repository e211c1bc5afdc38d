"""Two reads inside torch's own library calls every step: clip_grad_norm_ with
error_if_nonfinite=True checks the norm on the host, ReduceLROnPlateau.step(loss) turns the
loss into a Python number. 12 steps."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 12) -> None:
    model, opt = mlp_setup(device, width=43)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=2)
    for x, y in mlp_data(steps, batch=8, seed=4):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)  # expect: clip
        opt.step()
        opt.zero_grad()
        sched.step(loss)  # expect: plateau
        torch_xla.sync()
