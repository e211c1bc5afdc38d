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

from xprof.diagnosis.phases import is_eval, leads_to_next_update

PHASES = ("train", "eval", "dynamo", "empty")


def phase_is(steps: pd.DataFrame, name: str) -> np.ndarray:
    """A boolean mask of the barriers in phase ``name`` (one of :data:`PHASES`). The column's
    object array is compared, not the pandas column: pandas 3's ``str`` comparison takes
    0.36 ms a 10k barriers where this takes 0.1, and analyses ask a dozen times."""
    if "phase" not in steps or not len(steps):
        return np.zeros(len(steps), dtype=bool)
    return np.asarray(steps["phase"].to_numpy(dtype=object) == name, dtype=bool)


def assign(steps: pd.DataFrame) -> None:
    """Add ``phase``, ``ordinal`` (training-step index, -1 outside training steps) and
    ``seq`` (index among barriers that ran a graph) to the step table, in place."""
    n = len(steps)
    work = steps["work"].to_numpy(dtype=bool)
    dynamo = steps["barrier"].to_numpy(dtype=object) == "dynamo" if n else np.zeros(0, dtype=bool)
    steps["seq"] = np.where(work, np.cumsum(work) - 1, -1) if n else np.zeros(0, dtype=np.int64)
    opt = steps["opt"].to_numpy(dtype=np.int64) if "opt" in steps else np.zeros(n, dtype=np.int64)
    nograd = steps["nograd"].to_numpy(dtype=bool) if "nograd" in steps else np.zeros(n, dtype=bool)
    backward = steps["backward"].to_numpy(dtype=np.int64) > 0 if "backward" in steps else None
    # (files recorded before backward passes were counted: grad mode alone tells eval)
    bw = backward if backward is not None else np.zeros(n, dtype=bool)
    eval_mode = (steps["eval_mode"].to_numpy(dtype=bool) if "eval_mode" in steps and backward is not None
                 else np.zeros(n, dtype=bool))
    ev = is_eval(work, nograd, eval_mode, bw, opt > 0, dynamo, bool(opt.any()))
    phase = np.empty(n, dtype=object)
    phase.fill("empty")  # (np.full of a str into objects takes 0.3 ms a 10k steps, fill 0.02)
    ordinal = np.full(n, -1, dtype=np.int64)
    if not opt.any():
        counted = work & ~dynamo
        phase[counted] = "train"
        phase[dynamo] = "dynamo"
        ordinal[counted] = np.cumsum(counted)[counted] - 1
    else:
        # Column by column (a long run has a million barriers): the barrier of optimizer
        # step k is training step k's. A graph barrier between two of them with grad on is
        # a micro-batch of the next one when it ran a backward pass (its gradients feed that
        # update; the last window's, never completed, stays with the last step), else the
        # previous step's logging or checkpoint; those before the first optimizer step are
        # step 0's. Grad off and no optimizer step is eval.
        is_opt = (opt > 0) & ~dynamo
        k = np.cumsum(is_opt) - 1
        other = ~dynamo & ~is_opt & work
        phase[dynamo] = "dynamo"
        phase[is_opt] = "train"
        ordinal[is_opt] = k[is_opt]
        phase[ev] = "eval"
        belongs = other & ~ev & ((k >= 0) | is_opt.any())
        phase[belongs] = "train"
        own = np.maximum(k, 0)
        # torch_xla.compile's entry sync, like a micro-batch's backward, leads to the next
        # update: what ran since the last call (inputs moved, ops run eagerly on them) is the
        # next call's.
        entry = steps["barrier"].to_numpy(dtype=object) == "compile_entry" if n else np.zeros(0, dtype=bool)
        ahead = leads_to_next_update(bw, entry)
        own = np.where(ahead & (k + 1 < int(is_opt.sum())), k + 1, own)
        ordinal[belongs] = own[belongs]
        # A short no-grad pass before (nearly) every update, with a barrier of its own (a
        # teacher's forward for distillation, a target network): part of the training step it
        # leads to, not an evaluation run every step.
        ev = phase == "eval"  # (after the micro-batches: eval barriers only)
        n_opt = int(is_opt.sum())
        if ev.any() and n_opt >= 3:
            n_pass = int((ev & ~np.concatenate(([False], ev[:-1]))).sum())
            if n_pass >= 0.8 * n_opt and int(ev.sum()) <= 2 * n_pass:
                phase[ev] = "train"
                ordinal[ev] = np.where(k + 1 < n_opt, k + 1, own)[ev]
    steps["phase"] = phase
    steps["ordinal"] = ordinal
    # The training step a barrier is reported under: its own; for eval, dynamo and empty
    # barriers, the last training step before them.
    # (the ordinal of the last row with one, 0 before any: a forward fill)
    last_row = np.maximum.accumulate(np.where(ordinal >= 0, np.arange(n), -1)) if n else np.zeros(0, dtype=np.int64)
    steps["user_step"] = np.where(last_row >= 0, ordinal[np.clip(last_row, 0, None)], 0).astype(np.int64)


