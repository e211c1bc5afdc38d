"""A tiny PyTorch Lightning ``Trainer.fit`` on Lightning's XLA strategy, for tests/test_lightning.py.

    PJRT_DEVICE=CPU python lightning_tiny.py [--steps N] [--callback RUN.json] [--raise-at K]

The module logs its loss with ``prog_bar=True`` (the progress bar on, a CSV logger every 2
steps): Lightning's own reads are what the tests look for.

Lightning's ``XLAAccelerator`` refuses torch_xla's CPU backend: it counts devices as TPU
chips, through ``torch_xla._internal.tpu.num_available_devices()``, which asks the GCE
metadata server (``metadata.google.internal``) and fails off a TPU VM, so
``Trainer(accelerator="tpu")`` raises "`XLAAccelerator` can not run on your system since the
accelerator is not available". :class:`CpuXlaAccelerator` replaces only that device count (one
device, ``xla:0``); the strategy (``SingleDeviceXLAStrategy``), its precision plugin
(``xm.optimizer_step``), the loops, the logger and the progress bar are Lightning's own.
On a TPU, ``accelerator="tpu"`` is all it takes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import lightning as L
import torch
from lightning.pytorch.accelerators import XLAAccelerator
from lightning.pytorch.loggers import CSVLogger


class CpuXlaAccelerator(XLAAccelerator):  # type: ignore[misc]
    """Lightning's XLA accelerator, with torch_xla's one CPU device as its device count."""

    @staticmethod
    def auto_device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def parse_devices(devices: Any) -> int:
        return 1

    @staticmethod
    def get_parallel_devices(devices: Any) -> list[torch.device]:
        return [torch.device("xla", 0)]


class TinyModule(L.LightningModule):
    def __init__(self, raise_at: int = -1) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 2)
        self.raise_at = raise_at

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        if batch_idx == self.raise_at:
            raise ValueError(f"batch {batch_idx} is bad")
        loss = self.layer(batch).pow(2).mean()
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainer(steps: int, logs: str, callbacks: list[Any]) -> L.Trainer:
    return L.Trainer(accelerator=CpuXlaAccelerator(), devices=1, max_steps=steps, log_every_n_steps=2,
                     logger=CSVLogger(logs), enable_checkpointing=False, enable_model_summary=False,
                     callbacks=callbacks)


def data() -> torch.utils.data.DataLoader[Any]:
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.DataLoader(torch.randn(64, 8, generator=g), batch_size=4)  # type: ignore[arg-type]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--callback", default=None)
    p.add_argument("--raise-at", type=int, default=-1)
    p.add_argument("--logs", default=os.path.join(os.getcwd(), "lightning_logs"))
    args = p.parse_args()
    callbacks: list[Any] = []
    if args.callback:
        from xprof.integrations.lightning import XprofCallback

        callbacks.append(XprofCallback(args.callback))
    torch.manual_seed(0)
    trainer(args.steps, args.logs, callbacks).fit(TinyModule(args.raise_at), data())
    print("fit done", file=sys.stderr)


if __name__ == "__main__":
    main()
