"""moe_where_routing with the advice applied: every expert runs on every token and its output
is weighed by the token's routing weight for it (zero where the expert was not chosen): the same
outputs, fixed shapes, no value-dependent op.
"""

from typing import Any

import torch
import torch_xla
from torch import nn

STEPS = 8
TOKENS, DIM, EXPERTS, TOP_K = 16, 24, 4, 2


class DenseMoE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(DIM, 32), nn.SiLU(), nn.Linear(32, DIM))
                                     for _ in range(EXPERTS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.gate(x), dim=-1)
        weights, chosen = torch.topk(weights, TOP_K, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        combine = (nn.functional.one_hot(chosen, EXPERTS) * weights[..., None]).sum(dim=1)
        outs = torch.stack([expert(x) for expert in self.experts], dim=1)
        return (outs * combine[..., None]).sum(dim=1)


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(DIM, DIM), DenseMoE(), nn.Linear(DIM, 1)).to(device)
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
