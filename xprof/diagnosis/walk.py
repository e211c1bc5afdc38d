"""The walk over steps: warm-up first, then the registry's rules in order, one cause per compile.

Both sides walk the same way: the analysis over its step table (the steps that can change
what the walk remembers), the live notices over the records as they come. For each step,
:func:`judge` gives its compiles' causes, then :func:`advance` adds the step to the walk.
"""

from __future__ import annotations

from collections.abc import Sequence

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import ABSTAIN_KEY, WARMUP_KEY
from xprof.diagnosis.mechanisms import join_dd
from xprof.diagnosis.registry import AT_BARRIER, RULES
from xprof.diagnosis.terms import is_warmup


def in_warmup(step: StepFacts) -> bool:
    """The step's compiles are warm-up's (:data:`~xprof.diagnosis.terms.WARMUP_STEPS`): those of
    the first two training steps, and of the empty barriers between them; and, for barriers
    that run no training step (torch.compile's own syncs while it traces, a rollout's or an
    evaluation's forward-only barriers), those before the second training step's barrier:
    they belong to the step they lead to."""
    if step.phase in ("train", "empty"):
        return is_warmup(step.user_step)
    return step.phase in ("dynamo", "eval") and is_warmup(step.ahead)


def judge(compiles: Sequence[CompileFacts], step: StepFacts, walk: Walk) -> list[Cause]:
    """The cause of each of ``compiles`` (the step's, in order), from what the walk has seen."""
    step.new_fallback = frozenset(step.fallback - walk.seen_fallback)
    step.compiled = any(c.at == "barrier" for c in compiles)
    join_dd(walk.dd_leaders, step.dd_sites)
    # Every compile of the first two training steps is warm-up's, host reads' included (one
    # definition for the walk, the totals and the exit lines): a read whose graph grows from
    # read to read in those steps (an episode acted out step by step) is told by its finding's
    # evidence, and its compiles after warm-up are its recompiles.
    warm = in_warmup(step)
    out = [Cause(CauseName.WARMUP, WARMUP_KEY, rule="warmup") if warm else decide(c, step, walk) for c in compiles]
    if walk.shape_key is None:
        walk.shape_key = next((k.key for k in out if k.cause == CauseName.INPUT_SHAPE and k.key.group == "input"), None)
    return out


def decide(c: CompileFacts, step: StepFacts, walk: Walk, past: str = "") -> Cause:
    """The first rule, in the registry's order, that answers for ``c``; live, a rule that needs
    the whole run and may apply makes it ``abstain`` (no notice). ``past``: judge as if the
    rule of that name had not applied (the live side's second opinion while it waits)."""
    for rule in RULES.get(c.at, AT_BARRIER):
        if rule.name == past:
            continue
        if rule.whole_run and walk.whole is None:
            if rule.maybe is not None and rule.maybe(c, step, walk):
                return Cause(CauseName.ABSTAIN, ABSTAIN_KEY, rule=rule.name)
            continue
        found = rule.decide(c, step, walk)
        if found is not None:
            found.rule = found.rule or rule.name
            return found
    raise AssertionError(f"no rule answered for a compile at {c.at!r}")  # (each list ends in one that always does)


def advance(step: StepFacts, walk: Walk) -> None:
    """Add a step to what the walk remembers. Steady memory starts at step 1 (step 0's graph is
    a one-off); read sites and first signatures count from step 0."""
    sig_id = step.sig_id
    join_dd(walk.dd_leaders, step.dd_sites)
    if step.phase == "train":
        walk.seen_sites.update(step.sites)
        if step.work and sig_id is not None:
            walk.sig_step.setdefault(sig_id, step.i)
    if step.work and step.phase == "train" and step.ordinal >= 1 and not step.pass_began:
        if sig_id is not None and sig_id not in walk.seen_sigs:
            walk.seen_sigs.add(sig_id)
            if sig_id in walk.sigs:
                walk.seen_sig_list.append(walk.sigs[sig_id])
        walk.seen_keys.add((sig_id, step.sites))
        if sig_id is not None:
            walk.seen_roles.setdefault((sig_id, step.accumulates))
        if step.nodes is not None:
            walk.seen_nodes.add(step.nodes)
    if step.phase == "train" and step.work and sig_id is not None:
        walk.sig_runs.setdefault(sig_id, [0, int(step.compiled)])[0] += 1
    walk.seen_fallback.update(step.fallback)
    if sig_id is not None and step.traced:
        walk.dynamo_sigs.add(sig_id)
