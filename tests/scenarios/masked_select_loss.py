"""The per-token loss averaged over the real tokens with ``torch.masked_select``: a
value-dependent shape, like boolean-mask indexing."""

from typing import Any

import torch
import torch_xla

V, C, D, B, L = 40, 5, 13, 4, 10


def train(device: Any, steps: int = 8) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(V, D), torch.nn.Linear(D, C)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(2)
    for _ in range(steps):
        lens = torch.randint(2, L + 1, (B,), generator=g)
        ids = torch.randint(1, V, (B, L), generator=g).to(device)
        labels = torch.randint(0, C, (B, L), generator=g).to(device)
        mask = (torch.arange(L)[None, :] < lens[:, None]).to(device)
        opt.zero_grad()
        per_token = torch.nn.functional.cross_entropy(model(ids).view(-1, C), labels.view(-1), reduction="none")
        loss = torch.masked_select(per_token, mask.view(-1)).mean()  # expect: masked_select
        loss.backward()
        opt.step()
        torch_xla.sync()
