"""``@torch_xla.compile`` step function; dict batches padded to the longest row and moved
with ``{k: v.to(device) ...}`` before the call. torch_xla.compile syncs on entry (empty)
and on exit: 2 barriers per step, the inputs belong to the exit barrier's graph."""

from typing import Any

import torch
import torch_xla

from tests.scenarios.common import VOCAB

LENGTHS = [7, 9, 7, 12, 9, 7, 12, 5]


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 19), torch.nn.Linear(19, VOCAB)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch_xla.compile
    def train_step(input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(input_ids).view(-1, VOCAB), labels.view(-1))
        loss.backward()
        opt.step()
        return loss

    g = torch.Generator().manual_seed(1)
    for n in LENGTHS:
        ids = torch.randint(1, VOCAB, (4, n), generator=g)
        batch = {k: v.to(device) for k, v in {"input_ids": ids, "labels": ids.clone()}.items()}
        train_step(batch["input_ids"], batch["labels"])
