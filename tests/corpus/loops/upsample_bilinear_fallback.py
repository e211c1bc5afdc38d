"""Hand loop: a small decoder that upsamples feature maps with a bilinear ``F.interpolate``.

Its forward lowers to XLA; its backward (``upsample_bilinear2d_backward``) has no lowering on
torch_xla 2.9 and runs on the CPU: every step copies the gradient to the host and back. No
recompiles: the cost is the fallback, at the interpolate's line.
"""

from typing import Any

import torch
import torch_xla
from torch import nn
from torch.nn import functional as F

STEPS = 6


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x))
        h = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
        return self.conv2(h)


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = Decoder().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(5)
    for _ in range(STEPS):
        x = torch.randn(2, 3, 8, 8, generator=g).to(device)
        y = torch.randn(2, 1, 16, 16, generator=g).to(device)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
