"""Graph changes as findings: an eval pass, a graph that grows, a condition on a tensor, a
Python number baked into the graph, and the graphs that change every step."""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.findings.common import compiled_at, loc_text
from xprof.analysis.model import Finding
from xprof.analysis.steps import eval_pass_ids, phase_is
from xprof.analysis.tables import live_reads
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.keys import CUT_BY_PASS_KEY, EVAL_KEY, EVAL_MODE_KEY, FindingKey
from xprof.diagnosis.patterns import describe_period
from xprof.runfile import Site


def _plain_graph_finding(key: FindingKey, kind: str, title: str, c0: Cause, rows: pd.DataFrame,
                         comp_steps: list[int], ordinal_of: Mapping[int, int], severity: str) -> Finding:
    """A graph finding that is its cause's evidence, where it compiled, and its advice."""
    ms, n = float(rows["ms"].sum()), len(rows)
    return Finding(
        id=str(key), cause=CauseName.GRAPH_CHANGE, kind=kind, title=title, count=n, compiles=n, seconds=ms / 1e3,
        compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE[kind], severity=severity,
        evidence=[c0.evidence, compiled_at(comp_steps, ordinal_of)], steps=comp_steps)



def _grows_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame,
                   ordinal_of: Mapping[int, int], sites: dict[int, Site], syncs: pd.DataFrame | None,
                   comp_steps: list[int], ms: float) -> Finding:
    """Graphs of the same inputs, larger each time: state kept across steps grows in them."""
    n = len(rows)
    sizes = {int(v) for v in rows["graph_nodes"].dropna()}
    again = steps[steps["graph_nodes"].isin(list(sizes)) & ~steps["i"].isin(comp_steps)]
    reused = int(((again["cached"] > 0) & (again["uncached"] == 0)).sum()) if len(again) else 0
    evidence = [c0.evidence, compiled_at(comp_steps, ordinal_of)]
    if syncs is not None and len(syncs):
        # A read in every one of these steps: what it reads is likely what grows (stacked).
        live = live_reads(syncs)
        per_site = live[live["step"].isin(comp_steps)].groupby("site")["step"].nunique()
        for sid in per_site[per_site == len(comp_steps)].index.tolist()[:1]:
            site = sites.get(int(sid))
            if site is not None:
                evidence.append(f"a host read ran in each of these steps: {os.path.basename(site.file)}:{site.line} "
                                f"{site.code.strip()}")
    title = (f"The step graph grows: {n} new graphs from the same inputs, each larger than the last "
             f"({', '.join(str(v) for v in sorted(sizes)[:6])}{' ...' if len(sizes) > 6 else ''} nodes), "
             f"{'none reused' if not reused else 'each reused later'}, {ms / 1e3:.2f} s")
    return Finding(
        id=str(key), cause=CauseName.GRAPH_CHANGE, kind="graph_grows", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["graph_grows"],
        evidence=evidence, steps=comp_steps)



@dataclass
class _GraphStory:
    """What a graph-change finding says before its evidence: its kind, title and advice, the
    steps' pattern, and torch_xla's debug records of the graphs' inputs where it has them."""

    kind: str
    title: str
    advice: str
    pattern: str | None
    fewer: list[tuple[int, int, int]] = field(default_factory=list)
    """(step, inputs before, inputs now) when a Python number seems baked into the graph
    (:func:`_graph_inputs_changed`)."""
    took: tuple[int, int, int] | None = None
    """(step, inputs of the graph before, its inputs) with no input from the host
    (:func:`_inputs_against_previous`)."""


