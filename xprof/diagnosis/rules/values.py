"""Values that set shapes: ops whose output shape depends on data (``t[mask]``, ``nonzero``)
and device tensors read as slice bounds (``h[:, :n.max()]``)."""

from __future__ import annotations

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES


def _inputs_seen(step: StepFacts, walk: Walk) -> bool:
    return step.sig_id is None or step.sig_id in walk.seen_sigs


def inside_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: compiled inside an op whose output shape depends on values."""
    read = c.read
    if read is None or read.deferred or read.access not in DATA_DEPENDENT_ACCESSES:
        return None
    return Cause("data_dependent", FindingKey.sync(read.site), site=read.site,
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
    return Cause("data_dependent", FindingKey.sync(earlier[-1]), site=earlier[-1], evidence=(
        "compiled inside a later read of the step: an op with a value-dependent output "
        "shape ran before it, so the graph the read ran took a new shape"))


def barrier_after_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``data_dependent``: same input shapes as before, but an op with a value-dependent output
    shape ran in this step, so the tensors after it (and the barrier graph) took a new shape."""
    if not step.dd_sites or not _inputs_seen(step, walk):
        return None
    site = step.dd_sites[0]
    return Cause("data_dependent", FindingKey.sync(site), site=site, evidence=(
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
    return Cause("data_dependent", FindingKey.sync(site), site=site, evidence=(
        "same input shapes and graph size as an earlier step, but a device tensor read as a "
        "slice bound or index in this step set a shape from its value"))
