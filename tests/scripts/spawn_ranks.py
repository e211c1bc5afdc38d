"""Train a tiny model on every XLA device under ``xmp.spawn``, one ``xprof.watch()`` per rank.

Used by tests/test_ranks.py: ``PJRT_DEVICE=CPU CPU_NUM_DEVICES=2 python spawn_ranks.py OUT``.
Collectives do not complete on the CPU backend, so each rank trains on its own
(``optimizer.step()``, no gradient all-reduce). On the CPU backend ``xmp.spawn`` runs
the ranks as threads of one process (one thread per ``CPU_NUM_DEVICES`` device), and
``watch()`` records one loop per process at a time, so the ranks here take turns
(``_TURN``); on a TPU host each rank is its own process and needs no lock. Rank 1 feeds batches of
shapes rank 0 never sees, so it recompiles more: the straggler the table should name.
"""

from __future__ import annotations

import os
import sys
import threading

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

import xprof

_TURN = threading.Lock()


def train(index: int, out: str) -> None:
    with _TURN:
        _train(out)


def _train(out: str) -> None:
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rank = xr.global_ordinal()
    with xprof.watch(out, name=f"rank{rank}"):
        for i in range(5):
            rows = 4 + (i - 2) * 2 if (rank == 1 and i >= 3) else 4
            x = torch.randn(rows, 8).to(dev)
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            xm.mark_step()
    print(f"rank {rank} of {xr.world_size()} pid {os.getpid()} "
          f"thread {threading.current_thread().name} done", flush=True)


if __name__ == "__main__":
    xmp.spawn(train, args=(sys.argv[1],))
