"""``xprof demo``: a tiny text-model training loop with two real, common XLA problems.

It trains a small next-token model on the CPU through torch_xla (``PJRT_DEVICE=CPU``
unless the caller set a device) under :func:`xprof.watch`, so the report it makes is of
a real run with real compiles:

* the collate function pads every batch to its own longest sequence (what
  ``padding='longest'`` does), so each new batch length is a new graph to compile;
* it prints the loss tensor every few steps before the step barrier, which makes the
  device compile and run the forward pass early (an implicit host sync).

The data are seeded, so the run is the same every time: about 30 steps, 6-10 compiles,
a few seconds of compiling on a laptop CPU. Imports torch; only the ``demo`` command
and the tests import this module.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB = 64
DIM = 32
BATCH = 8
MIN_LEN, MAX_LEN = 4, 16
PAD, IGNORE = 0, -100
PRINT_EVERY = 10


@dataclass
class DemoResult:
    run_path: str
    steps: int
    seconds: float


class TinyLM(nn.Module):
    """Embedding, one hidden layer and a vocabulary head: the smallest model that still trains."""

    def __init__(self, vocab: int = VOCAB, dim: int = DIM) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.embed(input_ids) * attention_mask.unsqueeze(-1).to(torch.float32)
        return self.head(torch.tanh(self.mix(h)))


def make_sentences(n: int, seed: int = 0) -> list[torch.Tensor]:
    """``n`` token sequences of random length: the kind of data that makes padding vary."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(MIN_LEN, MAX_LEN + 1, (1,), generator=g))
        out.append(torch.randint(1, VOCAB, (length,), generator=g))
    return out


def pad_to_longest(batch: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Pad to the longest sequence of *this* batch: the shape changes from batch to batch."""
    longest = max(len(s) for s in batch)
    ids = torch.full((len(batch), longest), PAD, dtype=torch.long)
    mask = torch.zeros((len(batch), longest), dtype=torch.long)
    for row, seq in enumerate(batch):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    labels = ids.masked_fill(mask == 0, IGNORE)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def run_demo(run_path: str, steps: int = 30, seed: int = 0) -> DemoResult:
    """Train ``steps`` steps under ``xprof.watch(run_path)`` and return where the run is."""
    import torch_xla

    import xprof

    torch.manual_seed(seed)
    device = torch_xla.device()
    model = TinyLM().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = DataLoader(make_sentences(steps * BATCH, seed), batch_size=BATCH,
                        collate_fn=pad_to_longest, drop_last=True)

    start = time.perf_counter()
    done = 0
    with xprof.watch(run_path, name="demo"):
        for step, batch in enumerate(loader):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = model(batch["input_ids"], batch["attention_mask"])
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB),
                                   batch["labels"][:, 1:].reshape(-1), ignore_index=IGNORE)
            if step % PRINT_EVERY == 0:
                print(f"step {step:3d}  loss", loss)  # a host read in the middle of the step
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch_xla.sync()
            done += 1
    return DemoResult(run_path=run_path, steps=done, seconds=time.perf_counter() - start)
