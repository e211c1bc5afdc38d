"""Ops without an XLA lowering that ran on the CPU for the first time."""

from __future__ import annotations

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import ABSTAIN_KEY, FindingKey


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
        return Cause("abstain", ABSTAIN_KEY, rule="cpu_fallback")
    ops = ",".join(sorted(step.new_fallback))
    return Cause("cpu_fallback", FindingKey.fallback(step.new_fallback),
                 evidence=f"ops without an XLA lowering ran on the CPU for the first time: {ops}")


def mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``cpu_fallback``: compiled mid-step, outside any read, around ops that ran on the CPU."""
    if not step.new_fallback:
        return None
    ops = ",".join(sorted(step.new_fallback))
    return Cause("cpu_fallback", FindingKey.fallback(step.new_fallback),
                 evidence=f"compiled mid-step around ops that ran on the CPU: {ops}")
