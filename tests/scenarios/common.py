"""Tiny models and data shared by the scenarios: a few ms a step on the CPU."""

from __future__ import annotations

from typing import Any

import torch

VOCAB = 50

SPMD_UNSHARDED_AT = (7, 14)
"""Steps of the SPMD ``sharding_change`` scenario (tests/scripts/spmd_scenarios.py) whose
``input_ids`` are left unsharded."""


class TinyText(torch.nn.Module):
    """Embedding -> masked mean -> linear: a text classifier with two classes."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, dim)
        self.head = torch.nn.Linear(dim, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        pooled = h.sum(1) / attention_mask.sum(1, keepdim=True).clamp(min=1)
        return self.head(pooled)


def text_setup(device: Any, dim: int, seed: int = 0) -> tuple[TinyText, torch.optim.Optimizer]:
    """``dim`` differs between scenarios so none reuses another's cached graphs."""
    torch.manual_seed(seed)
    model = TinyText(dim).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def text_batch(batch: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "input_ids": torch.randint(0, VOCAB, (batch, length), generator=g),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
        "labels": torch.randint(0, 2, (batch,), generator=g),
    }


def mlp_setup(device: Any, width: int, seed: int = 0) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """``width`` differs between scenarios so none reuses another's cached graphs."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 1)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def mlp_data(n: int, batch: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 8, generator=g), torch.randn(batch, 1, generator=g)) for _ in range(n)]


def text_loss(model: TinyText, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["input_ids"], batch["attention_mask"])
    return torch.nn.functional.cross_entropy(logits, batch["labels"])
