"""Token tagging with fixed-length inputs; the loss keeps the real tokens by boolean-mask
indexing, so its shape depends on how many tokens are real (a new graph per count)."""

from typing import Any

import torch
import torch_xla

V, C, D, B, L = 40, 5, 17, 4, 12


def train(device: Any, steps: int = 8) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(V, D), torch.nn.Linear(D, C)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        lens = torch.randint(3, L + 1, (B,), generator=g)
        ids = torch.randint(1, V, (B, L), generator=g).to(device)
        labels = torch.randint(0, C, (B, L), generator=g).to(device)
        mask = (torch.arange(L)[None, :] < lens[:, None]).to(device)
        opt.zero_grad()
        logits = model(ids).view(-1, C)
        flat = mask.view(-1)
        loss = torch.nn.functional.cross_entropy(logits[flat], labels.view(-1)[flat])  # expect: mask
        loss.backward()
        opt.step()
        torch_xla.sync()
