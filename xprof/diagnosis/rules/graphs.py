"""A graph that changed with the same inputs: state kept on the device, a graph that grows,
a model left in eval mode, an op run on its own, or nothing recorded to tell."""

from __future__ import annotations

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import EVAL_MODE_KEY, FindingKey
from xprof.diagnosis.rules.shapes import shape_cause


def no_host_input(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change`` with nothing from the host (no input signature): a graph size not seen
    before is a new graph; one seen before is the same ops on tensors kept on the device, with
    other shapes or constants (a KV cache, generated tokens, a Python number). With no size
    either: ``unknown``."""
    if step.sig_id is not None:
        return None
    nodes = c.nodes
    if nodes is not None and nodes not in walk.seen_nodes:
        return Cause("graph_change", FindingKey.graph(nodes), no_host="new",
                     evidence=f"a {nodes}-node graph not seen before (no input shapes recorded)")
    if nodes is not None:
        return Cause("graph_change", FindingKey.graph(nodes), no_host="same", evidence=(
            f"no input came from the host in this step, and a graph of the same size ({nodes} nodes) "
            "ran before: the same ops on tensors kept on the device, with other shapes or constants"))
    return Cause("unknown", FindingKey("unknown", "noinputs"), evidence=(
        "no step inputs were recorded, and no graph size either"))


def _first_nodes(sizes: list[int]) -> str:
    return ", ".join(str(n) for n in sizes[:6]) + (" ..." if len(sizes) > 6 else "")


def larger_graph(c: CompileFacts, step: StepFacts, walk: Walk) -> bool:
    """Live: a graph larger than the training graph, from inputs seen before (it may be one of
    a run of graphs that grow, which only more steps tell)."""
    return (c.nodes is not None and bool(walk.train_nodes) and c.nodes > (walk.train_nodes or 0)
            and step.sig_id is not None and step.sig_id in walk.seen_sigs)


def grows(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change``/``grows`` (whole run): larger each time, from the same inputs, at least
    three times: something kept from step to step grows in the graph (a Python list of device
    tensors, appended to every step and stacked at a read)."""
    if walk.whole is None or c.nodes is None:
        return None
    sizes = walk.whole.grown.get((step.i, c.nodes))
    if sizes is None:
        return None
    return Cause("graph_change", FindingKey("grows"), evidence=(
        f"same input shapes each time, and a graph larger each time it changed: {_first_nodes(sizes)} "
        f"nodes, against the training step's {walk.train_nodes}"))


def eval_mode_left_on(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change``/``eval_mode``: same input shapes, but this training step (a backward
    pass and an optimizer step) ran with the model in eval mode, which earlier ones did not
    (and grad was on at its barrier: with grad off, an evaluation began before the step's
    barrier, :func:`~xprof.diagnosis.rules.passes.step_cut_by_pass`)."""
    first = walk.first_in_train_mode
    if not (step.eval_mode and not step.pass_began and first is not None and step.i > first):
        return None
    return Cause("graph_change", EVAL_MODE_KEY, evidence=(
        "same input shapes as an earlier step, but this training step (a backward pass and an "
        "optimizer step) ran with the model in eval mode, which earlier training steps did not"))


def graph_change(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change``: same input shapes and reads as an earlier step, different graph:
    control flow that depends on the step, a Python scalar baked in as a constant."""
    return Cause("graph_change", FindingKey.graph(c.nodes), evidence=(
        "same input shapes as an earlier step, different graph"
        + (f" ({c.nodes} nodes)" if c.nodes is not None else "")))


def unknown_mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``unknown``: compiled mid-step outside any recorded host read, and nothing else explains it."""
    return Cause("unknown", FindingKey("unknown", "step"), evidence="compiled mid-step outside any recorded host read")


def eager_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """An op run on its own (eager mode) compiled after warm-up: for inputs of a new shape (the
    step's, or, at torch_xla.compile's entry, the call's: whole run), the shape's; else an op
    that ran for the first time (a logging op, a metric), compiled once and cached after."""
    sig_id = step.sig_id
    if sig_id is None and walk.whole is not None:
        sig_id = walk.whole.entry_sig.get(step.i)
    if sig_id is not None and sig_id not in walk.seen_sigs and walk.sigs.get(sig_id):
        return shape_cause(sig_id, walk)
    return Cause("graph_change", FindingKey("eager_ops"), evidence=(
        "an op run on its own (eager mode, outside the compiled step) compiled the first time it ran "
        "with these shapes"))
