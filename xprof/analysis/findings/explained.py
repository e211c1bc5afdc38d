"""``--explain``'s graph changes in the findings: a finding whose compiles ran a new graph that
``--explain`` compared with an earlier one (``runfile.GraphChange``) shows where the change
starts, at the user's line; a graph finding's title, line and advice follow from it (a slice
bound, a Python number that became a constant, a list that grows, ops a condition adds)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pandas as pd

from xprof.analysis.findings.common import loc_text
from xprof.analysis.model import Finding
from xprof.diagnosis.cause import CauseName
from xprof.runfile import GraphChange, GraphLine, Run

KNOWN_KINDS = frozenset({"eval_pass", "eval_mode_training"})
"""Graph findings whose cause the run already tells (an eval pass, eval mode left on): their
graphs' diffs are kept (``graph_changes``) but not said."""

GRAPH_KINDS = frozenset({CauseName.GRAPH_CHANGE, "periodic_graph", "graph_every_step", "graph_grows"})
"""The graph findings whose title names the line and the value that changed."""

MAX_SHOWN = 5
"""New graphs shown per finding (the first ones)."""

ADVICE = {
    "bound": ("A Python int sets a slice bound here, and each new bound is a new graph: slice to a fixed "
              "length and mask the rest (or round the bound up to a few sizes)."),
    "constant": ("torch_xla bakes the Python numbers 0 and 1 into the graph as constants and passes other "
                 "numbers as inputs, so the graph changes when this value reaches 0 or 1 (a warm-up or "
                 "decay factor, a learning rate): keep it as a device tensor (torch.tensor(v, "
                 "device=...)) updated in place (the same results), or keep it off 0 and 1 (which changes "
                 "the value, so the model trains a little differently)."),
    "value": ("A Python number here is a constant in the graph and changed: keep it as a device tensor "
              "(torch.tensor(v, device=...)) updated in place, so the graph stays the same."),
    "grows": ("A list of device tensors grows at this line, and each longer list is a new graph: keep a "
              "running sum (or a fixed-size buffer) on the device, or clear the list after each read."),
    "added": ("Python control flow adds these ops in some steps and not others, one graph per variant: "
              "run them every step and weight them with a device tensor (0 or the factor), or accept "
              "one graph per variant (compiled once each, cached afterwards)."),
    "removed": ("Python control flow leaves these ops out in some steps, one graph per variant: run them "
                "every step and weight them with a device tensor, or accept one graph per variant."),
    "shape": ("A shape here is set from a Python number that changes: keep it fixed (pad, or round up to "
              "a few sizes) so the graph stays the same."),
}
"""The advice of a graph finding, by the kind of change at its first line."""


def per_compile(run: Run, compiles: pd.DataFrame) -> list[GraphChange | None]:
    """The graph ``--explain`` compared for each compile: a barrier's at the barrier of its
    step, a host read's at a read in its step (the first not yet taken), else None. A barrier's
    new graph that had nothing to be compared with (the first ``--explain`` hashed: a change
    that happened once, before it switched itself on for the step after) is told by the next
    barrier's comparison with it, reversed, when that barrier ran a graph seen before (the
    step after went back to the usual graph)."""
    if not run.graph_changes or not len(compiles):
        return [None] * len(compiles)
    by: dict[tuple[int, str], list[GraphChange]] = {}
    for g in run.graph_changes:
        if g.base is not None:
            by.setdefault((g.i, g.at), []).append(g)
    barrier_compiles = {int(s) for s, at in zip(compiles["step"].tolist(), compiles["at"].tolist())
                        if at == "barrier"}
    inputs = {g.i: g.inputs for g in run.graph_changes if g.at == "barrier"}
    after = {g.base: g for g in reversed(run.graph_changes)
             if g.at == "barrier" and g.base is not None and g.i > g.base and g.i not in barrier_compiles}
    out: list[GraphChange | None] = []
    for step, at in zip(compiles["step"].tolist(), compiles["at"].tolist()):
        found = by.get((int(step), "barrier" if at == "barrier" else "read"))
        if found:
            out.append(found.pop(0))
        elif at == "barrier" and int(step) in after and int(step) in inputs:
            out.append(_reversed(after.pop(int(step)), int(step), inputs[int(step)]))
        else:
            out.append(None)
    return out


_FLIP = {"added": "removed", "removed": "added"}


