"""Hugging Face style dict batches padded to the longest sequence of each batch."""

from typing import Any

import torch_xla

from tests.scenarios.common import text_batch, text_loss, text_setup

LENGTHS = [12, 17, 12, 23, 17, 30, 12, 23, 30, 17, 12, 23]


def train(device: Any, steps: int = 12, dim: int = 16) -> None:
    model, opt = text_setup(device, dim=dim)
    for step in range(steps):
        batch = text_batch(4, LENGTHS[step % len(LENGTHS)], seed=step)
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = text_loss(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
