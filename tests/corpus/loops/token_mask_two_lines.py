"""Token tagging loop whose loss helper keeps real tokens with a boolean mask on two lines
(`logits[keep]`, `tags[keep]`); fixed-length batches, so the only changing shape is the
count of real tokens, which differs every batch.

Both mask lines run on the CPU and give a value-dependent row count: the loss graph
recompiles per count, and only rewriting both lines (a weighted loss) removes it.
"""

from typing import Any

import torch
import torch_xla
from torch import nn

REAL_TOKENS = [9, 14, 9, 11, 16, 14, 7, 11, 16, 9]  # of 4 rows x 6 tokens = 24


def _batch(g: torch.Generator, real: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    words = torch.randint(1, 25, (4, 6), generator=g)
    keep = torch.zeros(24, dtype=torch.bool)
    keep[:real] = True
    return words, torch.randint(0, 3, (4, 6), generator=g), keep.view(4, 6)


def tag_loss(logits: torch.Tensor, tags: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    kept_logits = logits[keep]
    kept_tags = tags[keep]
    return nn.functional.cross_entropy(kept_logits, kept_tags)


def train(device: Any) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    data = [_batch(g, n) for n in REAL_TOKENS]
    model = nn.Sequential(nn.Embedding(25, 12), nn.Linear(12, 3)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for words, tags, keep in data:
        words, tags, keep = words.to(device), tags.to(device), keep.to(device)
        loss = tag_loss(model(words), tags, keep)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