def _reversed(g: GraphChange, i: int, inputs: int) -> GraphChange | None:
    """The change from ``g``'s graph to the graph of barrier ``i`` (``g`` compared the other
    way): ops ``g`` added are ones ``i``'s graph lacks. Only ops added or removed reverse
    plainly; anything else is not said."""
    if not g.lines or any(c.kind not in _FLIP for c in g.lines):
        return None
    lines = tuple(c._replace(kind=_FLIP[c.kind], what=re.sub(r"\b(added|removed)\b", lambda m: _FLIP[m.group(1)],
                                                               c.what)) for c in g.lines)
    return g._replace(i=i, base=g.i, inputs=inputs, lines=lines, compared_after=True)


def _line_json(c: GraphLine) -> dict[str, Any]:
    return {"file": c.file, "line": c.line, "func": c.func, "code": c.code, "what": c.what,
            "kind": c.kind, "op": c.op, "ops": c.ops}


def _view(g: GraphChange, user_step: int) -> dict[str, Any]:
    return {"step": user_step, "at": g.at, "lines": [_line_json(c) for c in g.lines],
            "more_lines": g.more_lines, "backward": g.backward, "library": g.library, "changed": g.changed}


def attach(findings: list[Finding], compiles: pd.DataFrame, explained: list[GraphChange | None],
           steps: pd.DataFrame, recorded: tuple[GraphChange, ...] = (),
           optimizers: tuple[dict[str, Any], ...] = ()) -> None:
    """Give each finding the graph changes of its compiles (``graph_changes``), and a graph
    finding its line, value and advice; ``recorded``: every graph ``--explain`` hashed (the
    bases the changes were compared with, for their input counts)."""
    if not any(g is not None for g in explained) or "finding" not in compiles:
        return
    inputs_at = {(g.i, g.at): g.inputs for g in recorded}
    user_step = dict(zip(steps["i"].tolist(), steps["user_step"].tolist())) if len(steps) else {}
    by_finding: dict[str, list[GraphChange]] = {}
    for fid, g in zip(compiles["finding"].tolist(), explained):
        if g is not None:
            by_finding.setdefault(str(fid), []).append(g)
    for f in findings:
        changes = by_finding.get(f.id)
        if not changes:
            continue
        f.graph_changes = [_view(g, int(user_step.get(g.i, g.i))) for g in changes[:MAX_SHOWN]]
        if f.kind not in KNOWN_KINDS:
            _name_line(f, changes, inputs_at, optimizers)


def _first_line(changes: list[GraphChange]) -> tuple[GraphLine, int] | None:
    """The user line most of the new graphs changed at (the first of them on a tie), with how
    many did."""
    counts: Counter[tuple[str, int]] = Counter()
    first: dict[tuple[str, int], GraphLine] = {}
    for g in changes:
        if g.lines:
            c = g.lines[0]
            counts[(c.file, c.line)] += 1
            first.setdefault((c.file, c.line), c)
    if not counts:
        return None
    where, n = counts.most_common(1)[0]
    return first[where], n


def _backward(changes: list[GraphChange]) -> str:
    n = max((g.backward for g in changes), default=0)
    return (f"{n} ops of the backward pass changed with it (they have no Python frame: autograd runs "
            "them from C++)") if n else ""


def _input_to_constant(changes: list[GraphChange],
                       inputs_at: dict[tuple[int, str], int]) -> tuple[GraphLine, str, str] | None:
    """What the graph itself shows when a new graph takes fewer inputs than the graph it was
    compared with and gained constants (or, compared with the graph of the step after it, lacks
    ops that graph has): a value passed in before is a constant now (a Python number that
    reached 0 or 1: ``1 - lr * weight_decay`` rounding to 1.0), not ops that control flow
    added. The line where the change is, the input counts, and how it was compared."""
    for g in changes:
        was = inputs_at.get((g.base, g.at)) if g.base is not None else None
        if was is None or g.inputs >= was:
            continue
        line = next((c for c in g.lines if c.op == "constant" or (g.compared_after and c.kind == "removed")), None)
        if line is not None:
            how = ("; compared with the graph of the step after it, which went back to the usual one"
                   if g.compared_after else "")
            return line, f"a graph input became a constant: {was} -> {g.inputs} inputs", how
    return None


