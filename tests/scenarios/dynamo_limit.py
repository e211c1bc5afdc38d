"""``torch.compile(model, backend="openxla")`` fed batches of 4 for three steps, then a new
batch size every step, with dynamo's recompile limit at 2 (8 by default): dynamo traces sizes
4 and 5, gives up on the module at size 6 (step 4) and runs it uncompiled from then on, so XLA
compiles each later size at the barrier."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch._dynamo
import torch_xla

from tests.scenarios.common import mlp_setup


@contextmanager
def _reset_after() -> Iterator[None]:
    try:
        yield
    finally:
        torch._dynamo.reset()


def train(device: Any, steps: int = 8) -> None:
    model, opt = mlp_setup(device, width=37)
    compiled = torch.compile(model, backend="openxla")
    g = torch.Generator().manual_seed(8)
    # (dynamo then skips the code it gave up on, torch.compile's wrapper of every module's
    # forward: reset it for the scenarios that run after this one)
    with torch._dynamo.config.patch(recompile_limit=2), _reset_after():
        for step in range(steps):
            n = 4 if step < 3 else step + 2
            x, y = torch.randn(n, 8, generator=g).to(device), torch.randn(n, 1, generator=g).to(device)
            loss = (compiled(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
