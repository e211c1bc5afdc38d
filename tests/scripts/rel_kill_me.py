"""Train under ``xprof.watch()`` and say ``STEP <i>`` after each step, until killed.

Used by tests/test_reliability.py: the test waits for a few ``STEP`` lines, kills this
process with SIGKILL, and checks that the run file it leaves behind loads.
Usage: rel_kill_me.py RUN_FILE [MAX_STEPS]
"""

from __future__ import annotations

import sys
import warnings

import torch
import torch_xla
import torch_xla.core.xla_model as xm

import xprof

warnings.filterwarnings("ignore", category=DeprecationWarning)


def main() -> None:
    path = sys.argv[1]
    max_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8).to(dev), torch.randn(4, 1).to(dev)
    with xprof.watch(path):
        for i in range(max_steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            xm.mark_step()
            print(f"STEP {i}", flush=True)


if __name__ == "__main__":
    main()
