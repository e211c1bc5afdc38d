"""Hand loop (MLP, fixed shapes) that logs the loss tensor through `logging` every step.

`log.info("step %d loss %s", step, loss)` formats the tensor when the StringIO handler emits:
a host read at the log line every step, which runs the forward graph before the barrier.
"""

import io
import logging
from typing import Any

import torch
import torch_xla
from torch import nn

log = logging.getLogger(__name__)


def train(device: Any) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 1)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(1)
        for step in range(10):
            x = torch.randn(8, 10, generator=g).to(device)
            y = torch.randn(8, 1, generator=g).to(device)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            log.info("step %d loss %s", step, loss)
            torch_xla.sync()
    finally:
        log.removeHandler(handler)
