"""What a barrier is, told from its own record: one set of rules for both sides.

The analysis applies them to its step table's columns at once (numpy arrays,
:func:`xprof.analysis.steps.assign`), the live side to one barrier at a time (plain bools,
:meth:`xprof.diagnosis.online.RecordFacts.step_facts`); each rule is written with ``&``,
``|`` and ``^ True`` (not), which mean the same on both. docs/diagnosis.md, "What a step is",
says them in words.
"""

from __future__ import annotations

from typing import TypeVar

B = TypeVar("B")
"""A bool (one barrier) or a numpy array of them (a column)."""


def is_eval(work: B, nograd: B, eval_mode: B, backward: B, opt: B, dynamo: B, opt_seen: bool) -> B:
    """An eval barrier: it ran a graph, with grad off or the model in eval mode, and no backward
    pass or optimizer step since the barrier before, in a run that has optimizer steps (a run
    without any keeps every graph barrier a step); torch.compile's own syncs never are."""
    out = work & (nograd | eval_mode) & (backward ^ True) & (opt ^ True) & (dynamo ^ True)  # type: ignore[operator]
    return out & opt_seen  # type: ignore[no-any-return,operator]


def leads_to_next_update(backward: B, compile_entry: B) -> B:
    """A barrier that belongs to the optimizer step after it, not the one before: a micro-batch
    (its gradients feed the next update) or torch_xla.compile's entry sync (what ran since the
    last call, inputs moved and ops run eagerly on them, is the next call's)."""
    return backward | compile_entry  # type: ignore[no-any-return,operator]
