"""Texts padded to 24 tokens, then trimmed on the device to the batch's longest sequence: the
slice bound is a device tensor, read on the host every step, and each new length is a new
shape. 16 steps, lengths drawn so that four bounds come up, the last by step 9."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import VOCAB, text_loss, text_setup

LONGEST = [20, 20, 20, 24, 20, 16, 24, 20, 16, 12, 20, 24, 16, 20, 24, 12]


def train(device: Any, steps: int = len(LONGEST)) -> None:
    model, opt = text_setup(device, dim=28)
    g = torch.Generator().manual_seed(7)
    for longest in LONGEST[:steps]:
        ids = torch.randint(0, VOCAB, (4, 24), generator=g)
        mask = torch.zeros(4, 24, dtype=torch.long)
        mask[:, :longest] = 1
        labels = torch.randint(0, 2, (4,), generator=g)
        ids, mask, labels = ids.to(device), mask.to(device), labels.to(device)
        bound = mask.sum(1).max()
        ids, mask = ids[:, :bound], mask[:, :bound]  # expect: bound
        loss = text_loss(model, {"input_ids": ids, "attention_mask": mask, "labels": labels})
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
