"""Hand loop: a Mixtral-style mixture-of-experts layer routing tokens with the one-argument
``torch.where(expert_mask[e])`` (a ``nonzero``: value-dependent, run on the CPU) and
``index_add_`` back, inputs of one fixed shape.

How many tokens each expert gets changes from step to step, so every step's graph has new
shapes downstream of the routing although no input shape changes: a recompile per new set of
counts. The dense form (every expert on every token, weighed by the routing weights, zero for
experts not chosen) has fixed shapes and gives the same outputs (moe_where_routing_fixed).
"""

from typing import Any

import torch
import torch_xla
from torch import nn

STEPS = 8
TOKENS, DIM, EXPERTS, TOP_K = 16, 24, 4, 2


class SparseMoE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(DIM, 32), nn.SiLU(), nn.Linear(32, DIM))
                                     for _ in range(EXPERTS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.gate(x), dim=-1)
        weights, chosen = torch.topk(weights, TOP_K, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        expert_mask = nn.functional.one_hot(chosen, EXPERTS).permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            slot, token = torch.where(expert_mask[e])
            y = expert(x[token]) * weights[token, slot, None]
            out.index_add_(0, token, y)
        return out


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(DIM, DIM), SparseMoE(), nn.Linear(DIM, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        x = torch.randn(TOKENS, DIM, generator=g).to(device)
        y = torch.randn(TOKENS, 1, generator=g).to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
