"""A DataLoader whose collate function pads to the longest sequence, behind MpDeviceLoader."""

from typing import Any

import torch
import torch_xla.distributed.parallel_loader as pl

from tests.scenarios.common import VOCAB, text_loss, text_setup


def _dataset(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    lengths = [5, 9, 14, 20, 7, 11, 18, 6]
    return [torch.randint(1, VOCAB, (lengths[i % len(lengths)],), generator=g) for i in range(n)]


def collate(samples: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    longest = max(len(s) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    mask = torch.zeros(len(samples), longest, dtype=torch.long)
    for row, s in enumerate(samples):
        ids[row, : len(s)] = s
        mask[row, : len(s)] = 1
    labels = (ids.sum(1) % 2).long()
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def train(device: Any, steps: int = 10) -> None:
    model, opt = text_setup(device, dim=15)
    loader = torch.utils.data.DataLoader(_dataset(steps * 2), batch_size=2, collate_fn=collate)
    for batch in pl.MpDeviceLoader(loader, device):
        loss = text_loss(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