def _name_line(f: Finding, changes: list[GraphChange], inputs_at: dict[tuple[int, str], int],
               optimizers: tuple[dict[str, Any], ...] = ()) -> None:
    constant = _input_to_constant(changes, inputs_at)
    if constant is not None:
        _name_constant(f, *constant)
        if "step(" in (constant[0].code or ""):
            f.advice = decay_advice(optimizers, constant[0]) or f.advice
        return
    picked = _first_line(changes)
    if picked is None:
        backward = sum(1 for g in changes if g.backward and not g.lines)
        if backward:
            which = "the new graph differs" if len(changes) == 1 else "the new graphs differ"
            f.evidence.insert(0, f"--explain: {which} only in ops with no Python frame (a backward pass: "
                                 "autograd runs it from C++, so it has no line)")
        return
    c, n = picked
    of = f"in {n} of the {len(changes)} new graphs compared" if len(changes) > 1 else "in the new graph"
    values = list(dict.fromkeys(g.lines[0].what for g in changes if g.lines and g.lines[0].line == c.line
                                and g.lines[0].file == c.file))
    said = ", ".join(values[:3]) + (" ..." if len(values) > 3 else "")
    _add_evidence(f, f"--explain: the graph changes at {loc_text(c.file, c.line)}: {c.code or '?'}: {said} "
                     f"({c.op}) {of}" + (f"; {_backward(changes)}" if _backward(changes) else ""))
    if f.kind not in GRAPH_KINDS:
        return
    f.file, f.line, f.func, f.code = c.file, c.line, c.func or None, c.code or None
    head, sep, rest = f.title.partition(": ")
    f.title = f"{head} at {loc_text(c.file, c.line)} ({said}){sep}{rest}"
    advice = ADVICE.get(c.kind)
    if advice is not None:
        f.advice = advice


def _add_evidence(f: Finding, line: str) -> None:
    """A graph finding's diff leads its evidence; another finding's (its cause already told by
    its rule: a shape, a read) follows it."""
    if f.kind in GRAPH_KINDS:
        f.evidence.insert(0, line)
    else:
        f.evidence.append(line)


def _name_constant(f: Finding, c: GraphLine, said: str, how: str) -> None:
    """A graph finding whose new graph turned an input into a constant: named at the line the
    constants appear, with the analysis' own advice where it already told a baked scalar."""
    _add_evidence(f, f"--explain: the graph changes at {loc_text(c.file, c.line)}: {c.code or '?'}: {said} "
                     f"({c.what}, {c.op}){how}")
    if f.kind not in GRAPH_KINDS:
        return
    f.file, f.line, f.func, f.code = c.file, c.line, c.func or None, c.code or None
    head, sep, rest = f.title.partition(": ")
    f.title = f"{head} at {loc_text(c.file, c.line)} ({said}){sep}{rest}"
    if "1 - lr * weight_decay" not in f.advice:  # (not the analysis' baked-scalar advice already)
        f.advice = ADVICE["constant"]


ROUNDS_TO_ONE = 2.0 ** -25
"""The largest x for which ``1 - x`` rounds to 1.0 in float32 (half a unit in the last place
below 1.0: about 3e-8)."""


def decay_advice(optimizers: tuple[dict[str, Any], ...], c: GraphLine) -> str | None:
    """The advice for an input that became a constant at an optimizer's step, computed from the
    run's own weight decay: decoupled weight decay scales each weight by ``1 - lr *
    weight_decay``, which is the constant 1 once lr falls under ``ROUNDS_TO_ONE / weight_decay``
    (and a learning rate of 0 is a constant too)."""
    decays = [(str(o.get("cls", "the optimizer")), float(g["weight_decay"])) for o in optimizers
              for g in o.get("groups") or [] if isinstance(g, dict) and float(g.get("weight_decay") or 0) > 0]
    if not decays:
        return None
    cls, wd = max(decays, key=lambda d: d[1])
    floor = f"{ROUNDS_TO_ONE / wd:.0e}".replace("e-0", "e-")  # (3e-4)
    return (f"A value in the optimizer's update became 0 or 1 at {loc_text(c.file, c.line)}, and torch_xla bakes "
            f"those two into the graph as constants. With {cls}'s weight_decay={wd:g}, each weight is scaled by "
            f"1 - lr * weight_decay, which rounds to 1.0 in float32 once the learning rate falls under {floor} "
            f"(3e-8 / weight_decay), and a learning rate of 0 is a constant as well: a schedule decaying to 0 "
            f"passes both. Keeping the final learning rate at {floor} or more (CosineAnnealingLR's eta_min, "
            "get_cosine_with_min_lr_schedule_with_warmup's min_lr) keeps one graph, but it changes the last steps' "
            "learning rate, so the model trains a little differently; the graphs otherwise compile once each "
            "and are cached, so accepting them costs only those compiles.")
