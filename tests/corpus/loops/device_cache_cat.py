"""Hand loop that decodes on the device with a cache grown by ``torch.cat`` each step and a
barrier after each token: nothing new comes from the host, yet every step's graph is new
(the cache is one row longer). No input shape changed: a graph with no input from the host.
"""

from typing import Any

import torch
import torch_xla
from torch import nn


def train(device: Any) -> None:
    torch.manual_seed(0)
    proj = nn.Linear(13, 13).to(device)
    g = torch.Generator().manual_seed(4)
    token = torch.randn(1, 13, generator=g).to(device)
    cache = token
    torch_xla.sync()
    with torch.no_grad():
        for _ in range(8):
            token = torch.tanh(proj(cache).mean(dim=0, keepdim=True))
            cache = torch.cat([cache, token], dim=0)
            torch_xla.sync()
