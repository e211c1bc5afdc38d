"""Group attributed compiles and host reads into findings, ranked by the seconds they cost.

:func:`build` groups the causes by finding key and hands each group to the module that
words its kind: host reads (:mod:`.reads`), input shapes and shardings (:mod:`.shapes`),
graph changes (:mod:`.graphs`), torch.compile (:mod:`.dynamo`), ops on the CPU
(:mod:`.fallback`), and where the barriers are or are not (:mod:`.barriers`). The names other
modules import from here (``no_barrier``, ...) are re-exported below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.findings.barriers import eager_finding, eager_steps, no_barrier, split_finding
from xprof.analysis.findings.common import UserSteps, step_pattern
from xprof.analysis.findings.dynamo import (
    commonest_guard,
    dynamo_finding,
    first_failures,
    functions_given_up,
    gave_up_finding,
    size_guard,
)
from xprof.analysis.findings.fallback import fallback_finding, uncompiled_fallbacks
from xprof.analysis.findings.graphs import graph_finding, train_steps_before
from xprof.analysis.findings.reads import (
    ReadSums,
    barrier_mechanism_finding,
    closure_finding,
    own_barrier_finding,
    same_steps_value_shapes,
    sync_finding,
)
from xprof.analysis.findings.series import Series, SeriesIndex
from xprof.analysis.findings.shapes import micro_batch_finding, shape_finding, sharding_finding
from xprof.analysis.model import Finding
from xprof.analysis.steps import phase_is, training_barrier_sites
from xprof.analysis.tables import live_reads
from xprof.diagnosis import mechanisms as _mech
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.registry import BY_NAME
from xprof.diagnosis.signatures import Shardings, Signature
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES, DATA_DEPENDENT_FALLBACKS
from xprof.diagnosis.unit import FindingOf
from xprof.runfile import Site

__all__ = [  # (the underscored ones: for the tests of the parts)
    "DATA_DEPENDENT_FALLBACKS",
    "Series",
    "build",
    "commonest_guard",
    "dynamo_finding",
    "eager_steps",
    "first_failures",
    "no_barrier",
    "same_steps_value_shapes",
    "size_guard",
    "train_steps_before",
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
    ordinal_of: Mapping[int, int]
    """Barrier index -> the training step it is reported under (:func:`_user_steps`)."""
    steady: int
    """How many training steps after warm-up ran a graph."""
    specs: Shardings
    """The recorded sharding of each input of each signature (SPMD)."""
    fallback_sites: dict[str, dict[str, Any]]
    """A CPU-fallback op -> the forward call its backward op came from (``fallback_site``)."""
    _series: SeriesIndex | None = None

    def series_index(self) -> SeriesIndex:
        """The signatures by input, built at the first shape finding and kept for the others."""
        if self._series is None:
            self._series = SeriesIndex(self.steps, self.sigs)
        return self._series


def build(steps: pd.DataFrame, compiles: pd.DataFrame, causes: list[Cause], syncs: pd.DataFrame,
          sigs: dict[int, Signature], sites: dict[int, Site] | None = None,
          dynamo_guards: list[dict[str, Any]] | None = None, specs: Shardings | None = None,
          dynamo_limits: list[dict[str, Any]] | None = None, reads_only: bool = False,
          fallback_sites: dict[str, dict[str, Any]] | None = None) -> list[Finding]:
    """The findings of a run, most time lost first; ``dynamo_limits``: the ``dynamo_limit``
    marks (torch.compile gave up on a function), with the barrier index they came before;
    ``reads_only``: a run that reached no barrier and ran no optimizer step (generation
    driven by its reads, ``model.generate()``), whose reads are all it did;
    ``fallback_sites``: the ``fallback_site`` marks by op (where a backward op's forward was)."""
    ords = steps["ordinal"].to_numpy()
    steady = len(pd.unique(ords[steps["work"].to_numpy(dtype=bool) & (ords >= 2)]))
    run = _Run(steps, compiles, causes, syncs, sigs, sites or {}, _user_steps(steps), steady, specs or {},
               fallback_sites or {})
    # Reads after the last barrier are a final print's, in no finding (but see ``reads_only``).
    last_barrier = (1 << 62) if reads_only else int(steps["i"].max()) if len(steps) else -1

    groups: dict[FindingKey, list[int]] = {}
    for k, c in enumerate(causes):
        if c.cause != CauseName.WARMUP:
            groups.setdefault(c.key, []).append(k)
    findings, dynamo_reads = _read_findings(run, groups, last_barrier)
    findings += _compile_findings(run, groups, dynamo_reads, dynamo_guards or [], dynamo_limits or [])
    for after in PASSES:
        findings = after(run, findings)
    return findings


def _read_findings(run: _Run, groups: dict[FindingKey, list[int]],
                   last_barrier: int) -> tuple[list[Finding], pd.DataFrame]:
    """Host reads (and the compiles they forced), one finding per mechanism, and
    torch.compile's own reads (for its finding). Takes the read groups out of ``groups``:
    what is left are the compiles without a host read."""
    findings: list[Finding] = []
    syncs, compiles, causes, site_info = run.syncs, run.compiles, run.causes, run.sites
    loops = _mech.loop_lines(site_info, training_barrier_sites(run.steps))

    leaders = _dd_leaders(syncs)

    alike = _mech.same_line_sites(site_info)

    def gkey(site: int) -> str:
        return _mech.finding_id(FindingKey.sync(alike.get(site, site)), site_info, loops, leaders)

    for key in [k for k in groups if k.site is not None]:
        nk = FindingKey.parse(gkey(key.site or 0))
        if nk != key:
            groups.setdefault(nk, []).extend(groups.pop(key))
    key_of_site = {site: gkey(int(site)) for site in set(syncs["site"].tolist())} if len(syncs) else {}
    keys_of = (pd.Series([key_of_site[site] for site in syncs["site"].tolist()], index=syncs.index, dtype=object)
               if len(syncs) else pd.Series(dtype=object))
    dynamo_reads = syncs.iloc[0:0]
    if len(syncs):
        live = live_reads(syncs)
        in_steps = live["step"].to_numpy() <= last_barrier
        if not in_steps.all():
            live = live[in_steps]
        live_keys = keys_of.loc[live.index].to_numpy(dtype=object)
        dynamo = live_keys == "dynamo"
        if dynamo.any():
            dynamo_reads, live, live_keys = live[dynamo], live[~dynamo], live_keys[~dynamo]
        at: dict[str, list[int]] = {}  # (each key's rows, keys in order of first appearance: a groupby's)
        for k, name in enumerate(live_keys.tolist()):
            at.setdefault(name, []).append(k)
        sums = ReadSums(live, compiles)
        for name, rows in at.items():
            ks = groups.pop(FindingKey.parse(name), [])
            findings.append(sync_finding(name, live.take(rows), compiles, ks, run.ordinal_of, run.steady,
                                          site_info, causes, run.steps, (sums, np.asarray(rows, dtype=np.int64))))
    for key in [k for k in groups if k.group in ("sync", "lib", "dd")]:
        ks = groups.pop(key)
        g = syncs[keys_of == str(key)] if len(syncs) else syncs
        if len(g):
            findings.append(sync_finding(str(key), g, compiles, ks, run.ordinal_of, run.steady, site_info,
                                          causes, run.steps))
            continue
        mech = _mech.known(str(key))
        if mech is not None:
            findings.append(barrier_mechanism_finding(mech, compiles.iloc[ks], causes[ks[0]]))
        elif causes[ks[0]].site is not None:
            findings.append(own_barrier_finding(str(key), compiles.iloc[ks], causes[ks[0]],
                                                 site_info.get(int(causes[ks[0]].site or 0))))
    return findings, dynamo_reads


def _dd_leaders(syncs: pd.DataFrame) -> dict[int, int]:
    """The value-dependent ops' groups, as the walk joins them (:func:`mechanisms.join_dd`):
    only the step where a site first ran can join it, so only those steps are read."""
    leaders: dict[int, int] = {}
    if not len(syncs):
        return leaders
    live = live_reads(syncs)  # (the reads the walk's steps hold: analysis.causes._step_reads)
    access = live["access"].to_numpy(dtype=object).tolist()
    is_dd = np.fromiter((a in DATA_DEPENDENT_ACCESSES for a in access), dtype=bool, count=len(access))
    if not is_dd.any():
        return leaders
    dd = live[is_dd]
    firsts = set(dd.groupby("site")["step"].min().tolist())
    dd = dd[dd["step"].isin(firsts)].sort_values(["step", "t0"], kind="stable")
    for _, g in dd.groupby("step", sort=True):
        _mech.join_dd(leaders, list(dict.fromkeys(int(v) for v in g["site"])))
    return leaders


def _compile_findings(run: _Run, groups: dict[FindingKey, list[int]], dynamo_reads: pd.DataFrame,
                      dynamo_guards: list[dict[str, Any]],
                      dynamo_limits: list[dict[str, Any]]) -> list[Finding]:
    """One finding per key of the compiles without a host read, in the keys' order; the
    functions torch.compile gave up on go into the first dynamo finding (or one of their own
    when its retraces were all warm-up's, and no dynamo finding took them)."""
    findings: list[Finding] = []
    gave_up = functions_given_up(dynamo_limits, run.compiles, run.causes, run.ordinal_of)
    # Each key's compiles as one slice of the compiles taken once in the keys' order: the same
    # rows as ``compiles.iloc[ks]``, without a take of every column for each of thousands of keys.
    taken = run.compiles.iloc[[k for ks in groups.values() for k in ks]]
    start = 0
    for key, ks in groups.items():
        c0 = run.causes[ks[0]]
        rows = taken.iloc[start:start + len(ks)]
        start += len(ks)
        if c0.cause == CauseName.DYNAMO:
            findings.append(dynamo_finding(key, c0, rows, dynamo_reads, dynamo_guards, gave_up))
            gave_up = []
            continue
        findings.append(_compile_finding(run, key, ks, rows))
    if gave_up:
        findings.append(gave_up_finding(gave_up))
    return findings


Builder = Callable[[_Run, FindingKey, list[int], pd.DataFrame], Finding]
"""Makes the finding of the compiles ``ks`` (positions in ``run.compiles``; ``rows``: theirs)
that share a key."""


def _shape(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame) -> Finding:
    c0 = run.causes[ks[0]]
    if key.group == "micro":
        return micro_batch_finding(key, c0, ks, run.causes, rows, run.ordinal_of)
    return _shape_and_kinds(run, c0, ks, rows)


def _sharding(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame) -> Finding:
    return sharding_finding(key, ks, run.causes, rows, run.steps, run.sigs, run.specs)


def _graph(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame) -> Finding:
    return graph_finding(key, run.causes[ks[0]], rows, run.steps, run.ordinal_of, run.sites, run.compiles, run.syncs)


def _fallback(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame) -> Finding:
    return fallback_finding(key, run.causes[ks[0]], rows, run.steps, run.ordinal_of, run.steady, run.fallback_sites)


def _closure(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame) -> Finding:
    return closure_finding(key, run.causes[ks[0]], rows, run.syncs)


BUILDERS: dict[CauseName, Builder] = {
    CauseName.INPUT_SHAPE: _shape,
    CauseName.INPUT_SHARDING: _sharding,
    CauseName.GRAPH_CHANGE: _graph,
    CauseName.CPU_FALLBACK: _fallback,
    CauseName.STEP_CLOSURE: _closure,
}
"""The finding builder of each cause whose compiles ran outside a host read (host reads'
findings: :func:`_read_findings`; torch.compile's: :func:`_compile_findings`), by the cause
of a key's first compile; any other is said as unexplained (:func:`_unknown_finding`)."""


def _compile_finding(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame) -> Finding:
    """The finding of the compiles ``ks`` that share ``key``: the first one's rule's own words
    when it has them (:attr:`~xprof.diagnosis.registry.Rule.finding`), else its cause's builder."""
    rule = BY_NAME.get(run.causes[ks[0]].rule)
    if rule is not None and rule.finding is not None:
        return _rule_finding(run, key, ks, rows, rule.finding)
    build_one = BUILDERS.get(run.causes[ks[0]].cause)
    if build_one is None:
        return _unknown_finding(run, key, ks, run.causes[ks[0]], rows)
    return build_one(run, key, ks, rows)


def _rule_finding(run: _Run, key: FindingKey, ks: list[int], rows: pd.DataFrame, words: FindingOf) -> Finding:
    """A finding worded by its rule (the numbers are the compiles')."""
    c0 = run.causes[ks[0]]
    ms = float(rows["ms"].sum())
    said = words(c0, len(ks), ms / 1e3)
    comp_steps = sorted({int(s) for s in rows["step"]})
    return Finding(
        id=str(key), cause=c0.cause, kind=said.kind, title=said.title, count=len(ks), compiles=len(ks),
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=said.advice,
        evidence=said.evidence, steps=comp_steps, pattern=step_pattern([run.ordinal_of.get(s, 0) for s in comp_steps],
                                                                   run.steady))


def _unknown_finding(run: _Run, key: FindingKey, ks: list[int], c0: Cause, rows: pd.DataFrame) -> Finding:
    """Compiles no rule explained: said as such, with torch_xla's own words where it gave any."""
    ms = float(rows["ms"].sum())
    comp_steps = sorted({int(s) for s in rows["step"]})
    return Finding(
        id=str(key), cause=CauseName.UNKNOWN, kind="unknown",
        title=f"{len(ks)} compile{'s' if len(ks) != 1 else ''} xprof could not explain ({ms / 1e3:.2f} s)",
        count=len(ks), compiles=len(ks), seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
        advice=ADVICE["unknown_debugged" if "torch_xla says" in c0.evidence else "unknown"],
        evidence=[c0.evidence] if c0.evidence else [], steps=comp_steps,
        pattern=step_pattern([run.ordinal_of.get(s, 0) for s in comp_steps], run.steady),
    )


Pass = Callable[[_Run, list[Finding]], list[Finding]]
"""A named step after the walk: it adds the findings of the whole run, groups, words or
ranks; none moves a compile to another cause (the walk decided each one's)."""


def add_uncompiled_fallbacks(run: _Run, findings: list[Finding]) -> list[Finding]:
    """Ops on the CPU in steady steps that compiled nothing: each still cuts the graph."""
    return findings + uncompiled_fallbacks(findings, run.steps, run.compiles, run.ordinal_of, run.steady,
                                           run.fallback_sites)


def add_eager_mode(run: _Run, findings: list[Finding]) -> list[Finding]:
    """Training steps run op by op (eager mode)."""
    found = eager_finding(run.steps, run.compiles, run.steady)
    return findings + ([found] if found is not None else [])


def add_split_step(run: _Run, findings: list[Finding]) -> list[Finding]:
    """Training steps cut by more than one barrier that ran a graph."""
    found = split_finding(run.steps, run.sites)
    return findings + ([found] if found is not None else [])


def group_value_shapes(run: _Run, findings: list[Finding]) -> list[Finding]:
    """Value-dependent shapes in the same steps tell of each other."""
    same_steps_value_shapes([f for f in findings if f.cause == CauseName.DATA_DEPENDENT])
    return findings


def trainer_loader_advice(run: _Run, findings: list[Finding]) -> list[Finding]:
    """With transformers.Trainer the loader is the Trainer's: its setting, not DataLoader's."""
    if any(str(site.via or "").startswith("transformers.trainer") for site in run.sites.values()):
        for f in findings:
            if f.kind in ("partial_batch", "batch_size_change"):
                f.advice += (" With transformers.Trainer: TrainingArguments(dataloader_drop_last=True), which "
                             "leaves the last partial batch out the same way.")
    return findings


def in_training_steps(run: _Run, findings: list[Finding]) -> list[Finding]:
    """``Finding.steps`` in the user's training steps, not barrier indices."""
    _to_training_steps(findings, run.ordinal_of)
    return findings


def predict(run: _Run, findings: list[Finding]) -> list[Finding]:
    """What each finding's advice leaves (the corpus' fixed twins check it)."""
    _predictions(findings, *training_recompiles(run.causes, run.compiles, run.steps))
    return findings


def rank(run: _Run, findings: list[Finding]) -> list[Finding]:
    """Most seconds lost first."""
    return sorted(findings, key=lambda f: (-f.seconds, f.id))


PASSES: tuple[Pass, ...] = (add_uncompiled_fallbacks, add_eager_mode, add_split_step, group_value_shapes,
                            trainer_loader_advice, in_training_steps, predict, rank)
"""What runs after the findings are built, in this order (pyinstrument's processors)."""


PREDICTED = (CauseName.INPUT_SHAPE, CauseName.DATA_DEPENDENT)
"""Causes whose advice, applied, removes every compile their finding owns and no other: a new
shape's compiles, and those of value-dependent shapes (grouped, so that one finding's advice
is every line that must change). Where causes meet on one compile (a graph that is new both
for its shape and for ops another pass left in it), the first rule owns it, and fixing the
other cause alone removes it too: no count is claimed for those."""


def training_recompiles(causes: list[Cause], compiles: pd.DataFrame, steps: pd.DataFrame) -> tuple[int, int]:
    """(recompiles after warm-up outside eval passes, those inside them): what a prediction
    counts, and what it leaves aside (an evaluation's own graphs are expected, and a collate
    shared with it pads its batches too, which no training finding's count should guess)."""
    in_eval = set(steps["i"].to_numpy()[phase_is(steps, "eval")].tolist())
    evals = sum(1 for c, s in zip(causes, compiles["step"].tolist())
                if c.cause != CauseName.WARMUP and int(s) in in_eval)
    return sum(1 for c in causes if c.cause != CauseName.WARMUP) - evals, evals


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


def _shape_and_kinds(run: _Run, c0: Cause, ks: list[int], rows: pd.DataFrame) -> Finding:
    """An input's shape finding, with the second steps of each kind of batch the walk joined to
    it (``second_of_kind``: each kind's steady graph after its one-off first) counted in."""
    second = [n for n, k in enumerate(ks) if run.causes[k].rule == "second_of_kind"]
    if not second:
        return shape_finding(c0, ks, run.causes, rows, run.steps, run.series_index(), run.ordinal_of, run.steady)
    at_second = set(second)
    own = [n for n in range(len(ks)) if n not in at_second]
    f = shape_finding(c0, [ks[n] for n in own], run.causes, rows.iloc[own], run.steps, run.series_index(),
                       run.ordinal_of, run.steady)
    extra = rows.iloc[second]
    n, s = len(second), float(extra["ms"].sum()) / 1e3
    f.compiles += n
    f.count += n
    f.seconds += s
    f.compile_seconds += s
    f.steps = sorted(set(f.steps) | {int(v) for v in extra["step"]})
    f.evidence.append(f"{n} more {run.causes[ks[second[0]]].evidence}")
    if f.kind == "input_kinds":
        f.severity = "info"
    f.title = f"{f.title.rsplit(': ', 1)[0]}: {f.compiles} recompile{'s' if f.compiles != 1 else ''}, {f.seconds:.2f} s"
    return f


def _user_steps(steps: pd.DataFrame) -> UserSteps:
    """Barrier index -> the training step it is reported under (``user_step``)."""
    return UserSteps(steps["i"].to_numpy(dtype=np.int64), steps["user_step"].to_numpy(dtype=np.int64))



def _to_training_steps(findings: list[Finding], user: Mapping[int, int]) -> None:
    """``Finding.steps`` in the user's training steps, not barrier indices: a barrier outside
    a training step (eval, dynamo, an empty one) counts as the training step before it
    (``user``: :func:`_user_steps`)."""
    for f in findings:
        f.steps = sorted({user.get(s, s) for s in f.steps})
