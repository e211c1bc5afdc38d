"""MpDeviceLoader loop (MLP, fixed shapes, AdamW) with grad clipping, the step split in two.

`xm.mark_step()` after forward/backward and `torch_xla.sync()` after clip+optimizer step:
two graphs run per step, plus the loader's own barrier at each batch; no recompiles.
"""

from typing import Any

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(device: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(9, 30), nn.GELU(), nn.Linear(30, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(4)
    ds = TensorDataset(torch.randn(80, 9, generator=g), torch.randn(80, 1, generator=g))
    loader = pl.MpDeviceLoader(DataLoader(ds, batch_size=8, shuffle=False), device)
    for x, y in loader:
        loss = nn.functional.smooth_l1_loss(model(x), y)
        loss.backward()
        xm.mark_step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
