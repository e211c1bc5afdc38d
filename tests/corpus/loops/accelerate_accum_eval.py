"""`accelerate` loop with gradient accumulation (2 micro-batches an optimizer step), a collate
that pads each batch to its longest row, and an evaluation pass (``model.eval()``,
``torch.no_grad()``) over a held-out loader every 4 optimizer steps, then ``model.train()``.

The training graphs recompile for each new padded length; the eval pass compiles its own
forward-only graphs. Nothing trains in eval mode: the loop switches back before training.
"""

from typing import Any

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader

TRAIN_LENGTHS = [6, 9, 6, 11, 9, 6, 14, 9, 11, 6, 9, 14, 6, 9, 11, 6]
EVAL_LENGTHS = [10, 10]


def _rows(lengths: list[int], seed: int) -> list[tuple[torch.Tensor, int]]:
    g = torch.Generator().manual_seed(seed)
    rows = []
    for longest in lengths:
        for i in range(2):
            n = longest if i == 0 else int(torch.randint(2, longest + 1, (1,), generator=g))
            rows.append((torch.randint(1, 50, (n,), generator=g), i))
    return rows


def pad_batch(rows: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    ids = nn.utils.rnn.pad_sequence([r[0] for r in rows], batch_first=True)
    return {"input_ids": ids, "attention_mask": (ids > 0).long(), "labels": torch.tensor([r[1] for r in rows])}


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(16, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.embed(input_ids)) * attention_mask[..., None]
        return self.out(h.sum(1) / attention_mask.sum(1, keepdim=True))


def train(device: Any) -> None:
    torch.manual_seed(0)
    accelerator = Accelerator(gradient_accumulation_steps=2)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train_dl = DataLoader(_rows(TRAIN_LENGTHS, 1), batch_size=2, collate_fn=pad_batch)
    eval_dl = DataLoader(_rows(EVAL_LENGTHS, 2), batch_size=2, collate_fn=pad_batch)
    model, opt, train_dl, eval_dl = accelerator.prepare(model, opt, train_dl, eval_dl)
    for i, batch in enumerate(train_dl):
        with accelerator.accumulate(model):
            logits = model(batch["input_ids"], batch["attention_mask"])
            loss = nn.functional.cross_entropy(logits, batch["labels"])
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
        if (i + 1) % 8 == 0:
            model.eval()
            with torch.no_grad():
                for eb in eval_dl:
                    model(eb["input_ids"], eb["attention_mask"])
            model.train()
