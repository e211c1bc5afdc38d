"""Group attributed compiles and host reads into findings, ranked by the seconds they cost.

:func:`build` groups the causes by finding key and hands each group to the module that
words its kind: host reads (:mod:`.reads`), input shapes and shardings (:mod:`.shapes`),
graph changes (:mod:`.graphs`), torch.compile (:mod:`.dynamo`), ops on the CPU
(:mod:`.fallback`), and where the barriers are or are not (:mod:`.barriers`). The names other
modules import from here (``sync_kind``, ``no_barrier``, ...) are re-exported below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.causes import Cause, Shardings, Signature
from xprof.analysis.findings.barriers import _eager_finding, _split_finding, eager_steps, no_barrier
from xprof.analysis.findings.common import _pattern
from xprof.analysis.findings.dynamo import (
    _commonest_guard,
    _dynamo_finding,
    _first_failures,
    _gave_up,
    _gave_up_finding,
    _size_guard,
)
from xprof.analysis.findings.fallback import _fallback_finding, _uncompiled_fallbacks
from xprof.analysis.findings.graphs import _graph_finding, _train_steps_before
from xprof.analysis.findings.reads import (
    ReadSums,
    _barrier_mechanism_finding,
    _closure_finding,
    _own_barrier_finding,
    _same_steps_value_shapes,
    _sync_finding,
    sync_kind,
)
from xprof.analysis.findings.series import SeriesIndex, _Series
from xprof.analysis.findings.shapes import _micro_batch_finding, _shape_finding, _sharding_finding
from xprof.analysis.model import Finding, FindingKey
from xprof.analysis.steps import training_barrier_sites
from xprof.analysis.tables import live_reads
from xprof.diagnosis import mechanisms as _mech
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES, DATA_DEPENDENT_FALLBACKS
from xprof.runfile import Site

__all__ = [  # (the underscored ones: for the tests of the parts)
    "DATA_DEPENDENT_FALLBACKS", "_Series", "_commonest_guard", "_dynamo_finding", "_first_failures",
    "_same_steps_value_shapes", "_size_guard", "_train_steps_before", "build", "eager_steps", "no_barrier",
    "sync_kind",
]


@dataclass
class _Run:
    """What every finding of a run is built from: its tables, its causes (one per compile,
    in the compiles' order), and the step numbers the user reads."""

    steps: pd.DataFrame
    compiles: pd.DataFrame
    causes: list[Cause]
    syncs: pd.DataFrame
    sigs: dict[int, Signature]
    sites: dict[int, Site]
    ordinal_of: dict[int, int]
    """Barrier index -> the training step it is reported under (:func:`_user_steps`)."""
    steady: int
    """How many training steps after warm-up ran a graph."""
    _series: SeriesIndex | None = None

    def series_index(self) -> SeriesIndex:
        """The signatures by input, built at the first shape finding and kept for the others."""
        if self._series is None:
            self._series = SeriesIndex(self.steps, self.sigs)
        return self._series


def build(steps: pd.DataFrame, compiles: pd.DataFrame, causes: list[Cause], syncs: pd.DataFrame,
          sigs: dict[int, Signature], sites: dict[int, Site] | None = None,
          dynamo_guards: list[dict[str, Any]] | None = None, specs: Shardings | None = None,
          dynamo_limits: list[dict[str, Any]] | None = None, reads_only: bool = False) -> list[Finding]:
    """The findings of a run, most time lost first; ``dynamo_limits``: the ``dynamo_limit``
    marks (torch.compile gave up on a function), with the barrier index they came before;
    ``reads_only``: a run that reached no barrier and ran no optimizer step (generation
    driven by its reads, ``model.generate()``), whose reads are all it did."""
    ords = steps["ordinal"].to_numpy()
    steady = len(pd.unique(ords[steps["work"].to_numpy(dtype=bool) & (ords >= 2)]))
    run = _Run(steps, compiles, causes, syncs, sigs, sites or {}, _user_steps(steps), steady)
    # Reads after the last barrier are a final print's, in no finding (but see ``reads_only``).
    last_barrier = (1 << 62) if reads_only else int(steps["i"].max()) if len(steps) else -1

    groups: dict[FindingKey, list[int]] = {}
    for k, c in enumerate(causes):
        if c.cause != "warmup":
            groups.setdefault(c.key, []).append(k)
    findings, dynamo_reads = _read_findings(run, groups, last_barrier)
    findings += _compile_findings(run, groups, dynamo_reads, dynamo_guards or [], specs or {}, dynamo_limits or [])
    return _finish(run, findings)


def _read_findings(run: _Run, groups: dict[FindingKey, list[int]],
                   last_barrier: int) -> tuple[list[Finding], pd.DataFrame]:
    """Host reads (and the compiles they forced), one finding per mechanism, and
    torch.compile's own reads (for its finding). Takes the read groups out of ``groups``:
    what is left are the compiles without a host read."""
    findings: list[Finding] = []
    syncs, compiles, causes, site_info = run.syncs, run.compiles, run.causes, run.sites
    loops = _mech.loop_lines(site_info, training_barrier_sites(run.steps))

    leaders = _dd_leaders(syncs)

    def gkey(site: int) -> str:
        return _mech.finding_id(FindingKey.sync(site), site_info, loops, leaders)

    for key in [k for k in groups if k.site is not None]:
        nk = FindingKey.parse(gkey(key.site or 0))
        if nk != key:
            groups.setdefault(nk, []).extend(groups.pop(key))
    keys_of = syncs["site"].map(lambda v: gkey(int(v))) if len(syncs) else pd.Series(dtype=object)
    dynamo_reads = syncs.iloc[0:0]
    if len(syncs):
        live = live_reads(syncs)
        live = live[live["step"] <= last_barrier]
        dynamo_reads = live[keys_of[live.index] == "dynamo"]
        live = live[keys_of[live.index] != "dynamo"]
        by_key = live.groupby(keys_of[live.index], sort=False)
        sums, at = ReadSums(live, compiles), by_key.indices
        for key, g in by_key:
            ks = groups.pop(FindingKey.parse(str(key)), [])
            findings.append(_sync_finding(str(key), g, compiles, ks, run.ordinal_of, run.steady, site_info,
                                          causes, run.steps, (sums, at[key])))
    for key in [k for k in groups if k.group in ("sync", "lib", "dd")]:
        ks = groups.pop(key)
        g = syncs[keys_of == str(key)] if len(syncs) else syncs
        if len(g):
            findings.append(_sync_finding(str(key), g, compiles, ks, run.ordinal_of, run.steady, site_info,
                                          causes, run.steps))
            continue
        mech = _mech.known(str(key))
        if mech is not None:
            findings.append(_barrier_mechanism_finding(mech, compiles.iloc[ks], causes[ks[0]]))
        elif causes[ks[0]].site is not None:
            findings.append(_own_barrier_finding(str(key), compiles.iloc[ks], causes[ks[0]],
                                                 site_info.get(int(causes[ks[0]].site or 0))))
    return findings, dynamo_reads


def _dd_leaders(syncs: pd.DataFrame) -> dict[int, int]:
    """The value-dependent ops' groups, as the walk joins them (:func:`mechanisms.join_dd`):
    only the step where a site first ran can join it, so only those steps are read."""
    leaders: dict[int, int] = {}
    if not len(syncs):
        return leaders
    live = live_reads(syncs)  # (the reads the walk's steps hold: analysis.causes._step_reads)
    dd = live[live["access"].isin(list(DATA_DEPENDENT_ACCESSES))]
    if not len(dd):
        return leaders
    firsts = set(dd.groupby("site")["step"].min().tolist())
    dd = dd[dd["step"].isin(firsts)].sort_values(["step", "t0"], kind="stable")
    for _, g in dd.groupby("step", sort=True):
        _mech.join_dd(leaders, list(dict.fromkeys(int(v) for v in g["site"])))
    return leaders


def _compile_findings(run: _Run, groups: dict[FindingKey, list[int]], dynamo_reads: pd.DataFrame,
                      dynamo_guards: list[dict[str, Any]], specs: Shardings,
                      dynamo_limits: list[dict[str, Any]]) -> list[Finding]:
    """One finding per key of the compiles without a host read, in the keys' order; the
    functions torch.compile gave up on go into the first dynamo finding (or one of their own
    when its retraces were all warm-up's, and no dynamo finding took them)."""
    findings: list[Finding] = []
    gave_up = _gave_up(dynamo_limits, run.compiles, run.causes, run.ordinal_of)
    # Each key's compiles as one slice of the compiles taken once in the keys' order: the same
    # rows as ``compiles.iloc[ks]``, without a take of every column for each of thousands of keys.
    taken = run.compiles.iloc[[k for ks in groups.values() for k in ks]]
    start = 0
    for key, ks in groups.items():
        c0 = run.causes[ks[0]]
        rows = taken.iloc[start:start + len(ks)]
        start += len(ks)
        if c0.cause == "dynamo":
            findings.append(_dynamo_finding(key, c0, rows, dynamo_reads, dynamo_guards, gave_up))
            gave_up = []
            continue
        findings.append(_compile_finding(run, key, ks, rows, specs))
    if gave_up:
        findings.append(_gave_up_finding(gave_up))
    return findings


def _compile_finding(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame, specs: Shardings) -> Finding:
    """The finding of the compiles ``ks`` (positions in ``run.compiles``; ``rows``: theirs)
    that share ``key``, by their first cause: a shape, a sharding, a graph, an op on the CPU,
    a step closure."""
    c0 = run.causes[ks[0]]
    steps, ordinal_of = run.steps, run.ordinal_of
    if c0.cause == "input_shape" and key.group == "micro":
        return _micro_batch_finding(key, c0, ks, run.causes, rows, ordinal_of)
    if c0.cause == "input_shape":
        return _shape_finding(c0, ks, run.causes, rows, steps, run.series_index(), ordinal_of, run.steady)
    if c0.cause == "input_sharding":
        return _sharding_finding(key, ks, run.causes, rows, steps, run.sigs, specs)
    if c0.cause == "graph_change":
        return _graph_finding(key, c0, rows, steps, ordinal_of, run.sites, run.compiles, run.syncs)
    if c0.cause == "cpu_fallback":
        return _fallback_finding(key, c0, rows, steps, ordinal_of, run.steady)
    if c0.cause == "step_closure":
        return _closure_finding(key, c0, rows, run.syncs)
    return _unknown_finding(run, key, ks, c0, rows)


def _unknown_finding(run: _Run, key: FindingKey, ks: list[int], c0: Cause, rows: pd.DataFrame) -> Finding:
    """Compiles no rule explained: said as such, with torch_xla's own words where it gave any."""
    ms = float(rows["ms"].sum())
    comp_steps = sorted({int(s) for s in rows["step"]})
    return Finding(
        id=str(key), cause="unknown", kind="unknown",
        title=f"{len(ks)} compile{'s' if len(ks) != 1 else ''} xprof could not explain ({ms / 1e3:.2f} s)",
        count=len(ks), compiles=len(ks), seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
        advice=ADVICE["unknown_debugged" if "torch_xla says" in c0.evidence else "unknown"],
        evidence=[c0.evidence] if c0.evidence else [], steps=comp_steps,
        pattern=_pattern([run.ordinal_of.get(s, 0) for s in comp_steps], run.steady),
    )


def _finish(run: _Run, findings: list[Finding]) -> list[Finding]:
    """The findings of the whole run added (ops on the CPU that compiled nothing, eager mode,
    a split step), the ones that tell of each other joined, steps made training steps, and
    the list ranked by the seconds lost."""
    findings.extend(_uncompiled_fallbacks(findings, run.steps, run.compiles, run.ordinal_of, run.steady))
    for extra in (_eager_finding(run.steps, run.compiles, run.steady), _split_finding(run.steps, run.sites)):
        if extra is not None:
            findings.append(extra)
    _same_steps_value_shapes([f for f in findings if f.cause == "data_dependent"])
    findings = _kinds_first_steps(findings, run.steps)
    if any(str(site.via or "").startswith("transformers.trainer") for site in run.sites.values()):
        for f in findings:  # the loader is the Trainer's: its setting, not DataLoader's
            if f.kind in ("partial_batch", "batch_size_change"):
                f.advice += " With transformers.Trainer: TrainingArguments(dataloader_drop_last=True)."
    _to_training_steps(findings, run.ordinal_of)
    _predictions(findings, *training_recompiles(run.causes, run.compiles, run.steps))
    findings.sort(key=lambda f: (-f.seconds, f.id))
    return findings


PREDICTED = ("input_shape", "data_dependent")
"""Causes whose advice, applied, removes every compile their finding owns and no other: a new
shape's compiles, and those of value-dependent shapes (grouped, so that one finding's advice
is every line that must change). Where causes meet on one compile (a graph that is new both
for its shape and for ops another pass left in it), the first rule owns it, and fixing the
other cause alone removes it too: no count is claimed for those."""


def training_recompiles(causes: list[Cause], compiles: pd.DataFrame, steps: pd.DataFrame) -> tuple[int, int]:
    """(recompiles after warm-up outside eval passes, those inside them): what a prediction
    counts, and what it leaves aside (an evaluation's own graphs are expected, and a collate
    shared with it pads its batches too, which no training finding's count should guess)."""
    in_eval = set(steps["i"].to_numpy()[steps["phase"].to_numpy(dtype=object) == "eval"].tolist())
    evals = sum(1 for c, s in zip(causes, compiles["step"].tolist()) if c.cause != "warmup" and int(s) in in_eval)
    return sum(1 for c in causes if c.cause != "warmup") - evals, evals


def _predictions(findings: list[Finding], recompiles: int, in_eval: int = 0) -> None:
    """What each finding's advice leaves: the training steps' recompiles (``recompiles``; eval
    passes' own, ``in_eval``, apart) without the finding's own, plus what a padding choice
    still compiles (each what-if row's ``run_recompiles``; ``leaves`` follows the last row,
    padding to the largest size). Said in the evidence, and checked by the fixed twins of the
    corpus loops (tests/test_predictions.py)."""
    for f in findings:
        if f.cause not in PREDICTED or not f.compiles or f.severity == "info" or f.kind == "input_kinds":
            continue
        rest = max(recompiles - f.compiles, 0)
        if f.what_if:
            for row in f.what_if:
                row["run_recompiles"] = rest + int(row.get("recompiles", 0))
            f.leaves = int(f.what_if[-1]["run_recompiles"])
            choice = str(f.what_if[-1]["strategy"])
        else:
            f.leaves = rest
            choice = ("both lines changed" if len(f.lines or ()) == 2 else f"all {len(f.lines)} lines changed"
                      if f.lines else "the fix applied")
        apart = f"; the evaluation's {in_eval} apart" if in_eval else ""
        f.evidence.append(f"with {choice}, training would recompile {f.leaves} time{'s' if f.leaves != 1 else ''} "
                          f"after warm-up ({recompiles} recorded{apart})")


def _kinds_first_steps(findings: list[Finding], steps: pd.DataFrame) -> list[Finding]:
    """Batches of different kinds taking turns (two tasks, each with its own head): each kind's
    first two steps do what warm-up does for a single kind (its head's optimizer state is made
    at its first update, its steady graph runs at the second). A graph change whose every
    compile is at the second step of its signature, when that signature's first step compiled
    for the shape, is that kind's: folded into the kinds finding (``input_kinds``: another rank
    or dtype) or else into the shape finding that compiled the first step."""
    kinds = next((f for f in findings if f.kind == "input_kinds"), None)
    shape = next((f for f in findings if f.cause == "input_shape" and f.kind != "micro_batches"), None)
    target = kinds or shape
    if target is None:
        return findings
    train = steps.loc[(steps["phase"] == "train") & steps["work"].astype(bool) & steps["sig"].notna(),
                      ["i", "sig", "uncached"]]  # (3 columns, not a copy of all 35: 280 MB at 1M steps)
    nth = train.groupby("sig").cumcount().to_numpy()
    ids, sigs = train["i"].to_numpy(), train["sig"].to_numpy(dtype=np.int64)
    first_of = dict(zip(sigs[nth == 0].tolist(), ids[nth == 0].tolist()))
    second = dict(zip(ids[nth == 1].tolist(), sigs[nth == 1].tolist()))  # step -> its signature
    compiled = set(train["i"].to_numpy()[train["uncached"].to_numpy() > 0].tolist())

    def kind_second(f: Finding) -> bool:
        return (f.kind in ("graph_change", "periodic_graph") and bool(f.steps)
                and all(s in second and (kinds is not None or first_of[second[s]] in compiled) for s in f.steps))

    out = []
    for f in findings:
        if f is not target and kind_second(f):
            target.compiles += f.compiles
            target.count += f.compiles
            target.seconds += f.seconds
            target.compile_seconds += f.compile_seconds
            target.steps = sorted(set(target.steps) | set(f.steps))
            target.evidence.append(f"{f.compiles} more at the second step of a kind "
                                   f"(same inputs as its first, another graph: {f.evidence[0]})")
            continue
        out.append(f)
    if kinds is not None:
        n = kinds.compiles  # (the title ends with its count and seconds: "...: 1 recompile, 0.68 s")
        kinds.title = (f"{kinds.title.rsplit(': ', 1)[0]}: {n} recompile{'s' if n != 1 else ''}, "
                       f"{kinds.seconds:.2f} s")
        kinds.severity = "info"
    elif len(out) < len(findings):
        n = target.compiles
        target.title = (f"{target.title.rsplit(': ', 1)[0]}: {n} recompile{'s' if n != 1 else ''}, "
                        f"{target.seconds:.2f} s")
    return out



def _user_steps(steps: pd.DataFrame) -> dict[int, int]:
    """Barrier index -> the training step it is reported under (``user_step``)."""
    return dict(zip(steps["i"].to_numpy(dtype=np.int64).tolist(), steps["user_step"].to_numpy(dtype=np.int64).tolist()))



def _to_training_steps(findings: list[Finding], user: dict[int, int]) -> None:
    """``Finding.steps`` in the user's training steps, not barrier indices: a barrier outside
    a training step (eval, dynamo, an empty one) counts as the training step before it
    (``user``: :func:`_user_steps`)."""
    for f in findings:
        f.steps = sorted({user.get(s, s) for s in f.steps})
