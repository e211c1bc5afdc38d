"""Input shapes and shardings: a step whose inputs no steady step had."""

from __future__ import annotations

from xprof.diagnosis.cause import FIRST_STEP_ONLY, Cause
from xprof.diagnosis.evidence import added_inputs, listed_inputs, micro_batch_change
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.signatures import closest, fmt_shape, no_sharding, shape_map
from xprof.runfile import base_input_name


def new_inputs(step: StepFacts, walk: Walk) -> bool:
    """The step's inputs are a signature no steady training step had."""
    return step.sig_id is not None and step.sig_id not in walk.seen_sigs


def joined_pass(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change`` (joined): the step's inputs plus others, every shape seen before, and a
    graph larger than the training step's: a pass with no barrier of its own (an evaluation
    moving its batches) left its ops and inputs pending, and this barrier ran them with the
    step. More micro-batches of the step's own inputs (x#3) are a longer window instead."""
    if not new_inputs(step, walk):
        return None
    sig = walk.sigs.get(step.sig_id or 0, ())
    walk.known_sigs.catch_up(walk.seen_sig_list)
    extra = added_inputs(sig, walk.seen_sig_list, walk.known_sigs)
    nodes, train_nodes = c.nodes, walk.train_nodes
    if not (extra and nodes is not None and train_nodes and nodes > train_nodes
            and micro_batch_change(sig, walk.seen_sig_list, walk.known_sigs) is None):
        return None
    copies = f" ({len(extra)} tensors)" if len(extra) > len(set(map(base_input_name, extra))) else ""
    return Cause("graph_change", FindingKey("joined"), evidence=(
        f"this step's graph also took {listed_inputs(extra)}{copies}, inputs no training step had, and had "
        f"{nodes} nodes against the training step's {train_nodes}: another pass's ops, with no barrier "
        "of their own, ran in it"))


def input_shape(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``input_shape`` / ``input_sharding``: the step's input signature was never seen in a
    steady training step (see :func:`shape_cause`)."""
    if not new_inputs(step, walk):
        return None
    return shape_cause(step.sig_id or 0, walk)


def new_inputs_mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """Outside any read, in a step whose inputs are new: a graph cut mid-step (by an op on the
    CPU: a CTC loss and its backward cut each step in three) compiles for the new shape like
    the barrier's does."""
    if new_inputs(step, walk) and walk.sigs.get(step.sig_id or 0):
        return shape_cause(step.sig_id or 0, walk)
    return None


def shape_cause(sig_id: int, walk: Walk) -> Cause:
    """The input whose shape is new in this step's signature (or, under SPMD, whose sharding
    is new while every shape was seen before)."""
    if walk.specs:
        found = _sharding_cause(sig_id, walk)
        if found is not None:
            return found
    sig = walk.sigs.get(sig_id, ())
    walk.known_sigs.catch_up(walk.seen_sig_list)
    micro = micro_batch_change(sig, walk.seen_sig_list, walk.known_sigs)
    if micro is not None:
        # Every shape seen before, another number of micro-batches (x#3 is x again).
        before, now, base = micro
        return Cause("input_shape", FindingKey("micro", base), input=base, old=(before,), new=(now,),
                     evidence=f"the step ran {now} micro-batch{'es' if now != 1 else ''} ({base} x{now}) where an "
                              f"earlier one ran {before}, every shape seen before")
    prev, name, dim, old, new = closest(sig, walk.seen_sig_list, walk.known_sigs)
    first_only = sig_id in walk.sig_step and sig_id not in walk.seen_sigs
    if name is not None:
        return _changed(name, dim, old, new, first_only)
    nearest = shape_map(prev) if prev is not None else {}
    gone = [n for n in nearest if n not in {n for n, _, _, _ in sig}]
    if gone:
        # No input new or of another shape: one the nearest signature had is gone.
        base = base_input_name(gone[0])
        said = f"{gone[0]} ({fmt_shape(nearest[gone[0]])} before) is missing from this step's inputs"
        return Cause("input_shape", FindingKey.input(base), input=base, old=nearest[gone[0]],
                     evidence=said + (FIRST_STEP_ONLY if first_only else ""), first_step_only=first_only)
    if prev is None:
        # Only step 0 had inputs before: the shape is new to the steady-state graph.
        first = sig[0] if sig else None
        return Cause("input_shape", FindingKey.input(first[0] if first else None),
                     input=first[0] if first else None, new=first[1] if first else None,
                     evidence="input shapes first seen at the one-off first step")
    return Cause("input_shape", FindingKey.input(None), evidence="a new input signature")


def _changed(name: str, dim: int | None, old: tuple[int, ...] | None, new: tuple[int, ...] | None,
             first_only: bool) -> Cause:
    # ``input_ids#2`` is the same input in the next micro-batch of the step: one finding.
    base = base_input_name(name)
    said = (f"{name} changed shape {fmt_shape(old)} -> {fmt_shape(new)}" if old is not None and new is not None
            else f"{name} {fmt_shape(new)} is an input no earlier step had" if new is not None
            else f"{name} ({fmt_shape(old)} before) is missing from this step's inputs" if old is not None
            else f"{name} appears or goes in this step's inputs")
    if first_only:
        said += FIRST_STEP_ONLY
    return Cause("input_shape", FindingKey.input(base), input=base, dim=dim, old=old, new=new, evidence=said,
                 first_step_only=first_only)


def _sharding_cause(sig_id: int, walk: Walk) -> Cause | None:
    """``input_sharding`` when an earlier signature had exactly these inputs and shapes but
    sharded at least one of them another way (the first such signature seen)."""
    now = walk.specs.get(sig_id)
    sig = walk.sigs.get(sig_id)
    if not now or sig is None:
        return None
    earlier = sorted((walk.sig_step.get(p, -1), p) for p in walk.same_shapes.get(sig, ())
                     if p != sig_id and p in walk.seen_sigs)
    for step, prev in earlier:
        before = walk.specs.get(prev, {})
        changed = [(name, before[name], spec) for name, spec in now.items()
                   if name in before and before[name] != spec]
        if not changed:
            continue
        # A loader's batch names its inputs best, then a compiled function's parameters.
        order = {name: (0 if src in ("batch", "loader", "arg") else 1) for name, _, _, src in sig}
        changed.sort(key=lambda c: order.get(c[0], 1))
        name, old, new = changed[0]
        base = base_input_name(name)
        others = [n for n, _, _ in changed[1:]]
        also = f" (and {', '.join(others[:4])}{' ...' if len(others) > 4 else ''})" if others else ""
        return Cause("input_sharding", FindingKey.sharding(base), input=base, sharding=(old, new), earlier=step,
                     evidence=f"{name}{also} sharded {no_sharding(new)}, at step {step} {no_sharding(old)}; "
                              "same shapes")
    return None