def graph_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame,
                   ordinal_of: Mapping[int, int], sites: dict[int, Site], compiles: pd.DataFrame,
                   syncs: pd.DataFrame | None = None) -> Finding:
    """The finding of graphs that changed with the same inputs: another pass joined, eager
    ops, a graph that grows, an eval pass, eval mode in training, or a graph that changes."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    comp_steps = sorted({int(s) for s in rows["step"]})
    if key == CUT_BY_PASS_KEY:
        return _plain_graph_finding(
            key, "step_cut_by_pass", f"Training steps ended at the first barrier of an evaluation begun before "
            f"their own: {n} extra graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s", c0, rows, comp_steps,
            ordinal_of, "warning")
    if key.group == "joined":
        return _plain_graph_finding(
            key, "pass_joined", f"Another pass's ops ran inside a training step's graph: {n} extra "
            f"graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s", c0, rows, comp_steps, ordinal_of, "warning")
    if key.group == "eager_ops":
        return _plain_graph_finding(
            key, "eager_op", f"Ops run one by one outside the compiled step compiled on their first run: {n} "
            f"compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s once, cached afterwards", c0, rows, comp_steps,
            ordinal_of, "info")
    if key.group == "grows":
        return _grows_finding(key, c0, rows, steps, ordinal_of, sites, syncs, comp_steps, ms)
    if key == EVAL_KEY:
        story = _eval_story(rows, steps, ordinal_of, comp_steps, ms)
    elif key == EVAL_MODE_KEY:
        story = _eval_mode_story(rows, steps, ordinal_of, comp_steps, ms)
    else:
        story = _changed_story(c0, rows, steps, compiles, comp_steps, ms)
    evidence = [c0.evidence] if c0.evidence else []
    # No input came from the host in these steps: tensors kept on the device fed them.
    hostless = bool(c0.no_host)
    if hostless and story.took is not None:
        step_no, was, now = story.took
        at = ordinal_of.get(step_no, step_no)
        evidence.append(f"torch_xla's debug records: the graph compiled at step {at} takes {now} inputs, the one "
                        f"before it {was}: " + ("another set of tensors" if now != was
                                                else "the same number, with other ops" if c0.no_host == "new"
                                                else "the same number, so other shapes or constants"))
    advice = story.advice
    if story.kind != "eval_pass" and story.fewer:
        advice = ADVICE["baked_scalar"]
        evidence.append(_baked_scalar(story.fewer, ordinal_of))
    user_steps = sorted({ordinal_of.get(s, s) for s in comp_steps})
    where = "after training step" if story.kind == "eval_pass" else "at step"
    evidence.append(f"compiled {where}{'s' if len(user_steps) != 1 else ''} "
                    f"{', '.join(str(s) for s in user_steps[:10])}{' ...' if len(user_steps) > 10 else ''}")
    file = line = None
    # (not for the same ops on tensors kept on the device: a condition whose outcome changed
    # would have changed the ops)
    decided = (_condition_in(syncs, comp_steps) if story.kind in (CauseName.GRAPH_CHANGE, "periodic_graph")
               and not hostless else None)
    if decided is not None:
        file, line, advice = _condition_evidence(decided, n, bool(story.fewer), evidence)
    asked = _asked_at(steps, sites, comp_steps) if story.kind == "eval_pass" else None
    if asked is not None:
        file, line = asked[0], asked[1]
        evidence.append(asked[2])
    return Finding(
        id=str(key), cause=CauseName.GRAPH_CHANGE, kind=story.kind, title=story.title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=comp_steps, pattern=story.pattern,
        severity="info" if story.kind == "eval_pass" else "warning", file=file, line=line,
    )


def _eval_story(rows: pd.DataFrame, steps: pd.DataFrame, ordinal_of: Mapping[int, int], comp_steps: list[int],
                ms: float) -> _GraphStory:
    """An evaluation pass compiled graphs of its own: a one-off, every how many steps it ran."""
    n = len(rows)
    starts = _eval_pass_starts(steps)
    if not starts:
        # No eval barriers recorded (an older recorder): the barriers that ran these graphs.
        nodes = {int(v) for v in rows["graph_nodes"].dropna()}
        ran = steps[steps["graph_nodes"].isin(list(nodes))] if nodes else steps.iloc[0:0]
        ordinals = sorted({int(o) for o in ran["seq"] if o >= 0}) or [ordinal_of.get(s, 0) for s in comp_steps]
        runs = _runs(ordinals)
        # Count training steps (not eval barriers) between the starts of eval passes.
        starts = train_steps_before([r[0] for r in runs], sorted(set(ordinals)))
    every = describe_period(starts) if len(starts) >= 3 else None
    if every is None and len(starts) == 2 and starts[1] - starts[0] > 1:
        every = f"every {starts[1] - starts[0]} steps"
    pattern = every.replace("steps", "training steps") if every else None
    advice = ADVICE["eval_pass"]
    evaluating = steps[phase_is(steps, "eval")]
    if len(evaluating) and bool((evaluating["nograd"] | evaluating["grad_off"]).any()):
        # it already runs under no_grad (at its barriers, or around its forward; the pass's
        # last barriers, a loader's end or a mesh_reduce after the loop, may come after
        # the with block): do not ask for it
        advice = ADVICE["eval_pass_nograd"]
    title = (f"An evaluation pass{(' (run ' + pattern + ')') if pattern else ''} compiled {n} graph"
             f"{'s' if n != 1 else ''} of its own: {ms / 1e3:.2f} s once, cached afterwards")
    return _GraphStory("eval_pass", title, advice, pattern)


def _eval_mode_story(rows: pd.DataFrame, steps: pd.DataFrame, ordinal_of: Mapping[int, int], comp_steps: list[int],
                     ms: float) -> _GraphStory:
    """Training steps that ran with the model in eval mode (no ``model.train()`` after an eval)."""
    n = len(rows)
    in_eval = steps[phase_is(steps, "train") & steps["eval_mode"].to_numpy(dtype=bool)
                    & (steps["i"].to_numpy() >= comp_steps[0])] if "eval_mode" in steps else steps.iloc[0:0]
    first = ordinal_of.get(comp_steps[0], comp_steps[0])
    title = (f"{len(in_eval) or n} training step{'s' if len(in_eval) != 1 else ''} from step {first} ran with "
             f"the model in eval mode (dropout off, batch-norm statistics frozen): {n} extra "
             f"graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    return _GraphStory("eval_mode_training", title, ADVICE["eval_mode_training"], None)


def _changed_story(c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame, compiles: pd.DataFrame,
                   comp_steps: list[int], ms: float) -> _GraphStory:
    """The step's graph changed with the same inputs: now and then (a pattern), at every step
    (none reused), or once; with no input from the host, state kept on the device changed."""
    n = len(rows)
    hostless = bool(c0.no_host)
    other_ops = c0.no_host == "new"  # (a graph of a size not seen before ran other ops)
    nodes_val = rows["graph_nodes"].dropna()
    node = int(nodes_val.iloc[0]) if len(nodes_val) else None
    ran = steps[steps["graph_nodes"] == node] if node is not None else steps.iloc[0:0]
    pattern = describe_period(sorted({int(o) for o in ran["ordinal"] if o >= 1}))
    kind = "periodic_graph" if pattern else CauseName.GRAPH_CHANGE
    advice = ADVICE[kind]
    # Whether any step from the first of these compiles on ran a graph it had compiled
    # before (a cached compile and no new one): the variants repeat, or never do.
    work = steps[steps["work"].astype(bool) & (steps["ordinal"] >= 1) & (steps["i"] >= comp_steps[0])]
    reused = int(((work["cached"] > 0) & (work["uncached"] == 0)).sum()) if len(work) else 0
    fewer = _graph_inputs_changed(rows, compiles)
    same = "with no new input from the host" if hostless else "with the same input shapes"
    # torch_xla's debug records (xprof run): did the graph take another number of inputs?
    took = _inputs_against_previous(rows, compiles) if hostless else None
    state = "state_inputs" if other_ops or (took and took[1] != took[2]) else "state_grows"
    if hostless and not pattern:
        advice = ADVICE[state]
    if pattern:
        # The steps of the pattern (a graph of this size) that reused a graph compiled before:
        # none, with a compile at each, is a Python number that changes each time (cutmix's
        # box), not control flow between a few variants.
        again = ran[(ran["ordinal"] >= 1) & (ran["i"] >= comp_steps[0])]
        reused = int(((again["cached"] > 0) & (again["uncached"] == 0)).sum()) if len(again) else 0
    every_step = ADVICE[state if hostless else "graph_every_step"]
    if pattern and not reused and n >= 3:
        kind, advice = "graph_every_step", every_step
        title = (f"The step graph changes {pattern}, a new graph each time {same}: {n} new graphs, "
                 f"none reused, {ms / 1e3:.2f} s")
    elif not pattern and not reused and n >= 3 and n >= 0.8 * len(work):
        kind, advice = "graph_every_step", every_step
        title = (f"The graph changed at every step {same}: {n} new graphs in "
                 f"{len(work)} steps, none reused, {ms / 1e3:.2f} s")
    elif not pattern and n >= 3 and n >= 0.5 * len(work) and not fewer:
        # A new graph in most steps, a few values coming back (a random crop's offset drawn
        # from a few dozen): the same story as every step, with some reuse.
        kind, advice = "graph_every_step", every_step
        title = (f"The graph changed in {n} of {len(work)} steps {same}: {n} new graphs, "
                 f"{reused} step{'s' if reused != 1 else ''} reused one, {ms / 1e3:.2f} s")
    else:
        title = (f"The step graph changes {pattern}" if pattern else
                 f"The graph changed {same}") + (
            f": {n} extra graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s to compile"
            f"{' once, cached afterwards' if reused else ''}")
    return _GraphStory(kind, title, advice, pattern, fewer, took)


def _baked_scalar(fewer: list[tuple[int, int, int]], ordinal_of: Mapping[int, int]) -> str:
    """The evidence of a Python number baked into the graph: the inputs the graphs took."""
    if len(fewer) == 1 and fewer[0][2] < fewer[0][1]:
        _, was, now = fewer[0]
        said = (f"the new graph takes {now} inputs where the step's graph took {was}: a value passed in "
                "before is a constant in it now, or shares an input with an equal one")
    else:
        counts = [f"{now} at step {ordinal_of.get(s, s)}" for s, _, now in fewer]
        said = (f"the step's graph took {fewer[0][1]} inputs, then {', '.join(counts[:-1])}"
                f"{' and ' if len(counts) > 1 else ''}{counts[-1]}, with the same ops: a value that is "
                "an input in one graph is a constant in another, or shares an input with an equal value")
    return (f"torch_xla's debug records: {said} (torch_xla bakes Python numbers 0 and 1 into the "
            "graph as constants, and passes equal scalars once)")


def _condition_evidence(decided: tuple[str, int, str], n: int, fewer: bool,
                        evidence: list[str]) -> tuple[str, int, str]:
    """A Python ``if`` on a tensor ran in the steps that built the new graph: its outcome
    decides which ops the step records, so when it flips, the graph is another one. (With
    fewer graph inputs too, a branch that sets a value, logit_scale.fill_(4.6), or a Python
    number turned 0 or 1: the condition's line first, the scalar story after.) Put first in
    ``evidence``; (file, line, advice)."""
    file, line, code = decided
    where = "each of these steps" if n > 1 else "that step"
    evidence.insert(0, f"a Python condition on a tensor was read in {where}: {loc_text(file, line)}: {code}; "
                       "which ops the step runs depends on its outcome, so a new outcome is a new graph")
    advice = ADVICE["condition_graph"] + (
        " If its outcome never changed, a Python number that became 0 or 1 (or equal to another in the "
        "step) is baked into the graph instead: see the evidence." if fewer else "")
    return file, line, advice


def _asked_at(steps: pd.DataFrame, sites: dict[int, Site], comp_steps: list[int]) -> tuple[str, int, str] | None:
    """(file, line, evidence) of a library's own sync that asked for the barriers that compiled
    an eval pass's graphs (accelerate's gather_for_metrics), named at the user's line. (A
    training step's barrier is asked for where the loop runs, every step: not said.)"""
    asked = steps.loc[steps["i"].isin(comp_steps), "site"].dropna() if "site" in steps else []
    for sid in dict.fromkeys(int(v) for v in asked):
        site = sites.get(sid)
        if site is not None and site.via:  # (the user's own mark_step line says nothing new)
            return site.file, site.line, (f"its barrier was asked for at {loc_text(site.file, site.line)} "
                                          f"(inside {site.via})" + (f": {site.code}" if site.code else ""))
    return None


