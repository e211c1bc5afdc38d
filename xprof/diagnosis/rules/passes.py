"""Graphs that are not the training step's: an evaluation pass, a library's own work,
torch.compile's tracing."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.evidence import dynamo_func
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import CUT_BY_PASS_KEY, EVAL_KEY, FindingKey
from xprof.diagnosis.mechanisms import mechanism, mechanisms_through, own_barrier
from xprof.diagnosis.notices import clean
from xprof.diagnosis.terms import EVAL_GRAPH_RATIO
from xprof.diagnosis.unit import CauseUnit


def dynamo_sync(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``dynamo``: compiled at a sync of torch.compile's XLA bridge."""
    if step.phase != "dynamo":
        return None
    return Cause(CauseName.DYNAMO, FindingKey("dynamo"),
                 evidence="compiled at a sync of torch.compile's XLA bridge")


def dynamo_tracing(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``dynamo``: compiled mid-step while torch.compile's XLA bridge traced a graph."""
    if not step.dynamo:
        return None
    return Cause(CauseName.DYNAMO, FindingKey("dynamo"),
                 evidence="compiled while torch.compile's XLA bridge traced a graph")


def dynamo_retrace(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``dynamo``: torch.compile traced a graph again in this step (same input shapes as
    before), so the step graph changed with it."""
    if not step.dynamo:
        return None
    return Cause(CauseName.DYNAMO, FindingKey("dynamo"), evidence=(
        "torch.compile traced a graph again in this step (same input shapes as before), "
        "so the step graph changed with it"))


def in_eval_phase(c: CompileFacts, step: StepFacts, walk: Walk) -> bool:
    """Live: an eval barrier (grad off or eval mode, no backward or optimizer step)."""
    return step.phase == "eval"


def small_graph(c: CompileFacts, step: StepFacts, walk: Walk) -> bool:
    """Live: a graph far smaller than the training graph in a run with no backward-pass evidence
    so far (an eval pass, when the whole run turns out to have none)."""
    train = walk.train_nodes
    return not walk.backward_seen and c.nodes is not None and bool(train) and c.nodes < EVAL_GRAPH_RATIO * (train or 0)


def eval_pass(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """The eval pass's owner (whole run): a compile in an eval pass belongs to the mechanism
    that ran the pass (the HF Trainer's evaluation), to a library call's own sync after it, or
    to the pass (``graph_change``/``eval_pass``), whatever its input shapes."""
    return walk.whole.eval_owner.get(step.i) if walk.whole is not None else None


def eval_pass_mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """The eval pass's owner for a compile outside any read, unless a mechanism inside the
    pass made the reads on both sides of it (``generate()`` in a Seq2SeqTrainer's evaluation,
    an op on the CPU cutting its token graphs)."""
    owner = eval_pass(c, step, walk)
    if owner is None:
        return None
    return mechanism_around(c, step, walk) or owner


def eval_graph_size(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change``/``eval``: in files recorded without backward-pass evidence (whole run),
    a barrier graph far smaller than the training graph stands in for that evidence."""
    nodes, train_nodes = c.nodes, walk.train_nodes
    if walk.whole is None or not walk.whole.size_guess or nodes is None or not train_nodes:
        return None
    if nodes >= EVAL_GRAPH_RATIO * train_nodes:
        return None
    return Cause(CauseName.GRAPH_CHANGE, EVAL_KEY, evidence=(
        f"a {nodes}-node graph against the {train_nodes}-node training graph "
        "(no backward pass or optimizer: an evaluation or inference pass)"))


def step_mechanism(step: StepFacts, walk: Walk, new_reads_only: bool = False) -> Cause | None:
    """A known library mechanism that asked for this barrier, or read values in this step.
    ``new_reads_only``: a mechanism that read in earlier training steps too (a model's mask
    check, every step) did not change this step's graph; its first read did, once."""
    reads = sorted(s for s in step.sites if not (new_reads_only and s in walk.seen_sites))
    candidates = ([step.barrier_site] if step.barrier_site is not None else []) + reads
    for site in candidates:
        mech = mechanism(walk.sites.get(site))
        if mech is not None:
            where = "asked for the barrier" if site == step.barrier_site else "read values in this step"
            return Cause(CauseName.LIBRARY, FindingKey.parse(mech.key), site=site, evidence=(
                f"{mech.what} {where} and ran a small graph of its own"))
    return None


def library_at_barrier(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``library``: a known mechanism asked for the barrier or first read values in the step,
    with inputs seen before. (Who asked for a barrier does not make its graph theirs when the
    inputs are new: a training step's graph cut by the eval loader's first batch is the step's.)"""
    found = step_mechanism(step, walk, new_reads_only=True)
    if found is not None and (step.sig_id is None or step.sig_id in walk.seen_sigs):
        return found
    return None


def library_mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``library``: compiled mid-step in a step where a known mechanism asked for the barrier
    or read values."""
    return step_mechanism(step, walk)


def mechanism_around(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """A known mechanism (not an eval pass's own) whose reads come right before and right after
    a compile outside any read, in its step: the compile happened inside it."""
    before = [r for r in step.reads if r.t1 <= c.t]
    after = [r for r in step.reads if r.t0 >= c.t]
    if not before or not after:
        return None
    first = max(before, key=lambda r: r.t1).site
    then = min(after, key=lambda r: r.t0).site
    theirs = mechanisms_through(walk.sites.get(then))
    mech = next((m for m in mechanisms_through(walk.sites.get(first)) if m in theirs and not m.evaluates), None)
    if mech is None:
        return None
    return Cause(CauseName.LIBRARY, FindingKey.parse(mech.key), site=first, evidence=(
        f"compiled between two of {mech.what}'s reads, outside them (an op on the CPU cutting its graph)"))


def step_cut_by_pass(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change`` (``joined:began``): a training step whose barrier ran with grad off,
    though its backward ran with grad on: a pass (an evaluation under ``torch.no_grad()``)
    began before the step had a barrier of its own, and the pass's first barrier (its loader's
    first batch) ran the step's pending ops with the ops the pass made before it. With inputs
    seen before, that is a graph of its own; with new inputs the input rules, before this
    one, give the compile to the new shape. A graph the size of a steady training graph took
    nothing of the pass: this rule does not name it. Such a graph is not the training step's, so the
    walk does not remember its inputs as seen."""
    if not step.pass_began or (step.sig_id is not None and step.sig_id not in walk.seen_sigs):
        return None
    nodes, train = c.nodes, walk.train_nodes
    if nodes is not None and nodes in walk.seen_nodes:
        return None  # the size of a steady training graph: nothing of a pass joined it
    size = f" ({nodes} nodes against the training step's {train})" if nodes is not None and train else ""
    site = walk.sites.get(step.barrier_site) if step.barrier_site is not None else None
    at = f", asked for at {os.path.basename(site.file)}:{site.line}" if site is not None else ""
    return Cause(CauseName.GRAPH_CHANGE, CUT_BY_PASS_KEY, evidence=(
        "same input shapes as an earlier step, but grad was off at this training step's barrier: a pass "
        f"began before the step ended, and its first barrier{at}, ran the step's ops with the pass's{size}"))



def dynamo_limit_notice(rec: Mapping[str, Any]) -> str:
    """The live notice of torch.compile giving up on a function (a ``dynamo_limit`` mark)."""
    func = dynamo_func(str(rec.get("func") or "?"), rec.get("file"), rec.get("line"))
    value = rec.get("value")
    limit = f"torch._dynamo.config.{rec.get('limit') or 'recompile_limit'}"
    if isinstance(value, int):
        limit += f" = {value}"
    return (f"torch.compile gave up on {clean(func, 80)} at its recompile limit ({clean(limit, 80)}): it runs "
            "uncompiled from now on, and XLA compiles a graph for each new shape")



class PassBarrier(NamedTuple):
    """A barrier of an eval pass, as :func:`eval_pass_owners` reads it."""

    step: int
    site: int | None
    """Where the barrier was asked for (when recorded)."""
    reads: frozenset[int]
    """Sites of the host reads in its step."""
    fed: bool
    """A batch's inputs came in its step: the pass's batch ran at this barrier (whoever asked
    for it: accelerate's ``gather_for_metrics`` inside the eval loop syncs the batch's forward)."""


def eval_pass_owners(passes: Iterable[Sequence[PassBarrier]], walk: Walk) -> dict[int, Cause]:
    """One owner per eval pass (``passes``: each pass's barriers in order; a pass is a run of
    consecutive barriers outside training steps with at least one eval barrier): the library
    mechanism that ran it, read from the barriers' and the reads' sites anywhere in the pass
    (the HF Trainer's evaluation_loop; generate()'s reads inside it), else the plain eval pass.
    Its compiles are the evaluation's whatever their input shapes (an eval pass has batches of
    its own), except at a library call's own sync after the pass's batches (xm.mesh_reduce's
    rendezvous, no batch's inputs in its step): those graphs are the call's. A call's sync that
    runs a batch's graph (the batch's inputs came in its step) is the pass's barrier: without
    it the same graph compiles at the next one. Step -> the cause its compiles get (what
    :func:`eval_pass` looks up)."""
    owners: dict[int, Cause] = {}
    for barriers in passes:
        owner = _pass_mechanism(barriers, walk)
        for b in barriers:
            asker = walk.sites.get(b.site) if b.site is not None else None
            if (owner is None and not b.fed and b.site is not None and asker is not None and own_barrier(asker)
                    and (asker.file, asker.line) not in walk.loops):
                owners[b.step] = Cause(CauseName.IMPLICIT_SYNC, FindingKey.sync(b.site), site=b.site, evidence=(
                    f"{asker.via} asked for this barrier itself and ran a graph of its own"))
                continue
            owners[b.step] = owner or Cause(CauseName.GRAPH_CHANGE, EVAL_KEY, evidence=(
                "compiled in an eval pass (no optimizer step or backward pass; grad off or the "
                "model in eval mode)"))
    return owners


def _pass_mechanism(barriers: Sequence[PassBarrier], walk: Walk) -> Cause | None:
    for b in barriers:
        for site in ([b.site] if b.site is not None else []) + sorted(b.reads):
            mech = next((m for m in mechanisms_through(walk.sites.get(site)) if m.evaluates), None)
            if mech is not None:
                return Cause(CauseName.LIBRARY, FindingKey.parse(mech.key), site=site, evidence=(
                    f"{mech.what} ran this eval pass (its barriers and reads go through it)"))
    return None


DYNAMO_ADVICE: dict[str, str] = {
    "dynamo_recompile": (
        "torch.compile traces a new graph whenever one of its guards fails (often a new input "
        "size: torch.compile(..., dynamic=False) still guards on sizes). Keep input shapes fixed "
        "(pad to a fixed length and mask it; drop_last=True also works but leaves the last samples "
        "out of each epoch). Marking the dim dynamic "
        "(torch._dynamo.mark_dynamic) does not help on XLA: dynamo stops retracing, but "
        "torch_xla's bridge still compiles one XLA graph per concrete size."
    ),
    "dynamo_padding": (
        "torch.compile guards on tensor sizes: each new size of {name} along dim {dim} traces "
        "and compiles new graphs. Pad {name} to a fixed length (tokenize with "
        "padding=\"max_length\", or pad_to_multiple_of=N / a few length buckets in the collate "
        "function). torch._dynamo.mark_dynamic does not help on XLA: torch_xla's bridge "
        "still compiles one XLA graph per concrete size."
    ),
    "dynamo_batch": (
        "torch.compile guards on tensor sizes: each new batch size of {name} traces and "
        "compiles new graphs. Keep the batch size fixed (pad the last batch and mask it; "
        "drop_last=True also works but leaves its samples out of each epoch). torch._dynamo.mark_dynamic does "
        "not help on XLA: torch_xla's "
        "bridge still compiles one XLA graph per concrete size."
    ),
    "dynamo_limit": (
        "It already hit dynamo's recompile limit, so that code now runs without torch.compile: "
        "raising torch._dynamo.config.recompile_limit only postpones this, as every new shape "
        "still compiles; fixing what makes it retrace ends both."
    ),
    "dynamo_global_state": (
        "torch.compile guards on global state such as grad mode: calling the compiled model "
        "under torch.no_grad() (an eval pass) traces it once more for that mode, then both "
        "graphs are cached. A one-off cost; to avoid it, compile a separate function for "
        "evaluation (its own torch.compile) or evaluate less often."
    ),
    "dynamo_guard": (
        "torch.compile traces a new graph whenever one of its guards fails: the failed guard "
        "is quoted in the evidence. Keep what it guards on (dtypes, attributes and Python "
        "values read in the compiled code) the same from call to call, or accept the fixed "
        "number of extra graphs."
    ),
    "dynamo_value": (
        "torch.compile specialized on the Python number {name}: each new value fails its guard "
        "and traces the function again (up to torch._dynamo.config.recompile_limit, 8 by "
        "default; after that the function runs without torch.compile). Pass it as a tensor "
        "(torch.tensor(value, device=...)), or keep it out of the compiled function."
    ),
}
"""What to change, per kind of its findings."""


DYNAMO = CauseUnit(
    CauseName.DYNAMO, label='torch.compile', colour='#f08c00',
    means=('`torch.compile` traced a new graph; the guard behind most recompiles is quoted from `torch._dynamo` '
        "(each cached entry's first failure, so a stale one-off guard that dynamo repeats at every recompile "
        'does not hide the padding), a size guard names the input, dim and sizes, and the advice follows it'),
    fix=("sizes: fixed input shapes, `drop_last=True` (not `torch._dynamo.mark_dynamic`: torch_xla's bridge "
        'still compiles one graph per size, 73 compiles against 41 on a loop with a new batch size every '
        "step); grad mode (an eval under `no_grad`): a one-off per mode (info); dynamo's recompile limit hit: "
        'where it gave up and that the function runs uncompiled from then on, with a live notice'),
    fix_safety=('Fixed shapes as for input shapes (padding masked out: the same results; drop_last leaves samples '
        "out); torch.compile's graphs compute what the eager code does."),
    advice=DYNAMO_ADVICE,
)


LIBRARY = CauseUnit(
    CauseName.LIBRARY, label='library mechanism', colour='#1c7ed6',
    means=("a library mechanism read values or ran its own graph: the HF Trainer's logging (`logging_steps`), "
        'its evaluation (every compile of its eval passes), its checkpoints (`save_steps`), '
        "`model.generate()` (also inside the evaluation with `predict_with_generate`), a model's "
        "attention-mask check; a library call's own sync after an evaluation's batches (`xm.mesh_reduce`'s "
        "rendezvous; a sync that runs an eval batch's graph, as accelerate's `gather_for_metrics` does inside "
        "the loop, is the evaluation's)"),
    fix=("the library's own settings (e.g. a larger `logging_steps`, a static cache for `generate()`)"),
    fix_safety=("A library's setting (logging_steps, save_steps, a static cache for generate()) changes how often it "
        'logs, evaluates or saves, not the training; a static cache gives the same tokens.'),
)
