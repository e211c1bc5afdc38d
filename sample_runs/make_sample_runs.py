"""Record the sample run files in this folder on real torch_xla (CPU), with ``xprof.watch``.

    make sample-runs            # or: PJRT_DEVICE=CPU .venv/bin/python sample_runs/make_sample_runs.py
    .venv/bin/python sample_runs/make_sample_runs.py clean_a clean_b   # only some
    .venv/bin/python sample_runs/make_sample_runs.py --out /tmp/samples   # elsewhere

Every sample is the same tiny text-classification loop (embedding, mean, linear; batches
of 4 token sequences, 24 steps, seeded), changed in one way per sample:

- ``padded_fixed``: each batch padded to a fixed length (16): one steady-state graph.
- ``padded_longest``: each batch padded to its longest sequence: one compile per new length.
- ``item_every_step``: fixed padding, and ``loss.item()`` before the barrier every step.
- ``step_closure``: fixed padding, the loss logged through ``xm.add_step_closure``.
- ``clean_a`` / ``clean_b``: two recordings of the fixed-padding loop (for the noise test).

Each sample is recorded in a fresh process: torch_xla's compile cache lives as long as
the process, so a second loop in the same process would find its graphs already
compiled. The parent imports torch and torch_xla once and forks a child per sample
(before any device is created), so no child pays the import again. Children run one at a
time: two compiling at once on a small machine makes compile times noisier.
The sample name reaches the child in memory (not on its command line), so every run file
records the same ``argv`` (``compare`` warns when arguments differ).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("PJRT_DEVICE", "CPU")

HERE = Path(__file__).resolve().parent
SAMPLES = ("padded_fixed", "padded_longest", "item_every_step", "step_closure", "clean_a", "clean_b")
STEPS = 24
BATCH = 4
VOCAB = 64
FIXED_LEN = 16
LENGTHS = (5, 7, 9, 12)
"""Sequence lengths in the data: padding to the longest per batch gives a few shapes."""


def make_data(seed: int = 0) -> list[tuple[list[int], int]]:
    """``STEPS * BATCH`` (tokens, label) pairs; the same for every sample."""
    rng = random.Random(seed)
    data = []
    for _ in range(STEPS * BATCH):
        n = rng.choice(LENGTHS)
        data.append(([rng.randrange(1, VOCAB) for _ in range(n)], rng.randrange(2)))
    return data


def train(name: str, out: Path = HERE) -> None:
    """The loop, as a user would write it; ``name`` picks the one thing that differs."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    from torch.utils.data import DataLoader

    import xprof

    torch.manual_seed(0)
    device = torch_xla.device()
    fixed = name != "padded_longest"

    def collate(items: list[tuple[list[int], int]]) -> dict[str, Any]:
        width = FIXED_LEN if fixed else max(len(tokens) for tokens, _ in items)
        ids = torch.zeros(len(items), width, dtype=torch.long)
        for row, (tokens, _) in enumerate(items):
            ids[row, : len(tokens)] = torch.tensor(tokens)
        return {"input_ids": ids, "labels": torch.tensor([label for _, label in items])}

    embed = torch.nn.Embedding(VOCAB, 16).to(device)
    head = torch.nn.Linear(16, 2).to(device)
    opt = torch.optim.SGD([*embed.parameters(), *head.parameters()], lr=0.1)
    loader = DataLoader(make_data(), batch_size=BATCH, shuffle=False, collate_fn=collate)
    losses: list[float] = []

    def log_loss(loss: torch.Tensor) -> None:
        losses.append(loss.item())

    with xprof.watch(out / f"{name}.json", name=name):
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = head(embed(batch["input_ids"]).mean(dim=1))
            loss = torch.nn.functional.cross_entropy(logits, batch["labels"])
            loss.backward()
            opt.step()
            opt.zero_grad()
            if name == "item_every_step":
                losses.append(loss.item())
            elif name == "step_closure":
                xm.add_step_closure(log_loss, args=(loss,))
            torch_xla.sync()


def _child(name: str, out: Path) -> None:
    # The name is passed in memory (fork), so argv is the same in every run file.
    train(name, out)


def main(argv: list[str]) -> int:
    out = HERE
    if "--out" in argv:
        k = argv.index("--out")
        if k + 1 >= len(argv):
            print("--out needs a folder", file=sys.stderr)
            return 2
        out = Path(argv[k + 1]).resolve()
        argv = argv[:k] + argv[k + 2:]
        out.mkdir(parents=True, exist_ok=True)
    names = argv or list(SAMPLES)
    unknown = [n for n in names if n not in SAMPLES]
    if unknown:
        print(f"unknown sample(s): {', '.join(unknown)}; known: {', '.join(SAMPLES)}", file=sys.stderr)
        return 2
    # Import once in the parent (slow part); no device exists yet, so forking is safe.
    import torch  # noqa: F401
    import torch_xla  # noqa: F401

    import xprof.recorder.watch  # noqa: F401

    ctx = mp.get_context("fork")
    start = time.time()
    failed = []
    pending = list(names)
    running: list[tuple[str, Any]] = []
    while pending or running:
        while pending and len(running) < 1:
            name = pending.pop(0)
            proc = ctx.Process(target=_child, args=(name, out), name=name)
            proc.start()
            running.append((name, proc))
        name, proc = running.pop(0)
        proc.join()
        if proc.exitcode != 0:
            failed.append(name)
        print(f"{name}: {'ok' if proc.exitcode == 0 else f'FAILED (exit {proc.exitcode})'}"
              f" -> {out / (name + '.json')}")
    print(f"recorded {len(names) - len(failed)} sample run(s) in {time.time() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
