"""Input shapes and shardings: a step whose inputs no steady step had."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

from xprof.diagnosis.cause import FIRST_STEP_ONLY, Cause, CauseName
from xprof.diagnosis.evidence import added_inputs, listed_inputs, micro_batch_change
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.notices import clean
from xprof.diagnosis.patterns import Shape
from xprof.diagnosis.signatures import closest, fmt_shape, no_sharding, shape_map
from xprof.diagnosis.unit import CauseUnit
from xprof.runfile import base_input_name


def new_inputs(step: StepFacts, walk: Walk) -> bool:
    """The step's inputs are a signature no steady training step had."""
    return step.sig_id is not None and step.sig_id not in walk.seen_sigs


def joined_pass(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``graph_change`` (joined): the step's inputs plus others, every shape seen before, and a
    graph larger than the training step's: a pass with no barrier of its own (an evaluation
    moving its batches) left its ops and inputs pending, and this barrier ran them with the
    step. More micro-batches of the step's own inputs (x#3) are a longer window instead."""
    nodes, train_nodes = c.nodes, walk.train_nodes
    if not (new_inputs(step, walk) and nodes is not None and train_nodes and nodes > train_nodes):
        return None
    sig = walk.sigs.get(step.sig_id or 0, ())
    walk.known_sigs.catch_up(walk.seen_sig_list)
    extra = added_inputs(sig, walk.seen_sig_list, walk.known_sigs)
    if not (extra and micro_batch_change(sig, walk.seen_sig_list, walk.known_sigs) is None):
        return None
    copies = f" ({len(extra)} tensors)" if len(extra) > len(set(map(base_input_name, extra))) else ""
    return Cause(CauseName.GRAPH_CHANGE, FindingKey("joined"), evidence=(
        f"this step's graph also took {listed_inputs(extra)}{copies}, inputs no training step had, and had "
        f"{nodes} nodes against the training step's {train_nodes}: another pass's ops, with no barrier "
        "of their own, ran in it"))