def is_inference(steps: pd.DataFrame) -> bool:
    """No optimizer step, no backward pass, and grad off (or the model in eval mode) at every
    barrier that ran a graph: an inference run. (Files recorded before xprof saw backward
    passes have none, but their training barriers ran with grad on.)"""
    if not len(steps) or "work" not in steps or "nograd" not in steps:
        return False
    work = steps["work"].astype(bool).to_numpy()
    if not work.any() or ("opt" in steps and bool((steps["opt"].to_numpy()[work] > 0).any())):
        return False
    if "backward" in steps and bool((steps["backward"].fillna(0).to_numpy()[work] > 0).any()):
        return False
    quiet = steps["nograd"].astype(bool).to_numpy()[work]
    if "eval_mode" in steps:
        quiet = quiet | steps["eval_mode"].astype(bool).to_numpy()[work]
    return bool(quiet.all())


def training_steps(steps: pd.DataFrame) -> int:
    ords = steps["ordinal"].to_numpy()
    ords = ords[ords >= 0]
    rises = np.diff(ords)
    if len(ords) and (rises >= 0).all():  # (in barrier order, as recorded: count the rises)
        return int((rises > 0).sum()) + 1
    return len(pd.unique(ords))  # (np.unique sorts: seconds at 1M steps)


def eval_steps(steps: pd.DataFrame) -> int:
    """Eval batches: the eval barriers that took a batch's inputs, when any did (an eval loop
    with two barriers a batch, accelerate's gather_for_metrics beside the loader's sync, is
    one step a batch); else every eval barrier that ran a graph."""
    if not len(steps):
        return 0
    is_eval = phase_is(steps, "eval")
    if "sig" in steps:
        fed = is_eval & steps["sig"].notna().to_numpy(dtype=bool)
        if fed.any():
            return int(fed.sum())
    return int(is_eval.sum())


def eval_pass_ids(steps: pd.DataFrame) -> np.ndarray:
    """Which eval pass each barrier is in (-1: none). A pass is a run of consecutive eval and
    empty barriers with at least one eval barrier: a training or dynamo barrier ends it.
    The one definition of a pass (counted in :func:`eval_passes`, owned in ``causes.py``,
    timed in ``findings/graphs.py``)."""
    phase = steps["phase"].to_numpy(dtype=object) if len(steps) else np.zeros(0, dtype=object)
    out = np.full(len(phase), -1, dtype=np.int64)
    is_eval = phase == "eval"
    if not is_eval.any():
        return out
    inside = is_eval | (phase == "empty")
    opens = inside & ~np.concatenate(([False], inside[:-1]))
    run = np.cumsum(opens) - 1
    with_eval = np.zeros(int(run.max()) + 1, dtype=bool)
    with_eval[run[is_eval]] = True
    keep = inside & with_eval[np.clip(run, 0, None)]
    out[keep] = np.searchsorted(np.flatnonzero(with_eval), run[keep])
    return out


def eval_passes(steps: pd.DataFrame) -> int:
    """How often the loop evaluated: the number of eval passes."""
    ids = eval_pass_ids(steps)
    return int(ids.max()) + 1 if len(ids) else 0


def training_barrier_sites(steps: pd.DataFrame) -> frozenset[int]:
    """Sites of barriers that ended training steps (where a compiling barrier was asked for):
    whoever asked for them runs the training loop (``trainer.train()``), even a library."""
    if "site" not in steps or not len(steps):
        return frozenset()
    site = steps["site"]
    keep = phase_is(steps, "train") & site.notna().to_numpy()
    return frozenset(pd.unique(site.to_numpy(dtype=np.int64, na_value=-1)[keep]).tolist())
