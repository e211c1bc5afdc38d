"""Fixed twin of accelerate_padded: the collate pads every batch to 21 (the finding's
`padding='max_length'` row). tests/test_predictions.py checks its recompiles against the
prediction. The original's notes:

`accelerate.Accelerator()` loop on a tiny text classifier; the collate pads each batch to its
longest row (6 distinct lengths over 12 batches).

Every new length recompiles the step graph (once; a length seen again reuses its graph); on
XLA accelerate wraps the DataLoader in an MpDeviceLoader, whose batches are the barriers.
"""

from typing import Any

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader

LENGTHS = [7, 12, 7, 9, 12, 15, 9, 18, 7, 21, 15, 12]  # longest row of each batch of 4


def _rows() -> list[tuple[list[int], int]]:
    g = torch.Generator().manual_seed(5)
    rows = []
    for longest in LENGTHS:
        for i in range(4):
            n = longest if i == 0 else int(torch.randint(3, longest + 1, (1,), generator=g))
            rows.append((torch.randint(1, 60, (n,), generator=g).tolist(), i % 2))
    return rows


def _collate(batch: list[tuple[list[int], int]]) -> dict[str, torch.Tensor]:
    width = 21  # padding='max_length' (max_length=21), as the finding advised
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    mask = torch.zeros(len(batch), width)
    for r, (tokens, _) in enumerate(batch):
        ids[r, : len(tokens)] = torch.tensor(tokens)
        mask[r, : len(tokens)] = 1.0
    labels = torch.tensor([label for _, label in batch])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class BagClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(60, 23)
        self.head = nn.Sequential(nn.Linear(23, 23), nn.ReLU(), nn.Linear(23, 2))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(h.sum(1) / attention_mask.sum(1, keepdim=True))


def train(device: Any) -> None:
    # accelerate picks the XLA device itself; `device` is unused.
    del device
    torch.manual_seed(0)
    accelerator = Accelerator()
    model = BagClassifier()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(_rows(), batch_size=4, shuffle=False, collate_fn=_collate)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    model.train()
    for batch in loader:
        logits = model(batch["input_ids"], batch["attention_mask"])
        loss = nn.functional.cross_entropy(logits, batch["labels"])
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
