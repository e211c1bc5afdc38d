"""Ops without an XLA lowering that ran on the CPU for the first time."""

from __future__ import annotations

from collections.abc import Iterable

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import ABSTAIN_KEY, FindingKey
from xprof.diagnosis.notices import clean
from xprof.diagnosis.terms import DATA_DEPENDENT_FALLBACKS, WARMUP_STEPS
from xprof.diagnosis.unit import CauseUnit


def fallback_call(step: StepFacts, walk: Walk) -> tuple[str, str, int] | None:
    """The library call all of the step's new CPU-fallback ops belong to (they ran only in
    steps where that call read values: ``generate()``'s ``torch.isin``), if one. Needs the
    whole run."""
    if walk.whole is None or not step.new_fallback:
        return None
    calls = {walk.whole.fallback_calls.get(op) for op in step.new_fallback}
    return calls.pop() if len(calls) == 1 and None not in calls else None


def new_library_call(step: StepFacts, walk: Walk) -> bool:
    """A library call outside the training loop's own lines read values in this step, at sites
    no earlier step read from (``model.generate()`` run for the first time)."""
    return any((site := walk.sites.get(r.site)) is not None and site.via and r.site not in walk.seen_sites
               and (site.file, site.line) not in walk.loops for r in step.reads)


def at_barrier(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``cpu_fallback``: ops without an XLA lowering ran on the CPU for the first time in this
    step (and no library call new in the step owns them: that needs the whole run, so live a
    new library call in the step leaves the compile unsaid)."""
    if not step.new_fallback or fallback_call(step, walk) is not None:
        return None
    if walk.whole is None and new_library_call(step, walk):
        return Cause(CauseName.ABSTAIN, ABSTAIN_KEY, rule="cpu_fallback")
    ops = ",".join(sorted(step.new_fallback))
    return Cause(CauseName.CPU_FALLBACK, FindingKey.fallback(step.new_fallback),
                 evidence=f"ops without an XLA lowering ran on the CPU for the first time: {ops}")


def mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``cpu_fallback``: compiled mid-step, outside any read, around ops that ran on the CPU."""
    if not step.new_fallback:
        return None
    ops = ",".join(sorted(step.new_fallback))
    return Cause(CauseName.CPU_FALLBACK, FindingKey.fallback(step.new_fallback),
                 evidence=f"compiled mid-step around ops that ran on the CPU: {ops}")


def fallback_notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
    ops = ", ".join(clean(op, 60) for op in cause.key.ops)
    return f"{ops} ran on the CPU for the first time (no XLA lowering), cutting the step's graph there"



def uncompiled_notice(op: str, calls: int) -> str:
    """The live notice of an op without an XLA lowering in a steady step that compiled nothing for it."""
    return (f"{clean(op, 60)} has no XLA lowering and runs on the CPU "
            f"({calls} call{'s' if calls != 1 else ''} this step)")



def uncompiled_ops(step: StepFacts, walk: Walk, barrier_compiled: bool, call_ops: set[str]) -> list[str]:
    """The live side of an uncompiled CPU fallback: ops without an XLA lowering that ran in a
    steady training step which compiled nothing at its barrier. An op first seen with a library
    call's reads may be the call's (the analysis decides that from the whole run): it is added
    to ``call_ops`` and left out; a value-dependent op's is its own finding's."""
    if new_library_call(step, walk):
        call_ops.update(step.fallback)
    if step.phase != "train" or step.ordinal < WARMUP_STEPS or barrier_compiled:
        return []
    return sorted(step.fallback - call_ops - DATA_DEPENDENT_FALLBACKS)



def uncompiled(ran: Iterable[tuple[int, Iterable[str]]], covered: set[str], value_shapes: bool) -> Cause | None:
    """``cpu_fallback`` of the whole run: ops without an XLA lowering that ran in steady steps
    (``ran``: each step's training step and ops) though no compile's finding has them
    (``covered``; ``value_shapes``: a value-dependent shape's finding has the ops it runs on the
    CPU): each call still copies to the host and cuts the graph, so it is a finding of its own."""
    skip = covered | (DATA_DEPENDENT_FALLBACKS if value_shapes else frozenset())
    ops = {op for ordinal, found in ran if ordinal >= WARMUP_STEPS for op in found if op not in skip}
    if not ops:
        return None
    return Cause(CauseName.CPU_FALLBACK, FindingKey.fallback(ops), evidence=(
        f"ops without an XLA lowering ran on the CPU after warm-up: {', '.join(sorted(ops))}"))


CHECKED_REPLACEMENTS: dict[str, str] = {
    "aten::upsample_bilinear2d_backward": (
        "The backward of a bilinear F.interpolate / nn.Upsample has no XLA lowering in torch_xla 2.9, and "
        "neither has mode='nearest' or 'bicubic' (checked): no interpolation mode avoids it. F.pixel_shuffle "
        "and nn.ConvTranspose2d lower (checked), but they are other layers and change what the model "
        "computes; keep the bilinear upsample unless you retrain with one of them."),
    "aten::upsample_nearest2d_backward": (
        "For an integer scale s, x.repeat_interleave(s, dim=2).repeat_interleave(s, dim=3) computes the same "
        "values as F.interpolate(x, scale_factor=s, mode='nearest') and its backward lowers (checked on "
        "torch_xla 2.9): the same model, no CPU fallback."),
    "aten::upsample_bicubic2d_backward": (
        "The bicubic upsample and its backward have no XLA lowering in torch_xla 2.9, and neither have the "
        "bilinear or nearest modes' backwards (checked); changing the layer changes what the model computes."),
}
"""A fallen-back op -> what was checked to lower in its place on torch_xla 2.9, and whether it
computes the same values (advice that changes the model says so). Only replacements run here."""


def op_advice(ops: Iterable[str]) -> list[str]:
    """What was checked for these ops (:data:`CHECKED_REPLACEMENTS`), in the ops' order."""
    return [CHECKED_REPLACEMENTS[op] for op in ops if op in CHECKED_REPLACEMENTS]


FALLBACK_MECHANISM = ("These ops have no XLA lowering and run on the CPU, which cuts the graph and copies "
                      "data to the host.")
"""What a fallback does; the advice's first sentence, and all of it kept where the replacements
checked for the op (:data:`CHECKED_REPLACEMENTS`) are said instead of the generic change."""

CPU_FALLBACK_ADVICE: dict[str, str] = {
    "cpu_fallback": FALLBACK_MECHANISM + (" Replace them with ops XLA supports that compute the same thing "
                                          "(another op changes the model), or move them out of the step."),
}
"""What to change, per kind of its findings."""


CPU_FALLBACK = CauseUnit(
    CauseName.CPU_FALLBACK, label='CPU fallback', colour='#8d6e63',
    means=('ops without an XLA lowering (`aten::histc`, `aten::median`, `aten::_ctc_loss`...) ran on the CPU; '
        'one in most steps says how many graphs it makes each step run early (its copies are not timed: never '
        'folded away as minor)'),
    fix=('replace the op, or move it out of the step'),
    fix_safety=('An op replaced by one with an XLA lowering must compute the same values; moved out of the step, '
        'nothing changes.'),
    advice=CPU_FALLBACK_ADVICE,
    notice=fallback_notice,
)
