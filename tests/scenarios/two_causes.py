"""Padding to the longest sequence per batch and ``.item()`` every step: two findings."""

from typing import Any

import torch_xla

from tests.scenarios.common import text_batch, text_loss, text_setup

LENGTHS = [10, 15, 10, 21, 15, 10, 21, 15, 10, 21]
LOSSES: list[float] = []


def train(device: Any, steps: int = 10) -> None:
    model, opt = text_setup(device, dim=20)
    for step in range(steps):
        batch = text_batch(4, LENGTHS[step % len(LENGTHS)], seed=step)
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = text_loss(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
        LOSSES.append(loss.item())  # expect: item
        torch_xla.sync()
