"""``split_step``: a training step cut by more than one barrier that ran a graph.

``torch_xla.sync()`` after ``loss.backward()`` and again after ``optimizer.step()`` runs each
step as two graphs: one more execution a step (its inputs and outputs moved through device
memory between them), and one more graph to compile in warm-up. Information, not a problem:
a sync in the middle of a step can be deliberate (to bound a graph's size), and a library's
own barrier (a Trainer's loader) is not the user's to remove.

The evidence: in a steady training step (past warm-up) two or more barriers ran a graph, and
the last of them took no input from the host (it ran the rest of the step on tensors already
on the device). A step whose every barrier takes its own inputs is a window of micro-batches
(gradient accumulation), which is not this. It needs the whole run (most steady steps split
alike), so the live notices leave it to the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.unit import CauseUnit

SPLIT_SHARE = 0.8
"""Share of the steady training steps that must be split alike for the finding."""

MIN_STEPS = 3
"""Steady training steps a run needs before a split is a pattern."""


class Barrier(NamedTuple):
    """A barrier that ran a graph in a training step."""

    step: int
    """The training step it belongs to."""
    site: int | None
    """Where it was asked for (None: not recorded)."""
    took_inputs: bool
    """Inputs came from the host for its graph (an input signature)."""
    graphs: int
    """Graphs it ran (compiled or cached)."""
    compiles: int
    """Of those, compiled (uncached)."""


class SplitStep(NamedTuple):
    """What the finding says."""

    graphs: int
    """Graphs each split step runs at its barriers (the most common count)."""
    cut_sites: tuple[int | None, ...]
    """Where the barriers that cut the steps were asked for, in step order (not the last)."""
    steps: list[int]
    """The split training steps."""
    steady: int
    """Steady training steps in the run."""
    extra_executions: int
    """Executions beyond one a step, over the split steps."""
    warmup_compiles: int
    """Graphs compiled at the cutting barriers in warm-up."""


def split_steps(barriers: Sequence[Barrier], warmup_steps: int) -> SplitStep | None:
    """The split-step finding of a run, from its training barriers in order (None: the steps
    are not split, or not in most steady steps)."""
    by_step: dict[int, list[Barrier]] = {}
    for b in barriers:
        by_step.setdefault(b.step, []).append(b)
    steady = [k for k in by_step if k >= warmup_steps]
    split = {k: by_step[k] for k in steady if _split(by_step[k])}
    if len(steady) < MIN_STEPS or len(split) < SPLIT_SHARE * len(steady):
        return None
    counts = [sum(b.graphs for b in bs) for bs in split.values()]
    graphs = max(set(counts), key=counts.count)
    # (a barrier's site is recorded when it compiled: the warm-up steps' name the cached ones)
    known: dict[int, int] = {}
    for bs in by_step.values():
        for k, b in enumerate(bs[:-1]):
            if b.site is not None:
                known.setdefault(k, b.site)
    cut = tuple(dict.fromkeys(b.site if b.site is not None else known.get(k)
                              for bs in split.values() for k, b in enumerate(bs[:-1])))
    warm_cut = sum(b.compiles for k, bs in by_step.items() if k < warmup_steps and _split(bs) for b in bs[:-1])
    return SplitStep(graphs=graphs, cut_sites=cut, steps=sorted(split), steady=len(steady),
                     extra_executions=sum(c - 1 for c in counts), warmup_compiles=warm_cut)


def _split(barriers: list[Barrier]) -> bool:
    return len(barriers) >= 2 and not barriers[-1].took_inputs


ADVICE = ("Each step runs as several graphs because a barrier (torch_xla.sync(), xm.mark_step()) cuts it before "
          "its end. Unless you want the step bounded there (a graph too large to compile at once), drop the "
          "barrier inside the step and keep the one that ends it: one execution a step, and one graph fewer to "
          "compile. A barrier a library asks for itself (a loader, a Trainer) is not yours to move.")


def describe(found: SplitStep, where: Sequence[str]) -> tuple[str, list[str]]:
    """The finding's title and evidence; ``where``: each cutting barrier's line, as said."""
    lines = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
    barrier = "barrier" if len(where) == 1 else "barriers"
    title = (f"Each training step runs {found.graphs} graphs, cut by the {barrier} at {lines}: "
             f"{found.extra_executions} extra executions in {len(found.steps)} steps")
    evidence = [f"{len(found.steps)} of {found.steady} steady training steps ran {found.graphs} graphs at their "
                "barriers; the last barrier of each took no input from the host (the rest of the step)",
                f"{found.warmup_compiles} of the warm-up compiles were the cut-off parts' own graphs"]
    return title, evidence


SPLIT_STEP = CauseUnit(
    CauseName.SPLIT_STEP, label='split step', colour='#5c940d',
    means=('a steady training step cut by more than one barrier that ran a graph, the last taking no input from '
        'the host: one more execution a step, and one more graph in warm-up (information)'),
    fix=("one barrier at the end of the step, unless the cut bounds a graph's size on purpose"),
    fix_safety=('Removing a barrier inside a step runs the same ops in fewer graphs: the same results (a barrier that '
        "bounds a graph's size may be there for memory)."),
    advice={"split_step": ADVICE},
    finding_only=True,
)
