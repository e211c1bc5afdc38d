"""Hand loop: a mixture of experts routed as Mixtral does, with the one-argument
``torch.where(mask)`` (``idx, top = torch.where(expert_mask[e])``): the positions of each
expert's tokens, a count that follows the router's values, so each expert's slice of the
batch takes a new shape when its count changes (a value-dependent shape, like ``nonzero``).
"""

from typing import Any

import torch
import torch_xla
from torch import nn

EXPERTS = 3


def train(device: Any) -> None:
    torch.manual_seed(0)
    router = nn.Linear(11, EXPERTS).to(device)
    experts = nn.ModuleList([nn.Linear(11, 11) for _ in range(EXPERTS)]).to(device)
    opt = torch.optim.SGD([*router.parameters(), *experts.parameters()], lr=0.05)
    g = torch.Generator().manual_seed(3)
    for _ in range(8):
        x = torch.randn(12, 11, generator=g).to(device)
        weights = torch.softmax(router(x), dim=-1)
        top = weights.argmax(dim=-1)
        expert_mask = nn.functional.one_hot(top, EXPERTS).permute(1, 0)  # [experts, tokens]
        out = torch.zeros_like(x)
        for e in range(EXPERTS):
            idx = torch.where(expert_mask[e])[0]
            gate = weights[idx, e].unsqueeze(-1)
            out = out.index_add(0, idx, experts[e](x[idx]) * gate)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
