"""Which barriers are the user's training steps (docs/diagnosis.md, "What counts as a step").

A barrier is where torch_xla cuts the graph; a *training step* is what the user counts.
The evidence, recorded per barrier: the optimizer steps since the previous barrier
(``o``, from ``torch.optim``'s global post hook, whatever drives it), grad mode at the
barrier (``ng``), modules in eval mode (``ev``: the last ``Module.train()``/``eval()``
call), backward passes since the previous barrier (``bw``), which API asked for the barrier
(``barrier``) and whether it ran a graph.

- A barrier that follows an optimizer step closes a training step (it runs the step's
  graph). Barriers after it that ran a graph with grad enabled and no optimizer step (the
  Trainer's logging, a checkpoint, the next micro-batch of gradient accumulation) belong to
  that same step: a barrier belongs to the step whose optimizer step precedes it. Graphs
  run before the first optimizer step belong to the first step.
- A barrier that ran a graph with no optimizer step and no backward pass, with grad
  disabled or the model in eval mode, is an eval step (a hand loop's ``torch.no_grad()``
  eval, the HF Trainer's ``evaluation_loop``, whose barrier is outside its ``no_grad``
  but after ``model.eval()``). A backward pass keeps a barrier in training (the next
  micro-batch of gradient accumulation, also with dropout turned off by ``model.eval()``).
- ``torch.compile``'s own syncs (``dynamo``) are never steps.
- A run with no optimizer step at all keeps the plain rule: every barrier that ran a
  graph is a step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PHASES = ("train", "eval", "dynamo", "empty")


def assign(steps: pd.DataFrame) -> None:
    """Add ``phase``, ``ordinal`` (training-step index, -1 outside training steps) and
    ``seq`` (index among barriers that ran a graph) to the step table, in place."""
    n = len(steps)
    work = steps["work"].to_numpy(dtype=bool)
    kinds = steps["barrier"].tolist()
    dynamo = np.asarray([k == "dynamo" for k in kinds], dtype=bool) if n else np.zeros(0, dtype=bool)
    steps["seq"] = np.where(work, np.cumsum(work) - 1, -1) if n else np.zeros(0, dtype=np.int64)
    opt = steps["opt"].to_numpy(dtype=np.int64) if "opt" in steps else np.zeros(n, dtype=np.int64)
    nograd = steps["nograd"].to_numpy(dtype=bool) if "nograd" in steps else np.zeros(n, dtype=bool)
    if "eval_mode" in steps:
        backward = steps["backward"].to_numpy(dtype=np.int64) > 0
        nograd = (nograd | steps["eval_mode"].to_numpy(dtype=bool)) & ~backward
    phase = np.full(n, "empty", dtype=object)
    ordinal = np.full(n, -1, dtype=np.int64)
    if not opt.any():
        counted = work & ~dynamo
        phase[counted] = "train"
        phase[dynamo] = "dynamo"
        ordinal[counted] = np.cumsum(counted)[counted] - 1
    else:
        k = -1
        pending: list[int] = []
        for r in range(n):
            if dynamo[r]:
                phase[r] = "dynamo"
            elif opt[r] > 0:
                k += 1
                phase[r] = "train"
                ordinal[r] = k
                for p in pending:  # graphs run before the first optimizer step
                    phase[p] = "train"
                    ordinal[p] = k
                pending = []
            elif not work[r]:
                phase[r] = "empty"
            elif nograd[r]:
                phase[r] = "eval"
            elif k < 0:
                pending.append(r)
            else:
                # After an optimizer step and before the next: its logging, a checkpoint,
                # the next micro-batch. It belongs to the step whose optimizer step precedes it.
                phase[r] = "train"
                ordinal[r] = k
    steps["phase"] = phase
    steps["ordinal"] = ordinal
    # The training step a barrier is reported under: its own; for eval, dynamo and empty
    # barriers, the last training step before them.
    user = np.zeros(n, dtype=np.int64)
    last = 0
    for r in range(n):
        if ordinal[r] >= 0:
            last = int(ordinal[r])
            user[r] = last
        else:
            user[r] = last
    steps["user_step"] = user


def training_steps(steps: pd.DataFrame) -> int:
    ords = steps["ordinal"].to_numpy()
    return len(np.unique(ords[ords >= 0])) if len(ords) else 0


def eval_steps(steps: pd.DataFrame) -> int:
    return int((steps["phase"] == "eval").sum()) if len(steps) else 0


def eval_passes(steps: pd.DataFrame) -> int:
    """Eval passes: runs of eval barriers, with only empty barriers between them."""
    passes = 0
    inside = False
    for phase in steps["phase"].tolist():
        if phase == "eval":
            passes += not inside
            inside = True
        elif phase != "empty":
            inside = False
    return passes
