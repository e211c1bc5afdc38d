"""``torch.compile(model, backend="openxla")`` trained, and evaluated every 4 steps under
``model.eval()`` + ``torch.no_grad()`` with another batch size: dynamo guards on grad mode, so
the eval call traces once more (a one-off per mode, not a shape problem), and the eval pass
compiles its own graph."""

from typing import Any

import torch
import torch_xla


class _Regressor(torch.nn.Module):
    """A module of its own: dynamo caches traced graphs per code object, and Sequential's
    forward is shared with the other torch.compile scenario in the same test process."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 37), torch.nn.ReLU(), torch.nn.Linear(37, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def train(device: Any, steps: int = 12) -> None:
    torch.manual_seed(0)
    model = _Regressor().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    compiled = torch.compile(model, backend="openxla")
    g = torch.Generator().manual_seed(11)
    for step in range(steps):
        x, y = torch.randn(8, 8, generator=g).to(device), torch.randn(8, 1, generator=g).to(device)
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if step % 4 == 3:
            model.eval()
            with torch.no_grad():
                val = compiled(torch.randn(16, 8, generator=g).to(device)).mean()
                torch_xla.sync()
            model.train()
            del val