def input_shape(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``input_shape`` / ``input_sharding``: the step's input signature was never seen in a
    steady training step (see :func:`shape_cause`)."""
    if not new_inputs(step, walk):
        return None
    return shape_cause(step.sig_id or 0, walk)


def micro_batch_role(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``input_shape`` (gradient accumulation): inputs seen in steady training steps, but
    never in this step's role. A micro-batch that only accumulates gradients (a backward pass,
    no optimizer step before its barrier) and one that steps the optimizer are two graphs for
    the same inputs, so each new input shape compiles once for each role: the compile belongs
    to the shape, compared with the inputs earlier micro-batches of the same role had."""
    sig_id = step.sig_id
    if sig_id is None or step.phase != "train" or sig_id not in walk.seen_sigs:
        return None
    roles = walk.seen_roles
    if (sig_id, step.accumulates) in roles or not any(acc for _, acc in roles):
        return None
    same_role = [walk.sigs[s] for s, acc in roles if acc == step.accumulates and s in walk.sigs]
    role = ("; the first micro-batch that only accumulates gradients with these inputs" if step.accumulates
            else "; the first micro-batch that steps the optimizer with these inputs")
    role += (" (gradient accumulation: a micro-batch that steps the optimizer and one that only accumulates "
             "are two graphs, so each input shape compiles once for each)")
    _, name, dim, old, new = closest(walk.sigs.get(sig_id, ()), same_role)
    if name is None:
        key = walk.shape_key or FindingKey.input(None)
        return Cause(CauseName.INPUT_SHAPE, key, input=key.detail or None, evidence=role[2:], role=role)
    cause = _changed(name, dim, old, new, False)
    cause.evidence += role
    cause.role = role
    return cause


def new_inputs_mid_step(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """Outside any read, in a step whose inputs are new: a graph cut mid-step (by an op on the
    CPU: a CTC loss and its backward cut each step in three) compiles for the new shape like
    the barrier's does."""
    if new_inputs(step, walk) and walk.sigs.get(step.sig_id or 0):
        return shape_cause(step.sig_id or 0, walk)
    return None


def shape_cause(sig_id: int, walk: Walk) -> Cause:
    """The input whose shape is new in this step's signature (or, under SPMD, whose sharding
    is new while every shape was seen before)."""
    if walk.specs:
        found = _sharding_cause(sig_id, walk)
        if found is not None:
            return found
    sig = walk.sigs.get(sig_id, ())
    walk.known_sigs.catch_up(walk.seen_sig_list)
    micro = micro_batch_change(sig, walk.seen_sig_list, walk.known_sigs)
    if micro is not None:
        # Every shape seen before, another number of micro-batches (x#3 is x again).
        before, now, base = micro
        return Cause(CauseName.INPUT_SHAPE, FindingKey("micro", base), input=base, old=(before,), new=(now,),
                     evidence=f"the step ran {now} micro-batch{'es' if now != 1 else ''} ({base} x{now}) where an "
                              f"earlier one ran {before}, every shape seen before")
    prev, name, dim, old, new = closest(sig, walk.seen_sig_list, walk.known_sigs)
    first_only = sig_id in walk.sig_step and sig_id not in walk.seen_sigs
    if name is not None:
        return _changed(name, dim, old, new, first_only)
    nearest = shape_map(prev) if prev is not None else {}
    gone = [n for n in nearest if n not in {n for n, _, _, _ in sig}]
    if gone:
        # No input new or of another shape: one the nearest signature had is gone.
        base = base_input_name(gone[0])
        said = f"{gone[0]} ({fmt_shape(nearest[gone[0]])} before) is missing from this step's inputs"
        return Cause(CauseName.INPUT_SHAPE, FindingKey.input(base), input=base, old=nearest[gone[0]],
                     evidence=said + (FIRST_STEP_ONLY if first_only else ""), first_step_only=first_only)
    if prev is None:
        # Only step 0 had inputs before: the shape is new to the steady-state graph.
        first = sig[0] if sig else None
        return Cause(CauseName.INPUT_SHAPE, FindingKey.input(first[0] if first else None),
                     input=first[0] if first else None, new=first[1] if first else None,
                     evidence="input shapes first seen at the one-off first step")
    return Cause(CauseName.INPUT_SHAPE, FindingKey.input(None), evidence="a new input signature")


def _changed(name: str, dim: int | None, old: tuple[int, ...] | None, new: tuple[int, ...] | None,
             first_only: bool) -> Cause:
    # ``input_ids#2`` is the same input in the next micro-batch of the step: one finding.
    base = base_input_name(name)
    said = (f"{name} changed shape {fmt_shape(old)} -> {fmt_shape(new)}" if old is not None and new is not None
            else f"{name} {fmt_shape(new)} is an input no earlier step had" if new is not None
            else f"{name} ({fmt_shape(old)} before) is missing from this step's inputs" if old is not None
            else f"{name} appears or goes in this step's inputs")
    if first_only:
        said += FIRST_STEP_ONLY
    return Cause(CauseName.INPUT_SHAPE, FindingKey.input(base), input=base, dim=dim, old=old, new=new, evidence=said,
                 first_step_only=first_only)


def _sharding_cause(sig_id: int, walk: Walk) -> Cause | None:
    """``input_sharding`` when an earlier signature had exactly these inputs and shapes but
    sharded at least one of them another way (the first such signature seen)."""
    now = walk.specs.get(sig_id)
    sig = walk.sigs.get(sig_id)
    if not now or sig is None:
        return None
    earlier = sorted((walk.sig_step.get(p, -1), p) for p in walk.same_shapes.get(sig, ())
                     if p != sig_id and p in walk.seen_sigs)
    for step, prev in earlier:
        before = walk.specs.get(prev, {})
        changed = [(name, before[name], spec) for name, spec in now.items()
                   if name in before and before[name] != spec]
        if not changed:
            continue
        # A loader's batch names its inputs best, then a compiled function's parameters.
        order = {name: (0 if src in ("batch", "loader", "arg") else 1) for name, _, _, src in sig}
        changed.sort(key=lambda c: order.get(c[0], 1))
        name, old, new = changed[0]
        base = base_input_name(name)
        others = [n for n, _, _ in changed[1:]]
        also = f" (and {', '.join(others[:4])}{' ...' if len(others) > 4 else ''})" if others else ""
        return Cause(CauseName.INPUT_SHARDING, FindingKey.sharding(base), input=base, sharding=(old, new), earlier=step,
                     evidence=f"{name}{also} sharded {no_sharding(new)}, at step {step} {no_sharding(old)}; "
                              "same shapes")
    return None


class ShapeKind(NamedTuple):
    """Which kind of change an input's shapes show (:func:`shape_kind`)."""

    kind: str
    """``partial_batch``, ``batch_size_change``, ``dynamic_padding`` or ``shape_change``."""
    dim: int | None
    varying: list[int]
    """The dims that took more than one size."""
    others: list[int]
    """The varying dims other than 0 (or all of them, when only 0 varies among several)."""
    resized: bool
    """Several dims other than 0 changed together (an image's height and width): a size, not padding."""


def shape_kind(shapes: Sequence[Shape], dim0_counts: Callable[[], Counter[int]]) -> ShapeKind:
    """The kind of change in an input's distinct shapes (``dim0_counts``: how many steps had
    each size of dim 0, asked for only when dim 0 alone varies): dim 0 alone is a batch size
    (one smaller size than the usual one: a partial batch), one other dim with three sizes or
    more a padded length, several dims together a resize. The report corrects it with what
    the whole run shows (no other input sharing the rows: a size of its own)."""
    rank = max((len(s) for s in shapes), default=0)
    varying = [d for d in range(rank) if len({s[d] for s in shapes if len(s) > d}) > 1]
    if varying == [0]:
        counts = dim0_counts()
        mode = counts.most_common(1)[0][0]
        minority = sorted(v for v in counts if v != mode)
        kind = "partial_batch" if len(minority) == 1 and minority[0] < mode else "batch_size_change"
        return ShapeKind(kind, 0, varying, [], False)
    if not varying:
        return ShapeKind("shape_change", None, varying, [], False)
    others = [d for d in varying if d != 0] or varying
    dim = max(others, key=lambda d: len({s[d] for s in shapes if len(s) > d}))
    distinct = len({s[dim] for s in shapes if len(s) > dim})
    resized = len([d for d in others if d != 0]) >= 2
    return ShapeKind("dynamic_padding" if distinct >= 3 and not resized else "shape_change", dim, varying, others,
                     resized)


def _kind_so_far(name: str, walk: Walk) -> tuple[ShapeKind, list[Shape]] | None:
    """The live side's reading of an input's shapes so far (the signatures the walk knows),
    with those shapes."""
    shapes = list(dict.fromkeys(shape for sig in walk.sigs.values() for n, shape, *_ in sig
                                if base_input_name(n) == name))
    if len(shapes) < 3:
        return None

    def counts() -> Counter[int]:
        out: Counter[int] = Counter()
        for sid, sig in walk.sigs.items():
            steps = (walk.sig_runs.get(sid) or [1])[0] or 1
            out.update({shape[0]: steps for n, shape, *_ in sig if base_input_name(n) == name and shape})
        return out

    return shape_kind(shapes, counts), shapes


def shape_notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
    name = clean(cause.input or "?", 60)
    if cause.key.group == "micro":
        return (f"the step ran {cause.new[0] if cause.new else '?'} micro-batches of {name} where an earlier one "
                f"ran {cause.old[0] if cause.old else '?'}")
    if cause.new is None and cause.old is not None:
        return f"{name} ({fmt_shape(cause.old)} before) is missing from its inputs"
    if cause.new is None:
        return "the input shapes changed"
    seen = ", which only the one-off first step had" if cause.first_step_only else " (first seen)"
    d = cause.dim
    found = _kind_so_far(cause.input or "", walk) if d is not None else None
    if d is not None and found is not None and found[0].kind == "dynamic_padding" and found[0].dim == d:
        seen += f": padded per batch ({len({s[d] for s in found[1] if len(s) > d})} sizes of dim {d} so far)"
    return f"{name} took shape {fmt_shape(cause.new)}{seen}"


def sharding_notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
    old, new = cause.sharding or ("", "")
    return (f"{clean(cause.input or '?', 60)} sharded {clean(no_sharding(new), 60)} "
            f"(before: {clean(no_sharding(old), 60)}), same shapes")




INPUT_SHAPE_ADVICE: dict[str, str] = {
    "dynamic_padding": (
        "Pad to fixed shapes: tokenize with padding=\"max_length\", or pad_to_multiple_of=N / a few "
        "length buckets in your collate function, so only a few graphs are ever compiled; with the "
        "attention mask passed, padded positions are masked out: the same outputs (truncation=True "
        "would cut rows longer than max_length, so keep max_length at least your longest row). The "
        "what-if table shows what each choice would leave."
    ),
    "dynamic_size": (
        "Pad it to a few fixed sizes along that dim (the largest it takes, or a multiple of N) "
        "and mask what was padded (for a graph: pad the node and edge counts, with padding "
        "edges pointing at a padding node): each fixed size compiles once. The what-if table "
        "shows what each choice would leave."
    ),
    "padded_values": (
        "Pad it to a few fixed sizes along that dim (the largest it takes, or a multiple of N) "
        "and mask what was padded out of the loss: each fixed size compiles once. The what-if "
        "table shows what each choice would leave."
    ),
    "padding_and_batch": (
        "Both the length and the number of rows change from batch to batch (batches filled up "
        "to a token budget): each (rows, length) pair is a graph, so padding the length alone "
        "is not enough. Pick a few length buckets and a fixed number of rows for each (pad a "
        "short batch with dummy rows masked out of the loss), so only a few shapes are ever "
        "compiled. The what-if table counts what padding the length alone would leave."
    ),
    "micro_batches": (
        "A step that accumulates gradients over another number of micro-batches is another "
        "graph: the last accumulation window of an epoch is short when the batches per epoch "
        "are not a multiple of the accumulation steps (gradient_accumulation_steps), and a count "
        "that follows the data (a token budget) varies at will. Make the count fixed (batches per "
        "epoch a multiple of it), or end each micro-batch with torch_xla.sync() after its "
        "backward, so the graphs are a micro-batch's and the update's, the same whatever the "
        "count; else each window length is one graph, cached after its first time."
    ),
    "settled_padding": (
        "A fixed set of lengths (buckets, or data with few lengths): each compiled once, early, "
        "and the steps after compiled nothing, so this is a one-off cost that a longer run "
        "spreads thin. Fewer lengths compile less but pad more each step; keep the set small "
        "and fixed."
    ),
    "staged_shapes": (
        "One size per stage (a curriculum that grows the length, a schedule of image sizes): "
        "each stage compiles its graphs once, then runs cached, a cost that longer stages spread "
        "thin. To pay it once, pad every stage to the largest size and mask the padding."
    ),
    "partial_batch": (
        "Drop the last partial batch (DataLoader(..., drop_last=True): its samples are left out of "
        "each epoch) or pad it to the full batch size and mask the padding out of the loss: the same "
        "results (where rows are compared with each other, in-batch negatives or batch statistics, "
        "mask the padded columns too)."
    ),
    "batch_size_change": (
        "Keep the batch size fixed: every batch size is a separate graph. Pad short batches "
        "to the usual size (and mask them: the same results), or use drop_last=True (which leaves "
        "the last samples out of each epoch)."
    ),
    "shape_change": (
        "Keep this input's shape fixed between steps (pad, bucket or resize to a few fixed "
        "shapes): every new shape compiles a new graph."
    ),
    "resize": (
        "Resize or crop to one fixed size before the tensor reaches the device (in the "
        "dataset's transform or the collate function): every new size moved to the device is "
        "a new graph, even one resized there right after. For multi-scale training keep the "
        "set of sizes small and fixed: each is compiled once, the first time it comes."
    ),
    "input_kinds": (
        "Steps of different kinds (tasks with their own heads and targets, taking turns) are "
        "different graphs, each compiled once and cached: expected in multi-task training, a "
        "few compiles in all, each kind's first steps doing what warm-up does for one. Padding "
        "does not merge them: the ops differ. For one graph, run every head every step and "
        "weight each task's loss by a 1-element tensor (0.0 or 1.0), with targets of one shape "
        "and dtype (note that with Adam a head whose loss is weighted 0 still moves with its "
        "momentum)."
    ),
    "input_set": (
        "A step that moves another set of tensors to the device runs another graph. Move the "
        "same inputs every step (one of the same shape where it is not needed), or make the "
        "choice on the device (torch.where, a mask) so every step is one graph."
    ),
    "bucketed": (
        "Every length is already a multiple of one step: the batches are padded to buckets, and "
        "each bucket compiles its own graph once, cached after. That is the price of bucketing, "
        "paid once per bucket; fewer, wider buckets (a larger multiple, or one length for all: "
        "padding='max_length') compile fewer graphs and pad more."
    ),
    "partial_batch_inference": (
        "Pad the last batch to the full batch size and drop the padded rows' outputs: one graph "
        "for every batch, and no sample left out."
    ),
}
"""What to change, per kind of its findings."""


INPUT_SHARDING_ADVICE: dict[str, str] = {
    "sharding_change": (
        "Shard every batch the same way: call xs.mark_sharding on each input with the same mesh "
        "and partition spec every step, or let the loader shard every batch: "
        "MpDeviceLoader(loader, device, input_sharding=xs.ShardingSpec(mesh, (\"data\", None))). "
        "Under SPMD each sharding of an input compiles a graph of its own."
    ),
}
"""What to change, per kind of its findings."""


INPUT_SHAPE = CauseUnit(
    CauseName.INPUT_SHAPE, label='input shape changed', colour='#e8590c',
    means=('an input took a shape no earlier steady step had: `dynamic_padding`, `partial_batch`, '
        "`batch_size_change`, a size change (an image's height and width together); `dynamic_size` when no "
        "other input shares the input's dim 0, or another keeps its rows while that dim takes 3 or more sizes"
        " (a graph's node features and edge list; a packed graph batch's nodes beside its labels `y [6]`: no "
        'batch size, no tokenizer; padding advice and a what-if table in plain words); a fixed set of shapes '
        'all compiled early, with a long stretch after that compiled nothing (length buckets, '
        '`pad_to_multiple_of`), is called settled: a one-off cost; lengths that are all multiples of one step'
        ' (16, 32, 48) are said to be buckets already, a graph each, not padding per batch; in an inference '
        'run a last partial batch is to be padded, not dropped; an input moved to the device in some steps '
        'only is named as such; an input of another rank or dtype (tasks taking turns) is `input_kinds`, '
        'info; another number of micro-batches a step is `micro_batches`'),
    fix=('`padding="max_length"`, `pad_to_multiple_of`, buckets, `drop_last=True`, resize to a fixed size'),
    fix_safety=('Padding to fixed shapes with the padding masked out (attention_mask, labels=-100) computes the same '
        'loss and gradients; drop_last=True leaves the last partial batch of each epoch out, and a resize '
        'changes the images: those change what the model sees.'),
    advice=INPUT_SHAPE_ADVICE,
    notice=shape_notice,
)


INPUT_SHARDING = CauseUnit(
    CauseName.INPUT_SHARDING, label='input sharding changed', colour='#d9480f',
    means=('SPMD: same shapes as an earlier step, another sharding of an input (`mark_sharding` left out or '
        'changed)'),
    fix=('shard every batch the same way, e.g. `MpDeviceLoader(..., input_sharding=xs.ShardingSpec(mesh, '
        '("data", None)))`'),
    fix_safety=('Sharding every batch the same way moves the data, not its values: the same results.'),
    advice=INPUT_SHARDING_ADVICE,
    notice=sharding_notice,
)