def _condition_in(syncs: pd.DataFrame | None, comp_steps: list[int]) -> tuple[str, int, str] | None:
    """(file, line, code) of a Python condition on a tensor (``if loss > x:``) read, not
    deferred, in every one of ``comp_steps``; the first such site."""
    if syncs is None or not len(syncs) or "kind" not in syncs:
        return None
    cond = syncs[(syncs["kind"] == "tensor_condition") & ~syncs["deferred"].astype(bool)]
    if not len(cond):
        return None
    for _, g in cond.groupby("site", sort=False):
        read_in = set(g["step"].tolist())
        if all(s in read_in for s in comp_steps):
            first = g.iloc[0]
            return str(first["file"]), int(first["line"]), str(first["code"])
    return None



def _graph_inputs_changed(rows: pd.DataFrame, all_c: pd.DataFrame) -> list[tuple[int, int, int]]:
    """(step, inputs of the graph before it, its inputs) for each of these compiles, when
    torch_xla's debug records (``xprof run``) show at least one of them taking 1-3 inputs
    more or fewer than the training-step graph compiled before it with the same input
    signature, the two within 3 graph nodes of each other: the same ops, with a value an
    input in one and a constant (or one input shared with an equal value) in the other.
    Empty when none does."""
    if "debug_inputs" not in rows or not len(rows) or "debug_inputs" not in all_c or "sig" not in all_c:
        return []
    known = _debug_barrier_compiles(all_c)
    # The graphs compiled before, by input signature, in time order: the one before a
    # compile is found by bisection (a run of thousands of compiles stays linear-ish).
    by_sig = {sig: (g["t"].to_numpy(), g["debug_inputs"].to_numpy(), g["graph_nodes"].to_numpy())
              for sig, g in known.groupby("sig", sort=False)}
    out: list[tuple[int, int, int]] = []
    scalar = other = False
    for step, t, sig, inputs, nodes in zip(rows["step"], rows["t"], rows["sig"], rows["debug_inputs"],
                                          rows["graph_nodes"]):
        prior = by_sig.get(sig)
        if pd.isna(inputs) or prior is None:
            continue
        k = int(np.searchsorted(prior[0], t, side="left")) - 1
        if k < 0:
            continue
        was, now = int(prior[1][k]), int(inputs)
        out.append((int(step), was, now))
        p_nodes = prior[2][k]
        near = pd.isna(nodes) or pd.isna(p_nodes) or abs(int(nodes) - int(p_nodes)) <= 3
        small = near and 1 <= abs(now - was) <= 3
        scalar = scalar or small
        # A graph with many inputs more or fewer, or other ops, is not a scalar baked in (a block
        # skipped at random leaves its parameters out of the optimizer's graph): none is then.
        other = other or (now != was and not small)
    return out if scalar and not other else []



