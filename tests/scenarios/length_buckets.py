"""Texts padded to one of three bucket lengths (16, 24, 32), built in the loop and moved with a
tuple assignment; every bucket is seen by step 6, then 24 more steps compile nothing."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import VOCAB, text_loss, text_setup

LENGTHS = [16, 16, 24, 16, 24, 16, 32] + [24, 16, 32] * 8


def train(device: Any, steps: int = len(LENGTHS)) -> None:
    model, opt = text_setup(device, dim=26)
    g = torch.Generator().manual_seed(5)
    for length in LENGTHS[:steps]:
        ids = torch.randint(0, VOCAB, (4, length), generator=g)
        mask = torch.ones(4, length, dtype=torch.long)
        labels = torch.randint(0, 2, (4,), generator=g)
        ids, mask, labels = ids.to(device), mask.to(device), labels.to(device)
        loss = text_loss(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
