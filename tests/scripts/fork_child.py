"""Fork a child in the middle of a ``watch()``; the child leaves through ``sys.exit`` (as
``multiprocessing`` children and some launchers do), so it unwinds through the watch's
``__exit__``. (It then ends with ``os._exit``: torch_xla's own C++ teardown waits forever in
a forked child, with or without xprof.)

Used by tests/test_hostile_recorder.py: the run file must hold the parent's steps only,
one ``end`` record, no repeated step index. Usage: fork_child.py RUN_FILE
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch_xla

import xprof

warnings.filterwarnings("ignore", category=DeprecationWarning)


def main() -> None:
    parent = os.getpid()
    try:
        record()
    except SystemExit:
        if os.getpid() == parent:
            raise
        os._exit(0)


def record() -> None:
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8).to(dev), torch.randn(4, 1).to(dev)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        torch_xla.sync()

    with xprof.watch(sys.argv[1], live=False):
        for _ in range(3):
            step()
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # the child: through watch.__exit__, then the interpreter's exit
        _, status = os.waitpid(pid, 0)
        for _ in range(3):
            step()
    print(f"CHILD {os.waitstatus_to_exitcode(status)}", flush=True)


if __name__ == "__main__":
    main()
