"""Gradient accumulation over 4 micro-batches (a barrier after each), an eval pass with each
forward under ``torch.no_grad()`` and its barrier after it, as HF and accelerate examples write
it, after every 3 optimizer steps (its last batch is partial), and
``ReduceLROnPlateau.step(val_loss)`` given the loss *tensor*: torch reads it on the host
(``float()`` inside the scheduler), mid-step, once per eval."""

from typing import Any

import torch
import torch_xla.core.xla_model as xm

from tests.scenarios.common import mlp_setup

ACCUMULATE = 4


def train(device: Any, epochs: int = 3) -> None:
    model, opt = mlp_setup(device, width=41)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    g = torch.Generator().manual_seed(12)
    batches = [(torch.randn(8, 8, generator=g), torch.randn(8, 1, generator=g)) for _ in range(12)]
    val = [(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)) for n in (16, 16, 8)]
    for _ in range(epochs):
        model.train()
        for i, (x, y) in enumerate(batches):
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)) / ACCUMULATE
            loss.backward()
            if (i + 1) % ACCUMULATE == 0:
                opt.step()
                opt.zero_grad()
            xm.mark_step()
        model.eval()
        total = torch.zeros((), device=device)
        for x, y in val:
            with torch.no_grad():
                total += torch.nn.functional.mse_loss(model(x.to(device)), y.to(device), reduction="sum")
            xm.mark_step()
        plateau.step(total / 40)  # expect: plateau
