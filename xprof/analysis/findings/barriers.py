"""Findings about where the barriers are: none at all (the pending graph holds every step),
none but host reads, eager mode (ops run between barriers), and a step cut by several."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.findings.common import dur_text, loc_text, step_pattern
from xprof.analysis.model import Finding
from xprof.analysis.steps import phase_is
from xprof.analysis.tables import barrier_graphs
from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.keys import EAGER_KEY
from xprof.diagnosis.rules import split as _split
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES, WARMUP_STEPS
from xprof.runfile import Site


def no_barrier(end: Any, steps: pd.DataFrame, syncs: pd.DataFrame, tail_ms: np.ndarray,
               eager: bool = True) -> Finding | None:
    """Optimizer steps that never reached a step barrier (a loop ported from CUDA without
    ``torch_xla.sync()`` and without a device loader): the pending graph holds every step
    since the last barrier, and each host read compiles and runs that whole history.
    ``eager``: the run compiled ops one by one (eager mode), so graphs run outside the host
    reads after the last barrier are a last step run op by op; in a lazy loop they are the
    few an op falling back to the CPU materializes (boolean-mask indexing in a library)."""
    if end is None:
        return None
    work = steps["work"].to_numpy(dtype=bool) if len(steps) else np.zeros(0, dtype=bool)
    if end.tail_opt < 1 and (end.tail_bw < 2 or work.any()):
        # (graphs run outside the reads, fewer than the reads: ops on the CPU cutting them;
        # more would be eager mode, op by op)
        return None if work.any() or end.tail_graphs > len(syncs) else _reads_only(syncs, tail_ms, end.tail_graphs)
    if end.tail_graphs and eager:
        return None  # (tail_graphs: the last step ran op by op, eager mode's tail step)
    if work.any():
        last = int(steps["i"].to_numpy()[work].max())
        if last + 1 < end.steps:  # barriers that ran nothing after the last graph: not this
            return None
    tail_reads = syncs[syncs["step"] > (int(steps["i"].max()) if len(steps) else -1)] if len(syncs) else syncs
    n_compiles = len(tail_ms)
    compile_ms = float(tail_ms.sum())
    wait_ms = float(tail_reads["ms"].sum()) if len(tail_reads) else 0.0
    opt = int(end.tail_opt)
    if opt < 1:
        return _training_without_barrier(end, tail_reads, tail_ms, wait_ms)
    if work.any() and not n_compiles and not len(tail_reads):
        # Nothing read or compiled after the last barrier: those steps' ops were still
        # pending when the run ended, and never ran (a sync every N steps, the last few left).
        return Finding(
            id="no_barrier", cause=CauseName.NO_BARRIER, kind="never_ran",
            title=(f"The last {opt} optimizer step{'s' if opt != 1 else ''} never ran: no step barrier "
                   f"after {'them' if opt != 1 else 'it'}, so {'their' if opt != 1 else 'its'} ops were "
                   "still pending when the run ended"),
            count=opt, compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0,
            advice=ADVICE["never_ran"],
            evidence=[f"{opt} optimizer step{'s' if opt != 1 else ''} after the last barrier; no graph ran "
                      "after it (no host read, no compile)"], steps=[])
    if opt < 2:
        return None  # one step read after the last barrier: too little to call a missing barrier
    since = "the last step barrier" if work.any() else "the start"
    title = (f"No step barrier for the last {opt} optimizer steps: each graph held every step since {since}"
             if work.any() else f"No step barrier: {opt} optimizer steps ran without one, so each graph held "
             f"every step since the start")
    title += (f": {n_compiles} compile{'s' if n_compiles != 1 else ''}, "
              f"{max(wait_ms, compile_ms) / 1e3:.2f} s")
    evidence = [f"{opt} optimizer steps after the last barrier, and no barrier after them"
                if work.any() else f"{opt} optimizer steps, and no step barrier in the run"]
    evidence += _held_evidence(tail_reads, tail_ms)
    named = _loop_read(tail_reads) if len(tail_reads) else None
    return Finding(
        id="no_barrier", cause=CauseName.NO_BARRIER, kind="no_barrier", title=title, count=opt, compiles=n_compiles,
        # The reads waited for the compiles and the executions: their waits are the cost (or the
        # compiles alone, if the reads were not recorded).
        seconds=max(wait_ms, compile_ms) / 1e3, compile_seconds=compile_ms / 1e3,
        execute_seconds=0.0, advice=ADVICE["no_barrier"], evidence=evidence, steps=[],
        file=str(named["file"]) if named is not None else None,
        line=int(named["line"]) if named is not None else None,
    )



def _loop_read(reads: pd.DataFrame) -> pd.Series:
    """The read a missing barrier's finding names: the first of the loop's own (not inside a
    library call, not a value-dependent op's) that ran a graph (training comes first: an
    evaluation's reads later), at a line that read more than once when one did (a read in
    the loop, not a setup read before it: ``labels.max().item()`` sizing the model); else
    the first read. A library's read inside the model's forward (a mask check) is not where
    the barrier goes."""
    own = reads
    if "via" in own:
        own = own[own["via"].isna()]
    if "access" in own:
        own = own[~own["access"].isin(DATA_DEPENDENT_ACCESSES)]
    if "executions" in own and bool((own["executions"] > 0).any()):
        own = own[own["executions"] > 0]
    if "site" in own and len(own):
        again = own["site"].duplicated(keep=False).to_numpy(dtype=bool)
        if again.any():
            own = own[again]
    return own.iloc[0] if len(own) else reads.iloc[0]


def _held_evidence(reads: pd.DataFrame, tail_ms: np.ndarray) -> list[str]:
    """A run with no barrier: its graphs ran at host reads, each holding every step since the
    last barrier, and grew with them."""
    out = []
    if len(reads):
        first = reads.iloc[0]
        where = loc_text(str(first["file"]), int(first["line"]))
        out.append(f"every graph ran at a host read instead: {len(reads)} read{'s' if len(reads) != 1 else ''} "
                   f"(the first at {where}: {first['code']})")
    if len(tail_ms) >= 2:
        ms = tail_ms.tolist()
        grew = ms[-1] > 1.2 * ms[0]  # (compile times alone: said only when they show it)
        out.append(f"the graphs grew with the steps they held: compiles of {dur_text(ms[0])} to {dur_text(ms[-1])}"
                   if grew else f"{len(ms)} graphs compiled, {dur_text(min(ms))} to {dur_text(max(ms))} each")
    return out


def _training_without_barrier(end: Any, reads: pd.DataFrame, tail_ms: np.ndarray, wait_ms: float) -> Finding:
    """Backward passes and no optimizer step, no barrier in the run: a training loop that updates
    its weights itself (``p.data.add_(p.grad, alpha=-lr)``, as pytorch/examples' language model
    does), ported by switching the device only. Each read compiles every step since the start."""
    passes, n_compiles, compile_ms = int(end.tail_bw), len(tail_ms), float(tail_ms.sum())
    at = ""
    evidence = [f"{passes} backward passes (training steps that update the weights without an optimizer), and "
                "no step barrier in the run"]
    file = line = code = None
    if len(reads):
        first = _loop_read(reads)
        file, line, code = str(first["file"]), int(first["line"]), str(first["code"])
        at = f" at {loc_text(file, line)}"
    evidence += _held_evidence(reads, tail_ms)
    title = (f"No step barrier: {passes} training steps ran without one, so each read{at} compiled every step "
             f"since the start: {n_compiles} compile{'s' if n_compiles != 1 else ''}, "
             f"{max(wait_ms, compile_ms) / 1e3:.2f} s")
    advice = ADVICE["no_barrier"]
    if at:
        advice = (f"Add torch_xla.sync() at the end of each iteration (after the weights' update, before the "
                  f"read{at}). " + advice)
    return Finding(
        id="no_barrier", cause=CauseName.NO_BARRIER, kind="no_barrier", title=title, count=passes,
        compiles=n_compiles, seconds=max(wait_ms, compile_ms) / 1e3, compile_seconds=compile_ms / 1e3,
        execute_seconds=0.0, advice=advice, evidence=evidence, steps=[], file=file, line=line, code=code)


def _reads_only(syncs: pd.DataFrame, tail_ms: np.ndarray, cut: int) -> Finding | None:
    """No barrier and no optimizer step in the run, and graphs that ran (and compiled) at
    host reads: generation driven by its reads (``model.generate()``), or a loop that never
    syncs. Its reads are everything it ran."""
    n_compiles = len(tail_ms)
    if not len(syncs) or n_compiles < 2:
        return None
    compile_ms = float(tail_ms.sum())
    wait_ms = float(syncs["ms"].sum())
    evidence = []
    keys = [k for k in ("file", "line", "via") if k in syncs]
    for key, g in syncs.groupby(keys, sort=False, dropna=False):
        file, line, via = (list(key) + [None, None, None])[:3]
        via_txt = f" (inside {via})" if isinstance(via, str) and via else ""
        code = g["code"].iloc[0] if "code" in g else ""
        evidence.append(f"{len(g)} read{'s' if len(g) != 1 else ''} at {loc_text(str(file), int(line))}{via_txt}: "
                        f"{code}")
    evidence = evidence[:4]
    ms = tail_ms.tolist()
    evidence.append(f"{n_compiles} graphs compiled, {dur_text(min(ms))} to {dur_text(max(ms))} each: a new graph at "
                    "almost every read")
    if cut:
        evidence.append(f"{cut} more graph{'s' if cut != 1 else ''} ran at ops without an XLA lowering, which run "
                        "the graph before them early")
    first = syncs.iloc[0]
    return Finding(
        id="no_barrier", cause=CauseName.NO_BARRIER, kind="reads_only",
        title=(f"No step barrier: the graphs ran at host reads: {n_compiles} compiles at {len(syncs)} read"
               f"{'s' if len(syncs) != 1 else ''}, {max(wait_ms, compile_ms) / 1e3:.2f} s"),
        count=len(syncs), compiles=n_compiles, seconds=max(wait_ms, compile_ms) / 1e3,
        compile_seconds=compile_ms / 1e3, execute_seconds=0.0, advice=ADVICE["reads_only"],
        evidence=evidence, steps=[], file=str(first["file"]), line=int(first["line"]),
    )



def eager_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """Training steps after warm-up whose graphs all ran op by op, between barriers: one row
    per training step (``ordinal``), with its first barrier ``i``, the graphs it ran mid-step
    outside host reads (``graphs``) and its wall time (``ms``, over all its barriers). A step
    with a graph at any of its barriers was compiled (``torch_xla.compile``, or traced
    lazily): the few eager ops around it are not counted."""
    cols = ["ordinal", "i", "graphs", "ms"]
    if not len(steps):
        return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in cols})
    ordinal = steps["ordinal"].to_numpy()
    keep = phase_is(steps, "train") & (ordinal >= WARMUP_STEPS)
    rows = pd.DataFrame({
        "ordinal": ordinal[keep],
        "i": steps["i"].to_numpy()[keep],
        "graphs": steps["mid_graphs"].to_numpy()[keep],
        "at_barrier": barrier_graphs(steps)[keep],
        "ms": steps["step_ms"].to_numpy(dtype=np.float64)[keep],
    })
    g = rows.groupby("ordinal", sort=True).agg(i=("i", "min"), graphs=("graphs", "sum"),
                                               at_barrier=("at_barrier", "sum"), ms=("ms", "sum"))
    g = g[(g["graphs"] > 0) & (g["at_barrier"] == 0)].reset_index()
    return g[cols]



def eager_finding(steps: pd.DataFrame, compiles: pd.DataFrame, steady: int) -> Finding | None:
    """The training step ran op by op (eager mode): each op a graph of its own, compiled on
    first use and dispatched alone. The evidence is torch_xla's own: op compiles timed in
    EagerOpCompileTime (``at`` = ``op``), and steady steps that ran graphs between barriers,
    outside any host read, with nothing left for the barrier to run."""
    op_compiles = int((compiles["at"].to_numpy(dtype=object) == "op").sum()) if len(compiles) else 0
    if not op_compiles or not steady:
        return None
    eager = eager_steps(steps)
    if not len(eager):
        return None
    n = len(eager)
    graphs = int(np.median(eager["graphs"].to_numpy()))
    step_ms = float(np.median(eager["ms"].to_numpy()))
    share = f"all {steady} steady steps" if n >= steady else f"{n} of {steady} steady steps"
    title = (f"The training step runs op by op (eager mode): {graphs} graph{'s' if graphs != 1 else ''} "
             f"a step, each dispatched on its own ({share}, {dur_text(step_ms)} a step)")
    evidence = [
        f"{op_compiles} op graph{'s' if op_compiles != 1 else ''} compiled one at a time "
        "(torch_xla's EagerOpCompileTime), and the steady steps ran their graphs between barriers, "
        "outside any host read, leaving nothing for the barrier to run",
        "torch_xla's eager-mode guide measured pure eager mode at ~45% of a compiled step's speed "
        "for a decoder-only model and ~1% for ResNet50; what compiling saves here is not measured "
        "in this run",
    ]
    return Finding(
        id=str(EAGER_KEY), cause=CauseName.EAGER_MODE, kind="eager_mode", title=title, count=n, compiles=0,
        seconds=0.0, compile_seconds=0.0, execute_seconds=0.0, advice=ADVICE["eager_mode"],
        evidence=evidence, steps=[int(i) for i in eager["i"].tolist()],
        pattern=None if n >= steady else step_pattern([int(o) for o in eager["ordinal"].tolist()], steady),
    )



def split_finding(steps: pd.DataFrame, sites: dict[int, Site]) -> Finding | None:
    """``split_step`` (:mod:`xprof.diagnosis.rules.split`) from the training barriers that ran
    a graph at the barrier (eager steps, whose graphs run between barriers, are not split)."""
    graphs = (steps["barrier_uncached"] + steps["barrier_cached"]).to_numpy()
    keep = phase_is(steps, "train") & (graphs > 0) & (steps["ordinal"].to_numpy() >= 0)
    if keep.sum() < 2:
        return None
    ordinals = steps["ordinal"].to_numpy()[keep]
    if (np.diff(ordinals) > 0).all() or len(np.unique(ordinals)) == len(ordinals):
        return None  # no step has two barriers, so none is split (and no 1M objects are made to say so)
    rows = steps[keep]
    barriers = [_split.Barrier(int(step), None if pd.isna(site) else int(site), not pd.isna(sig), int(g), int(u))
                for step, site, sig, g, u in zip(rows["ordinal"].tolist(), rows["site"].tolist(), rows["sig"].tolist(),
                                                 graphs[keep].tolist(), rows["barrier_uncached"].tolist())]
    found = _split.split_steps(barriers, WARMUP_STEPS)
    if found is None:
        return None
    where = [loc_text(sites[s].file, sites[s].line) if s is not None and s in sites else "a barrier of the loop's"
             for s in found.cut_sites]
    title, evidence = _split.describe(found, where)
    first = sites.get(found.cut_sites[0]) if found.cut_sites and found.cut_sites[0] is not None else None
    return Finding(id=f"split:{where[0]}", cause=CauseName.SPLIT_STEP, kind="split_step", title=title,
                   count=len(found.steps), compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0,
                   advice=_split.ADVICE, evidence=evidence, steps=list(found.steps), severity="info",
                   file=first.file if first else None, line=first.line if first else None,
                   func=first.func if first else None, code=first.code if first else None,
                   via=first.via if first else None)
