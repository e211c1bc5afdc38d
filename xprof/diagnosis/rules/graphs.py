"""A graph that changed with the same inputs: state kept on the device, a graph that grows,
a model left in eval mode, an op run on its own, or nothing recorded to tell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.evidence import is_condition
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import CUT_BY_PASS_KEY, EVAL_MODE_KEY, FindingKey
from xprof.diagnosis.notices import clean, where
from xprof.diagnosis.rules.shapes import shape_cause
from xprof.diagnosis.terms import GROWING_GRAPHS
from xprof.diagnosis.unit import CauseUnit


def no_host_input(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change`` with nothing from the host (no input signature): a graph size not seen
    before is a new graph; one seen before is the same ops on tensors kept on the device, with
    other shapes or constants (a KV cache, generated tokens, a Python number). With no size
    either: ``unknown``."""
    if step.sig_id is not None:
        return None
    nodes = c.nodes
    if nodes is not None and nodes not in walk.seen_nodes:
        return Cause(CauseName.GRAPH_CHANGE, FindingKey.graph(nodes), no_host="new",
                     evidence=f"a {nodes}-node graph not seen before (no input shapes recorded)")
    if nodes is not None:
        return Cause(CauseName.GRAPH_CHANGE, FindingKey.graph(nodes), no_host="same", evidence=(
            f"no input came from the host in this step, and a graph of the same size ({nodes} nodes) "
            "ran before: the same ops on tensors kept on the device, with other shapes or constants"))
    return Cause(CauseName.UNKNOWN, FindingKey("unknown", "noinputs"), evidence=(
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
    return Cause(CauseName.GRAPH_CHANGE, FindingKey("grows"), evidence=(
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
    return Cause(CauseName.GRAPH_CHANGE, EVAL_MODE_KEY, evidence=(
        "same input shapes as an earlier step, but this training step (a backward pass and an "
        "optimizer step) ran with the model in eval mode, which earlier training steps did not"))


def graph_change(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change``: same input shapes and reads as an earlier step, different graph:
    control flow that depends on the step, a Python scalar baked in as a constant."""
    return Cause(CauseName.GRAPH_CHANGE, FindingKey.graph(c.nodes), evidence=(
        "same input shapes as an earlier step, different graph"
        + (f" ({c.nodes} nodes)" if c.nodes is not None else "")))


def second_of_kind(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``input_shape``: a new graph (same inputs as an earlier step) at the second training step
    of its inputs, whose first step compiled at its barrier too, in a run with a shape change
    before it: batches of different kinds take turns (two tasks, each with its own head), and
    each kind's first two steps do what warm-up does for one (its head's optimizer state is
    made at its first update, its steady graph runs at the second). Its compile joins the first
    input-shape finding, where the kinds are told."""
    runs = walk.sig_runs.get(step.sig_id) if step.sig_id is not None else None
    if walk.shape_key is None or step.phase != "train" or runs != [1, 1]:
        return None
    return Cause(CauseName.INPUT_SHAPE, walk.shape_key, evidence=(
        "at the second step of a kind (same inputs as its first, another graph"
        + (f": {c.nodes} nodes)" if c.nodes is not None else ")")))


def unknown_mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``unknown``: compiled mid-step outside any recorded host read, and nothing else explains it."""
    return Cause(CauseName.UNKNOWN, FindingKey("unknown", "step"),
                 evidence="compiled mid-step outside any recorded host read")


def eager_op(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """An op run on its own (eager mode) compiled after warm-up: for inputs of a new shape (the
    step's, or, at torch_xla.compile's entry, the call's: whole run), the shape's; else an op
    that ran for the first time (a logging op, a metric), compiled once and cached after."""
    sig_id = step.sig_id
    if sig_id is None and walk.whole is not None:
        sig_id = walk.whole.entry_sig.get(step.i)
    if sig_id is not None and sig_id not in walk.seen_sigs and walk.sigs.get(sig_id):
        return shape_cause(sig_id, walk)
    return Cause(CauseName.GRAPH_CHANGE, FindingKey("eager_ops"), evidence=(
        "an op run on its own (eager mode, outside the compiled step) compiled the first time it ran "
        "with these shapes"))


def graph_notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
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



Held = TypeVar("Held")


class GrowthRuns(Generic[Held]):
    """The live side of ``graph_grows`` (a rule of the whole run), as the analysis reads it
    (:func:`grows`): per input signature, its barrier compiles after warm-up, each graph larger
    than the one before; :data:`~xprof.diagnosis.terms.GROWING_GRAPHS` of them make a graph
    that grows. While a run is shorter, what would be said of each compile without growth is
    held (``Held``); a compile of those inputs that is not larger, or the last larger graph run
    again from the cache, ends the run for good, and its first held notice is given back."""

    def __init__(self) -> None:
        self._runs: dict[int, list[tuple[int, Held | None]]] = {}
        self._done: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self._runs)

    def holds(self, sig: int) -> bool:
        return sig in self._runs

    def cached(self, sig: int, nodes: int | None) -> Held | None:
        """A step of ``sig`` that compiled nothing at its barrier: the last larger graph run
        again from the cache ends the run (the loop's graph changed and stayed: a scalar that
        became a constant, not a graph that grows)."""
        run = self._runs.get(sig)
        return self.end(sig) if run and nodes == run[-1][0] else None

    def larger(self, sig: int, nodes: int | None) -> bool:
        """A new graph of ``sig`` continues its run: larger than the last, the run not over."""
        run = self._runs.get(sig)
        return sig not in self._done and not (run and (nodes or 0) <= run[-1][0])

    def add(self, sig: int, nodes: int | None, held: Held | None) -> list[int] | None:
        """Add a larger graph; the run's sizes once it is long enough to be growth."""
        run = self._runs.setdefault(sig, [])
        run.append((nodes or 0, held))
        return [n for n, _ in run] if len(run) >= GROWING_GRAPHS else None

    def end(self, sig: int) -> Held | None:
        """The run of ``sig`` is over: short of growing, its first held notice (to say late)."""
        run = self._runs.pop(sig, None)
        self._done.add(sig)
        return run[0][1] if run and len(run) < GROWING_GRAPHS else None

    def run(self, sig: int) -> list[tuple[int, Held | None]]:
        """The open run of ``sig``: (nodes, held) of each larger graph."""
        return list(self._runs.get(sig, ()))

    def end_all(self) -> list[Held]:
        """The run ended: every run still open is over."""
        return [held for sig in list(self._runs) if (held := self.end(sig)) is not None]


def grown(by_sig: Mapping[int, Sequence[tuple[int, int]]], floor: int) -> dict[tuple[int, int], list[int]]:
    """The whole run's side of :class:`GrowthRuns` (``grows``' evidence): per input signature,
    its barrier compiles after warm-up in order as (step, nodes); the run of them from the
    first, each larger than ``floor`` (the training graph) and the one before, when it is long
    enough -> (step, nodes) of each of its compiles -> the node counts of the run (50, 60, 70
    for a list of 10 more losses stacked every 10 steps)."""
    runs: GrowthRuns[int] = GrowthRuns()
    out: dict[tuple[int, int], list[int]] = {}
    for sig, seq in by_sig.items():
        for step, nodes in seq:
            if nodes <= floor or not runs.larger(sig, nodes):
                break
            runs.add(sig, nodes, step)
        run = runs.run(sig)
        if len(run) >= GROWING_GRAPHS:
            sizes = [n for n, _ in run]
            out.update({(step, n): sizes for n, step in run if step is not None})
    return out


def grows_notice(sizes: list[int]) -> str:
    """What the live notice says of a graph that grows."""
    said = ", ".join(str(n) for n in sizes[:6]) + (" ..." if len(sizes) > 6 else "")
    return (f"same input shapes, a graph larger each time it changed ({said} nodes): something kept across steps "
            "grows in it (a list of device tensors stacked at a read?)")


GRAPH_CHANGE_ADVICE: dict[str, str] = {
    "periodic_graph": (
        "Step-dependent Python control flow switches between graphs. Each variant compiles "
        "once and is cached afterwards; if the number of variants is fixed this is a one-off "
        "cost. To remove it, make the branch a tensor op (torch.where: the same results), or run it every step "
        "and weight it off on the others (running it unweighted every step changes what the loop computes)."
    ),
    "eval_pass": (
        "The evaluation pass compiles its own graphs (forward only). That is expected and "
        "cached after the first pass; keep eval batches at one fixed shape (pad the last one) "
        "so it stays at one graph per shape, and wrap it in torch.no_grad()."
    ),
    "eval_pass_nograd": (
        "The evaluation pass compiles its own graphs (forward only, under no_grad). That is "
        "expected and cached after the first pass; keep eval batches at one fixed shape (pad "
        "the last one and mask it: the same metric; drop_last=True on the eval loader leaves the last samples "
        "out of the metric) so it stays at one graph per shape."
    ),
    "graph_change": (
        "The same inputs produced a different graph: look for Python control flow that depends "
        "on the step or on values, Python scalars that change (0 and 1 are baked into the graph "
        "as constants; a Python int used as a slice bound, an index or a size is baked in at any "
        "value), or a different set of live tensors at the barrier."
    ),
    "condition_graph": (
        "A Python `if` on a tensor's value picks which ops the step runs: each outcome is its own "
        "graph (compiled once, cached after), and the host waits for the value every step. Keep "
        "the decision on the device: compute both outcomes and choose with torch.where (or scale "
        "by a mask), so every step is one graph and nothing waits."
    ),
    "baked_scalar": (
        "A value the step's graph took as an input is a constant in this graph, or shares an "
        "input with an equal value: a Python number that became 0 or 1 (a learning rate reaching "
        "0, or so small that 1 - lr * weight_decay rounds to 1.0 in float32: lr * weight_decay "
        "under about 3e-8), a tensor kept across steps and created again on the device (running "
        "= torch.zeros((), device=dev) as an epoch starts), a 0-dim tensor of 0 or 1 moved from "
        "the host, or two Python numbers that became equal (a momentum of 0.9 meeting a dropout "
        "keep probability of 0.9, a KL weight ramping through 0.5). Each such graph compiles "
        "once and is cached, so it costs a few compiles, once. To avoid it: keep the final "
        "learning rate up (1e-5 or more with weight_decay 0.01: eta_min, cosine_with_min_lr, "
        "OneCycleLR's final_div_factor); reset a kept tensor with the step's own ops "
        "(running.mul_(keep[0]), keep = torch.tensor([0.0]).to(dev) that step and [1.0] the "
        "others); pass a changing scalar as a 1-element tensor. XLA_NO_SPECIAL_SCALARS=1 did "
        "not prevent it where tried."
    ),
    "eval_mode_training": (
        "model.eval() (an evaluation, a checkpoint's validation) was not undone: call "
        "model.train() before training again. In eval mode dropout is off and batch-norm "
        "statistics stop updating, so the model trains differently, and the step compiles a "
        "graph of its own."
    ),
    "graph_every_step": (
        "These steps built graphs never seen before from inputs of the same shapes, so "
        "something that changes from step to step is baked into the graph: most often a Python number "
        "used as a size, a slice bound or an offset (a random crop drawn with Python's random), "
        "or a Python scalar that becomes 0 or 1 (those two are baked in as constants; other "
        "values are passed as data). Draw such values as device tensors "
        "(torch.randint on the device and index with them, torch.where for the choice), or keep "
        "sizes and offsets to a few fixed values."
    ),
    "graph_grows": (
        "Something kept from step to step grows inside the graph: most often a Python list of "
        "device tensors appended to every step (losses.append(loss)) and stacked when read "
        "(torch.stack(losses).mean()), which puts every kept tensor in the graph again. Clear "
        "the list after reading it, or keep a running sum on the device (total += "
        "loss.detach()) and read that. Layers unfrozen in stages grow the graph too; each "
        "stage then compiles once."
    ),
    "eager_op": (
        "In eager mode each op outside the compiled step compiles once per input shape, the first "
        "time it runs (a loss average for logging, a metric): expected, and cached after. If such "
        "ops run every step, move them into the compiled step function."
    ),
    "pass_joined": (
        "An evaluation (or any other pass) with no barrier of its own leaves its ops pending, and "
        "the next training step's barrier runs them with the step's: one more graph, and the "
        "pass's results only then. End that pass with torch_xla.sync() (xm.mark_step()), so it "
        "runs as a graph of its own and the training step's graph stays as it was."
    ),
    "step_cut_by_pass": (
        "The training step had no barrier of its own when the evaluation began (model.eval(), "
        "torch.no_grad()), so the pass's first barrier (its loader's first batch, or its first "
        "sync) ran the step's pending ops together with what the pass made before it (a "
        "`correct = torch.zeros(...)` accumulator): another graph, compiled for each shape the "
        "step takes there. End the training step with torch_xla.sync() (xm.mark_step()) before "
        "the evaluation begins, so the step runs the graph it runs everywhere else."
    ),
    "state_grows": (
        "Each step ran on tensors kept on the device, with nothing new from the host, and still "
        "built a graph never seen before. If a tensor carried from step to step grows (a KV cache "
        "or the generated tokens extended with torch.cat, outputs stacked), preallocate it at its "
        "largest size and write each step in place at a position kept as a device tensor "
        "(index_copy_, or a slice assignment), with a mask for the part not written yet. If a "
        "Python number changes (a position, a length, a momentum), pass it as a "
        "device tensor."
    ),
    "state_inputs": (
        "Each step ran on tensors kept on the device, with nothing new from the host, but the "
        "graph took other tensors or ran other ops: what the step trains or keeps changed "
        "(parameters frozen or unfrozen, gradients kept in some steps and cleared in others, a "
        "module switched to eval). A change made once (unfreezing a layer, a new phase) costs a "
        "graph once; one that comes and goes, keep the same every step (zero_grad every step)."
    ),
}
"""What to change, per kind of its findings."""


UNKNOWN_ADVICE: dict[str, str] = {
    "unknown_debugged": (
        "xprof could not tell why this compiled from what it recorded; torch_xla's own reason "
        "and frames (captured by `xprof run`) are in the evidence. Look at that line for a "
        "tensor read or a shape that changes."
    ),
    "unknown": (
        "xprof could not tell why this compiled. Run under `xprof run` (torch_xla's own "
        "compile analysis is captured) or record inputs by passing batches through a "
        "DataLoader or .to(device)."
    ),
}
"""What to change, per kind of its findings."""


GRAPH_CHANGE = CauseUnit(
    CauseName.GRAPH_CHANGE, label='graph changed', colour='#c92a2a',
    means=('same inputs, different graph: control flow every N steps, or a new graph every step and none reused '
        "(a Python number baked in: a random crop's offsets; with nothing new from the host, a tensor kept on "
        'the device that grows: a KV cache or the generated tokens extended with `torch.cat`, or, by graph '
        "size and torch_xla's input counts, a change in what the step trains: layers unfrozen, gradients kept "
        'every other step); or an eval pass (info: its barriers are told apart by grad mode, `model.eval()` '
        'and the absence of a backward pass); or training steps run in eval mode after an evaluation '
        '(`model.eval()` not undone); or another pass with no barrier of its own (an evaluation moving its '
        "batches) run inside the next training step's graph (`pass_joined`); or a training step whose barrier "
        'ran with grad off, at the first barrier of an evaluation begun before it (`step_cut_by_pass`); or a '
        'step graph larger each time it changes from the same inputs (`graph_grows`: a list of device tensors '
        "appended every step and stacked at a read); or, in eager mode, an op's first compile outside the "
        'compiled step (`eager_op`, info)'),
    fix=('keep the graph stable, or accept the fixed extra graphs; preallocate a growing cache and write in '
        'place at a position tensor; `model.train()` after evaluating; `torch_xla.sync()` at the end of the '
        'other pass; clear the list after reading it'),
    fix_safety=('A Python number kept as a device tensor, a cache preallocated and written in place, a barrier at the '
        'end of the other pass: the same results. model.train() after evaluating turns dropout and batch-norm '
        'updates back on: what training meant, but not what the recorded run computed.'),
    advice=GRAPH_CHANGE_ADVICE,
    notice=graph_notice,
    explained=True,
)


UNKNOWN = CauseUnit(
    CauseName.UNKNOWN, label='unknown', colour='#495057',
    means=("xprof could not tell, and says so with the evidence (torch_xla's own reason when `xprof run` "
        'captured it)'),
    fix=("`xprof run` (torch_xla's own analysis is captured)"),
    fix_safety=('Nothing to apply until the cause is known.'),
    advice=UNKNOWN_ADVICE,
)
