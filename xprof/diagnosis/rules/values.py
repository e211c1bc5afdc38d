"""Values that set shapes: ops whose output shape depends on data (``t[mask]``, ``nonzero``)
and device tensors read as slice bounds (``h[:, :n.max()]``)."""

from __future__ import annotations

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.notices import where
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES
from xprof.diagnosis.unit import CauseUnit


def _inputs_seen(step: StepFacts, walk: Walk) -> bool:
    return step.sig_id is None or step.sig_id in walk.seen_sigs


def inside_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: compiled inside an op whose output shape depends on values."""
    read = c.read
    if read is None or read.deferred or read.access not in DATA_DEPENDENT_ACCESSES:
        return None
    return Cause(CauseName.DATA_DEPENDENT, FindingKey.sync(read.site), site=read.site,
                 evidence="compiled inside an op whose output shape depends on values")


def read_after_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: the same read, the same inputs, compiling again after an op with a
    value-dependent output shape earlier in the step (``.item()`` of ``acc[labels != -100].mean()``):
    the graph it ran took that op's new shape. Removing the read would not remove it."""
    read = c.read
    if (read is None or read.deferred or read.site not in walk.seen_sites or not step.dd_sites
            or not _inputs_seen(step, walk)):
        return None
    earlier = [r.site for r in step.reads if r.t1 <= read.t0 and r.site in step.dd_sites]
    if not earlier:
        return None
    return Cause(CauseName.DATA_DEPENDENT, FindingKey.sync(earlier[-1]), site=earlier[-1], evidence=(
        "compiled inside a later read of the step: an op with a value-dependent output "
        "shape ran before it, so the graph the read ran took a new shape"))


def barrier_after_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: same input shapes as before, but an op with a value-dependent output
    shape ran in this step, so the tensors after it (and the barrier graph) took a new shape."""
    if not step.dd_sites or not _inputs_seen(step, walk):
        return None
    site = step.dd_sites[0]
    return Cause(CauseName.DATA_DEPENDENT, FindingKey.sync(site), site=site, evidence=(
        "same input shapes as before, but an op with a value-dependent output shape ran in "
        "this step, so the tensors after it (and the barrier graph) took a new shape"))


def slice_bound(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: the same inputs and a graph of about a size seen before (the same ops,
    other shapes: a slice to the full length is one node less), in a step that read a device
    tensor as a slice bound: its value set a shape (``t[:, :n.max()]``)."""
    nodes = c.nodes
    if not (step.index_sites and step.sig_id is not None and step.sig_id in walk.seen_sigs and nodes is not None
            and any(abs(nodes - n) <= max(2, n // 20) for n in walk.seen_nodes)):
        return None
    site = step.index_sites[0]
    return Cause(CauseName.DATA_DEPENDENT, FindingKey.sync(site), site=site, evidence=(
        "same input shapes and graph size as an earlier step, but a device tensor read as a "
        "slice bound or index in this step set a shape from its value"))


def value_notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
    site = walk.sites.get(cause.site if cause.site is not None else -1)
    if site is not None and site.access == "index":
        return f"a tensor used as a slice bound at {where(site)} set a new shape from its value"
    return f"an op with a value-dependent shape at {where(site)} gave the graph a new shape"


DATA_DEPENDENT_ADVICE: dict[str, str] = {
    "data_dependent": (
        "Keep shapes static: an op whose output size depends on the values (boolean-mask "
        "indexing t[mask], nonzero, masked_select, unique) runs on the CPU and gives a new shape "
        "whenever the count changes. Compute over every row and let the mask weigh them instead: "
        "multiply by the mask (a loss over real tokens: the per-token loss times the mask over "
        "mask.sum(), or cross_entropy(..., ignore_index=-100) with labels set by "
        "torch.where(mask, labels, -100); experts in a mixture: run each on every token and "
        "weigh by its routing mask, or give it a fixed capacity of tokens, which drops the tokens past it and "
        "so changes what the model computes)."
    ),
    "mask_assign": (
        "t[mask] = v with a boolean mask finds the positions with nonzero() on the CPU: the "
        "pending graph runs first, and the graph after it changes whenever the count does. "
        "Write it without a shape that depends on the values: t = torch.where(mask, v, t), or "
        "t.masked_fill_(mask, v) for a scalar v; both keep every shape static."
    ),
    "value_shape": (
        "Keep shapes static: slice to the fixed padded length and mask the padding instead of "
        "trimming to a length read from the device, or round that length up to a few sizes "
        "(a multiple of 8 or 16) so only a few graphs are ever compiled."
    ),
}
"""What to change, per kind of its findings."""


DATA_DEPENDENT = CauseUnit(
    CauseName.DATA_DEPENDENT, label='data-dependent shape', colour='#d6336c',
    means=('an op with a value-dependent output shape (`t[mask]`, `t[mask] = v`, `nonzero`, `masked_select`, '
        '`unique`) ran on the CPU mid-step and gave the graph a new shape; such ops in the same steps are one '
        'finding naming every line'),
    fix=('keep shapes static: `ignore_index=-100` with `torch.where(mask, labels, -100)`, or multiply by the '
        'mask (experts of a mixture: run each on every token and weigh by its routing mask, or a fixed '
        'capacity); `torch.where(mask, v, t)` / `masked_fill_` for an assignment'),
    fix_safety=('torch.where or a multiplication by the mask keeps every element: the loss is the same when masked '
        "elements weigh zero and the mean divides by the mask's count; a fixed expert capacity drops the "
        'tokens past it, which changes the result.'),
    advice=DATA_DEPENDENT_ADVICE,
    notice=value_notice,
    explained=True,
)
