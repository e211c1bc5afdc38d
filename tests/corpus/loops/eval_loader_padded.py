"""Hand loop over `MpDeviceLoader`s (no explicit barrier: each next batch is the barrier),
padding each batch to its longest row, with a correct eval every 4 steps (`model.eval()`,
`torch.no_grad()`, its own loader, `model.train()`).

The training step that precedes an eval runs at the eval loader's first barrier: when its
padded length is new, that compile is the training graph's new shape, not the eval's.
"""

from typing import Any

import torch
import torch_xla.distributed.parallel_loader as pl
from torch import nn

TRAIN_LENGTHS = [5, 9, 5, 12, 9, 7, 12, 15, 5, 7, 15, 9]
EVAL_LENGTHS = [10, 10]


def _batch(g: torch.Generator, size: int, longest: int) -> tuple[torch.Tensor, ...]:
    lens = torch.randint(1, longest + 1, (size,), generator=g)
    lens[0] = longest
    mask = (torch.arange(longest)[None, :] < lens[:, None]).float()
    ids = torch.randint(1, 30, (size, longest), generator=g) * mask.long()
    return ids, mask, torch.randint(0, 2, (size,), generator=g)


class MeanPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 20)
        self.out = nn.Linear(20, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids) * mask.unsqueeze(-1)
        return self.out(h.sum(1) / mask.sum(1, keepdim=True))


def evaluate(model: nn.Module, batches: list[tuple[torch.Tensor, ...]], device: Any) -> torch.Tensor:
    model.eval()
    correct = torch.zeros((), device=device)
    with torch.no_grad():
        for ids, mask, labels in pl.MpDeviceLoader(batches, device):
            correct += (model(ids, mask).argmax(-1) == labels).sum()
    model.train()
    return correct


def train(device: Any) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(11)
    train_batches = [_batch(g, 4, n) for n in TRAIN_LENGTHS]
    eval_batches = [_batch(g, 8, n) for n in EVAL_LENGTHS]
    model = MeanPool().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, (ids, mask, labels) in enumerate(pl.MpDeviceLoader(train_batches, device)):
        loss = nn.functional.cross_entropy(model(ids, mask), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 4 == 3:
            evaluate(model, eval_batches, device)
