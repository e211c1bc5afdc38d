"""Fixed twin of token_mask_two_lines: both mask lines rewritten as the finding advised (the
per-token loss weighed by the mask). tests/test_predictions.py checks that its recompiles
are what the finding predicted.
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
    weight = keep.reshape(-1).float()
    per_token = nn.functional.cross_entropy(logits.reshape(-1, 3), tags.reshape(-1), reduction="none")
    return (per_token * weight).sum() / weight.sum().clamp(min=1)


def train(device: Any) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    data = [_batch(g, n) for n in REAL_TOKENS]
    model = nn.Sequential(nn.Embedding(25, 11), nn.Linear(11, 3)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for words, tags, keep in data:
        words, tags, keep = words.to(device), tags.to(device), keep.to(device)
        loss = tag_loss(model(words), tags, keep)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
