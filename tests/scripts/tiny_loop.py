"""A tiny torch_xla training loop for ``xprof run`` tests; its options are its own.

    python tiny_loop.py [--steps N] [--grow-at K] [--exit CODE] [--raise] [--interrupt]
                        [--sigterm] [--argv-to FILE] [-o X] [--name X] [--no-debug]

``--grow-at K`` feeds a larger batch from step K on (one recompile). ``--argv-to`` writes
``sys.argv``, ``sys.path[0]`` and ``__name__`` as JSON, so a test can check what the
script saw. ``--exit``, ``--raise``, ``--interrupt`` and ``--sigterm`` (SIGTERM to itself, only
where a handler is installed, so a test process is never killed; exit 99 otherwise) end the
script those ways after the loop. ``-o``, ``--name`` and ``--no-debug`` do nothing: they share names with
``xprof run``'s own options, to check that the script gets them.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--grow-at", type=int, default=-1)
    p.add_argument("--exit", type=int, default=None)
    p.add_argument("--raise", dest="raise_", action="store_true")
    p.add_argument("--interrupt", action="store_true")
    p.add_argument("--sigterm", action="store_true")
    p.add_argument("--argv-to", default=None)
    p.add_argument("-o", "--output", default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--no-debug", action="store_true")
    args = p.parse_args()
    if args.argv_to:
        with open(args.argv_to, "w") as f:
            json.dump({"argv": sys.argv, "path0": sys.path[0], "name": __name__}, f)
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(args.steps):
        batch = torch.randn(8 if 0 <= args.grow_at <= i else 4, 8)
        x = batch.to(dev)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        xm.mark_step()
    if args.raise_:
        raise ValueError("boom from the script")
    if args.interrupt:
        raise KeyboardInterrupt
    if args.sigterm:
        import os
        import signal
        import time

        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            sys.exit(99)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
    if args.exit is not None:
        sys.exit(args.exit)


if __name__ == "__main__":
    main()
