"""Hand loop (embedding + dropout classifier) padding each batch to its longest row, with a
correct eval every 3 steps (`model.eval()`, `torch.no_grad()`, eval batch 10, `model.train()`).

Training recompiles for every new padded length (5 lengths, batch 6); the eval pass compiles
its own forward-only graphs once per eval length (2 batches) and reuses them at later evals.
"""

from typing import Any

import torch
import torch_xla
from torch import nn

TRAIN_LENGTHS = [6, 10, 6, 13, 10, 8, 16, 6, 13, 8, 16, 10]
EVAL_LENGTHS = [11, 14]


def _batch(g: torch.Generator, size: int, longest: int) -> tuple[torch.Tensor, ...]:
    lens = torch.randint(2, longest + 1, (size,), generator=g)
    lens[0] = longest
    ids = torch.randint(1, 40, (size, longest), generator=g)
    mask = (torch.arange(longest)[None, :] < lens[:, None]).float()
    labels = torch.randint(0, 3, (size,), generator=g)
    return ids * mask.long(), mask, labels


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 32)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.emb(ids)) * mask.unsqueeze(-1)
        return self.out(h.sum(1) / mask.sum(1, keepdim=True))


def train(device: Any) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(6)
    train_batches = [_batch(g, 6, n) for n in TRAIN_LENGTHS]
    eval_batches = [_batch(g, 10, n) for n in EVAL_LENGTHS]
    model = Classifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (ids, mask, labels) in enumerate(train_batches):
        ids, mask, labels = ids.to(device), mask.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(ids, mask), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if step % 3 == 2:
            model.eval()
            with torch.no_grad():
                correct = torch.zeros((), device=device)
                for eids, emask, elabels in eval_batches:
                    eids, emask, elabels = eids.to(device), emask.to(device), elabels.to(device)
                    pred = model(eids, emask).argmax(-1)
                    correct += (pred == elabels).sum()
                    torch_xla.sync()
            model.train()
