"""``value_op_counted``: a value-dependent op no hook saw, told by torch_xla's own counter.

What it does: finds a new graph, from the same inputs as a steady step, in a training step
where an op whose output shape depends on values ran on the CPU (its CPU-fallback counter:
``aten::nonzero``, ``aten::_unique2``, ...) though no hooked call made it (no ``nonzero``,
``t[mask]`` or ``masked_select`` site in the step). The one-argument ``torch.where(mask)``
is such a call: Mixtral-style routing, ``idx, top = torch.where(expert_mask[e])``, gives each
expert the positions of its tokens, a count that follows the router's values, so the
expert's slice of the batch, and the step's graph, take a new shape when it changes.

Why it matters: every new count is a new graph, and the op runs on the CPU, cutting the step
(its pending graph runs early). The count is the data's, so padding the inputs does not help.

Fix: keep the shapes static: run each expert on every token and weigh its output by its
routing weight (zero for the tokens it did not get), or give each expert a fixed capacity
(the top-k tokens by weight, padding slots masked out).

Fix safety: weighing every token by its routing weight computes the same output (the weights
of tokens routed elsewhere are zero) at the cost of the experts' work on every token; a fixed
capacity drops the tokens past it, which changes what the model computes.

Fixture: tests/corpus/loops/where_routing.py.
"""

from __future__ import annotations

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.notices import clean
from xprof.diagnosis.terms import DATA_DEPENDENT_FALLBACKS
from xprof.diagnosis.unit import Words

ADVICE = (
    "Keep the shapes static: the one-argument torch.where(mask) (like nonzero()) returns as many "
    "positions as the mask has, so each count is a new graph, and it runs on the CPU. For a mixture "
    "of experts, run each expert on every token and weigh its output by the routing weight "
    "(out += expert(x) * weights[:, e:e+1], the weights zero for tokens routed elsewhere), or give "
    "each expert a fixed capacity (torch.topk over its weights, padding slots masked out; a capacity drops the "
    "tokens past it, which changes what the model computes). "
    "Elsewhere, torch.where(mask, a, b) with three arguments keeps the shape.")


def counted(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: same inputs as a steady step, a new graph, and an op with a
    value-dependent output shape ran on the CPU in the step (its CPU-fallback counter) with no
    hooked call behind it (the one-argument ``torch.where(mask)``)."""
    ops = sorted(step.fallback & DATA_DEPENDENT_FALLBACKS)
    if not ops or step.dd_sites or step.sig_id is None or step.sig_id not in walk.seen_sigs:
        return None
    return Cause(CauseName.DATA_DEPENDENT, FindingKey.fallback(ops), evidence=(
        f"same input shapes as a steady step, but {', '.join(ops)} ran on the CPU in this step (a value-dependent "
        "output shape) with no hooked call behind it: the one-argument torch.where(mask), or another path to it"))


def finding(cause: Cause, compiles: int, seconds: float) -> Words:
    ops = " and ".join(cause.key.ops)
    title = (f"{ops} (the one-argument torch.where(mask)?) gives the step a value-dependent shape: "
             f"{compiles} recompile{'s' if compiles != 1 else ''}, {seconds:.2f} s")
    return Words("value_op_counted", title, [cause.evidence], ADVICE)


def notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
    ops = ", ".join(clean(op, 40) for op in cause.key.ops)
    return (f"{ops} ran on the CPU with a value-dependent shape (the one-argument torch.where(mask)?) and gave "
            "the graph a new shape")
