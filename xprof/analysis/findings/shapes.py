"""Input shapes and shardings as findings: padding, batch sizes, stages, micro-batches."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.findings.common import and_list, compiled_at, first_few
from xprof.analysis.findings.series import Series, SeriesIndex, still_varying
from xprof.analysis.model import Finding
from xprof.analysis.steps import is_inference, phase_is
from xprof.diagnosis.cause import FIRST_STEP_ONLY, Cause, CauseName
from xprof.diagnosis.evidence import bucket_step, of_other_kinds
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.patterns import bucketing_what_if, describe_period
from xprof.diagnosis.rules.shapes import shape_kind
from xprof.diagnosis.signatures import Shardings, Signature, no_sharding
from xprof.diagnosis.terms import SETTLED_AFTER
from xprof.runfile import base_input_name


@dataclass
class _ShapeChange:
    """How one input's shape changed over the run, as its finding reads it: which kind of
    change (``kind``), along which dim, and the series of its shapes it was read from."""

    name: str
    series: Series
    shapes: list[tuple[int, ...]]
    """Its distinct shapes, in order of first appearance."""
    varying: list[int]
    """The dims that took more than one size."""
    kind: str = "shape_change"
    dim: int | None = None
    pattern: str | None = None
    resized: bool = False
    """Several dims other than 0 changed together (an image's height and width): a size, not padding."""
    others: list[int] = field(default_factory=list)
    """The varying dims other than 0 (or all of them, when only 0 varies among several)."""
    minority_ords: list[int] = field(default_factory=list)
    """The steps whose dim 0 was not the usual one (a batch size change)."""


@dataclass
class _WhatIf:
    """What padding the input (and the inputs that change with it) would leave: the what-if
    table's rows, the inputs that still vary on their own, and the graphs left by padding this
    input alone."""

    rows: list[dict[str, object]] | None = None
    co_varying: list[str] = field(default_factory=list)
    alone_left: int = 0


def shape_finding(c0: Cause, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                   steps: pd.DataFrame, index: SeriesIndex, ordinal_of: Mapping[int, int],
                   steady: int) -> Finding:
    """The finding of an input whose shape changed (``ks``: its compiles): padding per batch,
    a batch size, a partial last batch, stages, buckets, or another kind of batch. ``index``:
    the run's signatures by input, built once for all its shape findings."""
    name = c0.input or "?"
    ms = float(rows["ms"].sum())
    comp_steps = [int(s) for s in rows["step"]]
    series = index.series(name)
    entries = index.entries(name)
    forms = list(dict.fromkeys((tuple(shape), str(dtype)) for _, _, shape, dtype, _ in entries))
    if of_other_kinds(forms):
        return _kinds_finding(name, forms, c0, len(ks), ms, comp_steps, ordinal_of)
    ch = _shape_change(name, series, {src for _, _, _, _, src in entries})
    integer = _integer_input(entries)  # (token ids: a tokenizer's padding; else values)
    what_if = _padding_what_if(ch, ms, integer, len(ks), index.first_step_one_off) if len(rows) else _WhatIf()
    n = len(ks)
    last = max((ordinal_of.get(s, s) for s in comp_steps), default=0)
    settled = _settled(series, comp_steps, last)
    headline, values_txt, advice, row_counts = _shape_words(ch, last, settled, what_if.rows, integer)
    together = _padded_together(ch, index) if what_if.rows else []
    if together:
        values_txt += f", and {and_list(together)} with it"
        advice = (f"Pad {and_list([name, *together])} alike: they change together (the what-if table pads "
                  f"them together). " + advice)
    if ch.kind == "partial_batch" and is_inference(steps):
        advice = ADVICE["partial_batch_inference"]
    title = f"{headline}{values_txt}: {n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"
    evidence = _shape_evidence(ch, ks, causes, rows, ordinal_of, ms)
    if settled:
        after = int((series.ords > last).sum())
        evidence.insert(0, f"all {len(ch.shapes)} shapes by step {last}: the {after} steps after compiled nothing "
                        "(each shape's graphs were cached): a one-off cost")
    preface = 1 if settled else 0
    if what_if.rows and what_if.co_varying:
        evidence.insert(preface, _padding_alone(ch, what_if, row_counts))
        preface += 1
    if together:
        many = len(together) > 1
        evidence.insert(preface, f"{and_list(together)} {'change' if many else 'changes'} with {name}: "
                           f"{'their' if many else 'its'} dim {ch.dim} is {name}{_POSS[name.endswith('s')]} "
                           f"dim {ch.dim} in every step (padded by the same call)")
    return Finding(
        id=str(FindingKey.input(name)), cause=CauseName.INPUT_SHAPE, kind=ch.kind, title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=comp_steps, input=name, dim=ch.dim,
        shapes=[list(s) for s in ch.shapes], pattern=ch.pattern, what_if=what_if.rows,
        inputs=[name, *together] if together else None,
    )


def _padded_together(ch: _ShapeChange, index: SeriesIndex) -> list[str]:
    """The other inputs that change shape only with this one: in every step their size at the
    padded dim is this input's (so padding one pads all), and their shapes do vary. Checked
    against the recorded signatures; an input that also changes on its own is not one."""
    if ch.dim is None:
        return []
    joint = ch.series.with_rest(ch.dim)
    own = set(still_varying(joint))
    names = {base_input_name(n) for _, key in joint for n, _ in key if n} - own - {ch.name}
    out = []
    for nm in sorted(names):
        shapes = {tuple(shape) for _, _, shape, _, _ in index.entries(nm)}
        if len(shapes) > 1 and all(len(sh) > ch.dim for sh in shapes):
            out.append(nm)
    return out


def _kinds_finding(name: str, forms: list[tuple[tuple[int, ...], str]], c0: Cause, n: int, ms: float,
                   comp_steps: list[int], ordinal_of: Mapping[int, int]) -> Finding:
    """Another rank or dtype is no padding or batch size: batches of another kind (a task's
    targets: class ids [16] int64 against regression targets [16, 3] float32)."""
    listed = ", ".join(f"{list(sh)} {dt}" for sh, dt in forms[:4]) + (" ..." if len(forms) > 4 else "")
    return Finding(
        id=str(FindingKey.input(name)), cause=CauseName.INPUT_SHAPE, kind="input_kinds",
        title=(f"{name} comes in {len(forms)} kinds ({listed}): batches of different kinds take turns, "
               f"each its own graph: {n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"),
        count=n, compiles=n, seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
        advice=ADVICE["input_kinds"], evidence=[c0.evidence, "another rank or dtype, not another length: "
                                                "not padding nor a batch size",
                                                compiled_at(comp_steps, ordinal_of)],
        steps=comp_steps, input=name, shapes=[list(sh) for sh, _ in forms])


def _shape_change(name: str, series: Series, srcs: set[str]) -> _ShapeChange:
    """Which kind of change the input's shapes show: dim 0 alone is a batch size (a short last
    one: a partial batch), one other dim a padded length, several a resize; then what is not a
    batch of rows after all (no other input shares its dim 0) is a size of its own."""
    shapes = series.shapes()
    found = shape_kind(shapes, lambda: series.value_counts(0))
    ch = _ShapeChange(name, series, shapes, found.varying, kind=found.kind, dim=found.dim, resized=found.resized,
                      others=found.others)
    if found.kind == "partial_batch":
        mode = series.value_counts(0).most_common(1)[0][0]
        ch.minority_ords = series.ordinals_where(lambda s: len(s) > 0 and s[0] != mode)
        every = describe_period(ch.minority_ords)
        ch.pattern = "the last batch of each epoch" + (f" ({every})" if every else "")
    elif found.kind == "batch_size_change":
        mode = series.value_counts(0).most_common(1)[0][0]
        ch.minority_ords = series.ordinals_where(lambda s: len(s) > 0 and s[0] != mode)
    _not_a_batch(ch, srcs)
    return ch


def _not_a_batch(ch: _ShapeChange, srcs: set[str]) -> None:
    """Correct a batch-size or padding reading of ``ch`` that the other inputs contradict
    (``srcs``: where the input's tensors came from: a loader's batch, a ``.to``)."""
    series, shapes = ch.series, ch.shapes
    free = None
    if ch.kind == "batch_size_change" and len(series.value_counts(0)) >= 3:
        free = series.other_free_size() or series.rows_kept_beside()
    # (a last partial batch keeps its name though no other input shares its rows: a second
    # loader's batch, one size all epoch but a short last one, is still a batch)
    rare_short = ch.kind == "partial_batch" and len(ch.minority_ords) * 4 <= len(series.ords)
    if (ch.kind in ("batch_size_change", "dynamic_padding", "partial_batch") and series.rows_shared() is False
            and not rare_short) or free is not None:
        # No other input shares its dim 0, another input's dim 0 changes on its own too, or
        # another input's rows stayed put: not a batch of rows, so neither a batch size nor a
        # tokenizer's padding (a graph's nodes and edges, a sample of its own size).
        ch.dim = ch.dim or 0
        distinct = len({s[ch.dim] for s in shapes if len(s) > ch.dim})
        ch.kind, ch.pattern = ("dynamic_size" if distinct >= 3 else "shape_change"), None
    if (ch.kind == "partial_batch" and srcs and not srcs & {"batch", "loader", "?"} and len(ch.minority_ords) == 1
            and ch.minority_ords[0] < int(series.ords.max())):
        # No loader gave this input (moved with .to from tensors the loop made), and its one
        # short batch neither recurs (each epoch) nor ends the run: nothing says it ended an
        # epoch, only that the batch size changed once.
        ch.kind, ch.pattern = "batch_size_change", None


def _padding_what_if(ch: _ShapeChange, ms: float, integer: bool, compiles: int, first_one_off: bool) -> _WhatIf:
    """The what-if table of padding a varying length (``dynamic_padding``, ``dynamic_size``):
    the graphs and seconds each way of padding would leave. Empty for other kinds."""
    out = _WhatIf()
    if ch.kind not in ("dynamic_padding", "dynamic_size") or ch.dim is None:
        return out
    series, dim = ch.series, ch.dim
    lengths = series.values(dim)
    # What one more length cost in this run: every graph it compiled (the step's, its
    # reads', a micro-batch's), not one compile: the first length was warm-up's.
    warm = series.warm_values(dim, first_one_off)
    new_lengths = max(len(set(lengths) - set(warm)) if warm else len(set(lengths)) - 1, 1)
    per_length = ms / 1e3 / new_lengths
    joint = series.with_rest(dim)
    out.co_varying = still_varying(joint)
    tokens = ch.kind == "dynamic_padding" and integer
    each = compiles / new_lengths
    out.rows = bucketing_what_if(lengths, per_length, ms / 1e3, joint if out.co_varying else None, tokens=tokens,
                                 warm=warm, compiles_each=each)
    if any(out.co_varying):
        # Other inputs padded on their own (a seq2seq batch's labels): the advice pads them
        # the same way, and so does the table; "alone" says what this input's padding leaves.
        out.alone_left = min(int(r["graphs"]) for r in out.rows)  # type: ignore[call-overload]
        out.rows = bucketing_what_if(lengths, per_length, ms / 1e3, joint, tokens=tokens, rest_dim=dim, warm=warm,
                                     compiles_each=each)
    return out


def _settled(series: Series, comp_steps: list[int], last: int) -> bool:
    """Every shape compiled early, and a long stretch after compiled nothing (length buckets,
    a fixed set of image sizes): a one-off cost, not one that grows with the run."""
    after = int((series.ords > last).sum())
    return bool(comp_steps) and after >= SETTLED_AFTER and after >= 3 * max(last, 1)


def _shape_words(ch: _ShapeChange, last: int, settled: bool, what_if: list[dict[str, object]] | None,
                 integer: bool) -> tuple[str, str, str, list[int]]:
    """(headline, the values it took, advice, the batch sizes that changed with a padded
    length) of a shape finding; ``last``: the training step of its last compile; ``settled``:
    see :func:`_settled`."""
    name, kind, dim, shapes = ch.name, ch.kind, ch.dim, ch.shapes
    headline, values_txt, advice = _plain_words(ch, integer)
    vals = sorted({s[dim] for s in shapes if len(s) > dim}) if dim is not None else []
    row_counts = sorted({sh[0] for sh in shapes if sh}) if kind == "dynamic_padding" and 0 in ch.varying else []
    # (a dynamic_size's dim 0 is no batch: its other dims changing with it are in the table)
    if row_counts:
        # Token-budget batching (fairseq's max_tokens, a sampler filling batches up to N
        # tokens): fewer rows when they are longer, so both dims change every batch.
        values_txt += f" and its batch size changes with it ({len(row_counts)} sizes: {first_few(row_counts)})"
        advice = ADVICE["padding_and_batch"]
    # (a last partial batch is no stage; nor is a size seen once at the very end)
    staged = (ch.series.stages(dim) if dim is not None and not ch.resized and not settled and kind != "partial_batch"
              else None)
    table = " The what-if table shows what fewer would leave." if what_if else ""
    if staged is not None and min(n for _, n in staged[:-1]) >= STAGE_STEPS and staged[-1][1] >= 2:
        # One size for a stretch of steps, then the next, none back (a curriculum growing the
        # sequence length): a compile per stage, not padding that varies per batch.
        headline = f"{name} took {len(staged)} sizes of dim {dim} in stages"
        values_txt = f" ({', '.join(f'{v} for {k} steps' for v, k in staged[:6])}{' ...' if len(staged) > 6 else ''})"
        advice = ADVICE["staged_shapes"]
    elif settled and kind in ("dynamic_padding", "dynamic_size", "shape_change") and dim is not None and not ch.resized:
        headline = f"{name} took {len(vals)} lengths of dim {dim}"
        values_txt = f" ({first_few(vals)}), all by step {last}"
        advice = ADVICE["settled_padding"] + table
    step = bucket_step(vals) if kind in ("dynamic_padding", "shape_change") and dim and not ch.resized else 0
    if step and not settled and not (staged is not None and headline.endswith("in stages")):
        # Every length a multiple of one step (16, 32, 48): padded to buckets already, each a
        # graph of its own, compiled once. Not padding per batch to fix, but a trade to weigh.
        headline = f"{name} is padded to multiples of {step}"
        values_txt = f" ({len(vals)} lengths of dim {dim}: {first_few(vals)}), a graph each"
        advice = ADVICE["bucketed"] + table
    return headline, values_txt, advice, row_counts


def _plain_words(ch: _ShapeChange, integer: bool) -> tuple[str, str, str]:
    """(headline, the values it took, advice) of a shape finding by its kind alone, before
    stages, settled lengths and buckets are told apart."""
    name, kind, dim, shapes = ch.name, ch.kind, ch.dim, ch.shapes
    values_txt = ""
    if ch.resized:
        dims = [d for d in ch.others if d != 0]
        sizes = list(dict.fromkeys("x".join(str(s[d]) for d in dims) for s in shapes if len(s) > max(dims)))
        values_txt = f" in dims {', '.join(map(str, dims))} ({len(sizes)} sizes: {first_few(sizes)})"
    elif dim is not None:
        vals = sorted({s[dim] for s in shapes if len(s) > dim})
        values_txt = f" ({len(vals)} distinct values of dim {dim}: {first_few(vals)})"
    headline = {
        "dynamic_padding": f"{name} is padded per batch",
        "dynamic_size": f"{name}{_POSS[name.endswith('s')]} size changes",
        "partial_batch": f"The last partial batch changes {name}'s batch size",
        "batch_size_change": f"{name}'s batch size changes",
        "shape_change": f"{name} changes {'size' if ch.resized else 'shape'}",
    }[kind]
    # One shape, but some steps move it to the device and others do not: another input set is
    # another graph (cutmix's box, moved only in the steps that mix).
    input_set = kind == "shape_change" and len(shapes) == 1  # (one shape cannot change)
    if input_set:
        headline, values_txt = f"{name} is an input of some steps and not others", ""
    advice = ADVICE["resize"] if ch.resized else ADVICE["input_set"] if input_set else ADVICE[kind]
    if kind == "dynamic_padding" and not integer:
        # Values, not token ids (boxes, features): no tokenizer to ask for a fixed length (and
        # rows of a batch, not a graph's nodes: dynamic_size's advice is for those).
        advice = ADVICE["padded_values"]
    return headline, values_txt, advice


def _shape_evidence(ch: _ShapeChange, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                    ordinal_of: Mapping[int, int], ms: float) -> list[str]:
    """The shape changes that compiled (three, in training steps), and the mean compile."""
    lines: list[str] = []
    for k, barrier in zip(ks, rows["step"].tolist()):
        c = causes[k]
        if c.old is not None and c.new is not None:
            # Training steps, as everywhere the user reads a step number.
            line = f"step {ordinal_of.get(int(barrier), int(barrier))}: {ch.name} {list(c.old)} -> {list(c.new)}"
            if c.first_step_only:
                line += FIRST_STEP_ONLY
            line += c.role
        else:
            line = c.evidence
        if line and line not in lines:
            lines.append(line)  # a read and its barrier compiling for the same new shape: one line
    evidence = lines[:3]
    if len(lines) > 3:
        evidence.append(f"... and {len(lines) - 3} more")
    evidence.append(f"mean compile {ms / max(len(ks), 1):.0f} ms")
    return evidence


def _padding_alone(ch: _ShapeChange, what_if: _WhatIf, row_counts: list[int]) -> str:
    """What padding this input alone leaves, when its other dims or other inputs change too."""
    left = min(int(r["graphs"]) for r in what_if.rows or [])  # type: ignore[call-overload]
    graphs = f"at least {left} graph{'s' if left != 1 else ''}"
    other_inputs = [nm for nm in what_if.co_varying if nm]
    parts = []
    if "" in what_if.co_varying:
        parts.append((f"its batch size changes too ({len(row_counts)} sizes: {first_few(row_counts)})"
                      if row_counts else "its other dims change too")
                     + f": padding dim {ch.dim} alone leaves {graphs} (counted in the table)")
    if other_inputs:
        many = len(other_inputs) > 1
        alone_left = what_if.alone_left
        parts.append(f"{and_list(other_inputs)} {'change' if many else 'changes'} shape on "
                     f"{'their' if many else 'its'} own: padding {ch.name} alone leaves at least "
                     f"{alone_left} graph{'s' if alone_left != 1 else ''}; pad {'them' if many else 'it'} "
                     f"the same way (the table does, each to {'its' if not many else 'their'} own "
                     "multiple or largest size)")
    return "; ".join(parts)


def _integer_input(entries: list[tuple[int, str, Any, str, str]]) -> bool:
    """Whether the input (any micro-batch of it) is integer-typed in the run: token ids,
    labels. ``entries``: its inputs in the run's signatures (:meth:`SeriesIndex.entries`)."""
    for _, _, _, dtype, _ in entries[:1]:
        return "int" in str(dtype) or str(dtype) == "bool"
    return True



STAGE_STEPS = 4
"""Steps each size must last (but the last) for a shape series to read as stages."""



_POSS = ("'s", "'")
"""The possessive's ending, by whether the name ends in s (``x's``, ``edges'``)."""



def micro_batch_finding(key: FindingKey, c0: Cause, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                         ordinal_of: Mapping[int, int]) -> Finding:
    """Steps that held fewer (or more) micro-batches than the steady ones: each count is a
    graph of its own (a gradient-accumulation window cut short where an epoch ends)."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    comp_steps = sorted({int(s) for s in rows["step"]})
    usual = c0.old[0] if c0.old else "?"
    other = sorted({c.new[0] for c in (causes[k] for k in ks) if c.new})
    title = (f"Steps accumulating {' or '.join(map(str, other))} micro-batches instead of {usual} compiled "
             f"graphs of their own: {n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    evidence = [c0.evidence] if c0.evidence else []
    evidence.append("compiled at step" + ("s " if len(comp_steps) != 1 else " ")
                    + ", ".join(str(ordinal_of.get(s, s)) for s in comp_steps[:10]))
    return Finding(
        id=str(key), cause=CauseName.INPUT_SHAPE, kind="micro_batches", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["micro_batches"],
        evidence=evidence, steps=comp_steps, input=c0.input,
    )



def sharding_finding(key: FindingKey, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                      steps: pd.DataFrame, sigs: dict[int, Signature], specs: Shardings) -> Finding:
    """The ``input_sharding`` compiles of one input: the shardings it took with the same
    shape, the steps that had the odd one, and how to keep it fixed."""
    name = key.detail
    ms = float(rows["ms"].sum())
    n = len(ks)
    # The input's sharding at every training step that ran a graph; the usual one is the
    # one most steps had.
    keep = (steps["work"].to_numpy(dtype=bool) & steps["sig"].notna().to_numpy(dtype=bool)
            & phase_is(steps, "train"))
    per_step: list[tuple[int, str]] = []
    for i, sig in zip(steps["i"][keep].tolist(), steps["sig"][keep].tolist()):
        spec = next((sp for nm, sp in specs.get(int(sig), {}).items() if base_input_name(nm) == name), None)
        if spec is not None:
            per_step.append((int(i), spec))
    counts = Counter(sp for _, sp in per_step)
    usual = counts.most_common(1)[0][0] if counts else None
    seen: list[str] = [usual] if usual is not None else []
    for k in ks:
        pair = causes[k].sharding
        for spec in pair or ():
            if spec not in seen:
                seen.append(spec)
    odd = [i for i, sp in per_step if sp != usual]
    shape = next((shp for sig in sigs.values() for nm, shp, _, _ in sig if base_input_name(nm) == name), None)
    words = " and ".join(no_sharding(s) for s in seen[:2]) + (" ..." if len(seen) > 2 else "")
    title = (f"{name} is sharded {len(seen)} ways with the same shape ({words}): "
             f"{n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    evidence = [f"step {int(s)}: {causes[k].evidence}" for k, s in zip(ks[:3], rows["step"].tolist()[:3])
                if causes[k].evidence]
    if n > 3:
        evidence.append(f"... and {n - 3} more")
    if odd and usual is not None:
        listed = ", ".join(str(i) for i in odd[:10]) + (" ..." if len(odd) > 10 else "")
        evidence.append(f"{name} was not sharded the usual way ({no_sharding(usual)}) at "
                        f"step{'s' if len(odd) != 1 else ''} {listed}")
    return Finding(
        id=str(key), cause=CauseName.INPUT_SHARDING, kind="sharding_change", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["sharding_change"],
        evidence=evidence, steps=odd or sorted({int(s) for s in rows["step"]}), input=name,
        shapes=[list(shape)] if shape is not None else None, shardings=seen,
    )
