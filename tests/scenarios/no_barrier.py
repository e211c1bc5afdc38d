"""A loop ported from CUDA that never reaches a step barrier (no torch_xla.sync(), no device
loader): 10 optimizer steps, the loss read every 5. Each read compiles every step since the
start."""

from typing import Any

from tests.scenarios.common import mlp_data, mlp_setup


def train(device: Any, steps: int = 10) -> None:
    model, opt = mlp_setup(device, width=47)
    for k, (x, y) in enumerate(mlp_data(steps, batch=8, seed=6)):
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if k % 5 == 4:
            print(f"loss {loss.item():.3f}")  # expect: read