def _debug_barrier_compiles(all_c: pd.DataFrame) -> pd.DataFrame:
    """The compiles at a barrier that torch_xla's debug records give an input count for, in
    time order."""
    return all_c[all_c["debug_inputs"].notna() & (all_c["at"] == "barrier")].sort_values("t", kind="stable")



def _inputs_against_previous(rows: pd.DataFrame, all_c: pd.DataFrame) -> tuple[int, int, int] | None:
    """(step, inputs of the barrier graph compiled before it, its inputs) for the first of
    these compiles torch_xla's debug records give both counts for; None without them."""
    if "debug_inputs" not in rows or "debug_inputs" not in all_c:
        return None
    known = _debug_barrier_compiles(all_c)
    ts, counts = known["t"].to_numpy(), known["debug_inputs"].to_numpy()
    for step, t, inputs in zip(rows["step"], rows["t"], rows["debug_inputs"]):
        if pd.isna(inputs):
            continue
        k = int(np.searchsorted(ts, t, side="left")) - 1
        if k >= 0:
            return int(step), int(counts[k]), int(inputs)
    return None



def _eval_pass_starts(steps: pd.DataFrame) -> list[int]:
    """The training step each eval pass follows."""
    if "phase" not in steps:
        return []
    ids = eval_pass_ids(steps)
    first = np.flatnonzero((ids >= 0) & (ids != np.concatenate(([-1], ids[:-1]))))
    return [int(u) for u in steps["user_step"].to_numpy()[first]]



def train_steps_before(starts: list[int], eval_ordinals: list[int]) -> list[int]:
    """For each start, how many ordinals in ``range(start)`` are not eval ordinals.

    ``eval_ordinals`` is sorted and distinct; counting with bisect keeps this linear in the
    number of eval passes instead of passes times steps.
    """
    lo = bisect_left(eval_ordinals, 0)
    out = []
    for start in starts:
        if start <= 0:
            out.append(0)
        else:
            out.append(start - (bisect_left(eval_ordinals, start) - lo))
    return out



def _runs(ordinals: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs (start, length) of step ordinals."""
    out: list[tuple[int, int]] = []
    for o in ordinals:
        if out and o == out[-1][0] + out[-1][1]:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((o, 1))
    return out
