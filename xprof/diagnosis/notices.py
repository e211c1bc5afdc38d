"""What the live notices say of a cause: one clause per kind of cause, said once per finding.

The clause follows "step N recompiled: " and comes before the count so far. A cause that is
information in the report (warm-up, an eval pass's own graphs, a step closure's graph,
torch.compile's tracing, an op's first eager run, a known library's mechanism), or that the
live side cannot tell yet (``abstain``), says nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.evidence import is_condition
from xprof.diagnosis.facts import StepFacts, Walk
from xprof.diagnosis.keys import CUT_BY_PASS_KEY
from xprof.diagnosis.signatures import fmt_shape, no_sharding
from xprof.runfile import GraphChange, Site
from xprof.untrusted import visible

QUIET_KEYS = frozenset({"warmup", "abstain", "eval", "eager_ops", "closure", "dynamo", "unknown"})
"""Finding groups the live notices never name (information, or not known yet)."""


def clean(text: object, limit: int = 120) -> str:
    """Run-file text made safe for one terminal line: characters a terminal acts on shown as
    escapes, long text cut."""
    s = visible(str(text), one_line=True)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def where(site: Site | None) -> str:
    """``train.py:18`` (relative to the working folder when below it), with the caller's line
    when the read was made inside a function of the user's."""
    if site is None or not site.file or site.file == "?":
        return "?"
    out = _rel(site.file, site.line)
    if site.caller is not None and not site.via:
        out += f" (called from {_rel(site.caller[0], site.caller[1])})"
    return clean(out)


def _rel(file: str, line: int) -> str:
    try:
        rel = os.path.relpath(file)
    except ValueError:
        rel = file
    return f"{rel if not rel.startswith('..') else os.path.basename(file)}:{line}"


def _shape(cause: Cause, step: StepFacts, walk: Walk) -> str:
    name = clean(cause.input or "?", 60)
    if cause.key.group == "micro":
        return (f"the step ran {cause.new[0] if cause.new else '?'} micro-batches of {name} where an earlier one "
                f"ran {cause.old[0] if cause.old else '?'}")
    if cause.new is None and cause.old is not None:
        return f"{name} ({fmt_shape(cause.old)} before) is missing from its inputs"
    if cause.new is None:
        return "the input shapes changed"
    seen = ", which only the one-off first step had" if cause.first_step_only else " (first seen)"
    return f"{name} took shape {fmt_shape(cause.new)}{seen}"


def _sharding(cause: Cause, step: StepFacts, walk: Walk) -> str:
    old, new = cause.sharding or ("", "")
    return (f"{clean(cause.input or '?', 60)} sharded {clean(no_sharding(new), 60)} "
            f"(before: {clean(no_sharding(old), 60)}), same shapes")


def _graph(cause: Cause, step: StepFacts, walk: Walk) -> str:
    group = cause.key.group
    if cause.key == CUT_BY_PASS_KEY:
        return ("grad was off at this training step's barrier: an evaluation began before the step ended, and "
                "its first barrier ran the step's ops with its own (end the step with torch_xla.sync() first)")
    if group == "joined":
        inputs = clean(cause.evidence.split("also took ", 1)[-1].split(", inputs no", 1)[0], 80)
        return (f"another pass's ops and inputs ({inputs}), with no barrier of their own, ran in this training "
                "step's graph")
    if group == "grows":
        return "same input shapes, a graph larger each time it changed: something kept across steps grows in it"
    if cause.key.detail == "eval_mode":
        return ("it trains with the model in eval mode (model.eval() not undone: dropout off, batch-norm "
                "statistics frozen)")
    if cause.no_host:
        return ("nothing new came from the host, yet the graph is new: a tensor kept on the device changed shape "
                "(a cache grown with torch.cat?), the step used other tensors, or a Python number changed")
    cond = next((s for s in (walk.sites.get(r.site) for r in step.reads)
                 if s is not None and is_condition(s.access, s.code)), None)
    why = f"; the condition on a tensor at {where(cond)}, read in this step, picks its ops" if cond else ""
    return f"same input shapes, different graph{why}"


def _value(cause: Cause, step: StepFacts, walk: Walk) -> str:
    site = walk.sites.get(cause.site if cause.site is not None else -1)
    if site is not None and site.access == "index":
        return f"a tensor used as a slice bound at {where(site)} set a new shape from its value"
    return f"an op with a value-dependent shape at {where(site)} gave the graph a new shape"


def _fallback(cause: Cause, step: StepFacts, walk: Walk) -> str:
    ops = ", ".join(clean(op, 60) for op in cause.key.ops)
    return f"{ops} ran on the CPU for the first time (no XLA lowering), cutting the step's graph there"


def _read(cause: Cause, step: StepFacts, walk: Walk) -> str:
    site = walk.sites.get(cause.site if cause.site is not None else -1)
    what = f"{clean(site.via, 60)} at {where(site)}" if site is not None and site.via else f"the read at {where(site)}"
    return f"{what}, run in this step, took ops out of the barrier's graph"


CLAUSES: dict[str, Callable[[Cause, StepFacts, Walk], str]] = {
    "input_shape": _shape,
    "input_sharding": _sharding,
    "graph_change": _graph,
    "data_dependent": _value,
    "cpu_fallback": _fallback,
    "implicit_sync": _read,
}
"""Cause -> what a notice says of a barrier compile it caused."""


def clause(cause: Cause, step: StepFacts, walk: Walk) -> str | None:
    """What to say of a barrier compile's cause, or None to say nothing."""
    if cause.key.group in QUIET_KEYS or cause.cause == "library":
        return None
    say = CLAUSES.get(cause.cause)
    return say(cause, step, walk) if say is not None else None


EXPLAINED = frozenset({"graph_change", "data_dependent", "implicit_sync"})
"""Causes whose notice adds ``--explain``'s line when the step's new graph was compared."""


def graph_line(change: GraphChange | None) -> str | None:
    """``--explain``'s words for a new graph: ``at train.py:23 (loss = ... * warmup): an input
    became the constant 1``; None when it names no user line."""
    if change is None or not change.lines:
        return None
    c = change.lines[0]
    code = f" ({clean(c.code, 60)})" if c.code else ""
    return f"it changed at {clean(_rel(c.file, c.line), 80)}{code}: {clean(c.what, 80)}"
