"""Give every uncached compile exactly one cause: the analysis' side of the diagnosis engine.

The rules are :mod:`xprof.diagnosis` (registry order is their precedence, docs/diagnosis.md
their reference). This module builds what they read from the tables: each step's facts
(:class:`~xprof.diagnosis.facts.StepFacts`, a column row each), each compile's, and the
facts only a whole run gives (:class:`~xprof.diagnosis.facts.WholeRun`: eval passes and
their owners, graphs that grew, CPU-fallback ops owned by a library call, torch_xla.compile's
entry barriers), then walks the steps that can change what the walk remembers.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from xprof.analysis.steps import eval_pass_ids, phase_is, training_barrier_sites
from xprof.analysis.tables import fallback_rows, live_reads
from xprof.diagnosis import walk as _walk
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import CompileFacts, Read, StepFacts, Walk, WholeRun
from xprof.diagnosis.mechanisms import call_key, loop_lines
from xprof.diagnosis.patterns import Shape
from xprof.diagnosis.rules.graphs import grown
from xprof.diagnosis.rules.passes import PassBarrier, eval_pass_owners
from xprof.diagnosis.signatures import Shardings, Signature
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES, WARMUP_STEPS
from xprof.runfile import Site


def attribute(steps: pd.DataFrame, compiles: pd.DataFrame, syncs: pd.DataFrame,
              sigs: dict[int, Signature], site_info: dict[int, Site] | None = None,
              specs: Shardings | None = None) -> list[Cause]:
    """One :class:`Cause` per row of ``compiles`` (same order)."""
    if not len(compiles):
        return []
    by_step: dict[int, list[int]] = {}
    for k, step in enumerate(compiles["step"].to_numpy()):
        by_step.setdefault(int(step), []).append(k)
    reads = _step_reads(syncs)
    facts = _compile_facts(compiles, syncs)
    walk = _walk_of(steps, compiles, syncs, sigs, site_info or {}, specs or {}, reads)
    dynamo_steps = {int(compiles["step"].iat[k]) for k, d in enumerate(_column(compiles, "debug_dynamo", False)) if d}
    matter, prev_barrier = _rows_that_matter(steps, set(by_step), {s for s, r in reads.items() if r}, dynamo_steps)
    # The training step each barrier leads to: torch.compile's own syncs belong to the step
    # whose forward it is tracing (the first steps' tracing is warm-up).
    rows = np.flatnonzero(matter)
    train = np.flatnonzero(phase_is(steps, "train"))
    next_ordinal = np.append(steps["ordinal"].to_numpy()[train], -1)  # (-1: no training step after)
    ahead = next_ordinal[np.searchsorted(train, rows)].tolist()
    result: dict[int, Cause] = {}
    for row, prev_kind, next_train in zip(_step_rows(steps, rows), prev_barrier[matter].tolist(), ahead):
        step = _step_facts(row, prev_kind, int(next_train), reads.get(int(row.i), []), dynamo_steps, walk)
        ks = by_step.get(step.i)
        if ks is not None:
            for k, cause in zip(ks, _walk.judge([facts[k] for k in ks], step, walk)):
                result[k] = cause
        _walk.advance(step, walk)
    out = [result[k] for k in range(len(compiles))]
    _debug_evidence(out, compiles)
    return out


def _column(df: pd.DataFrame, name: str, missing: Any) -> list[Any]:
    return df[name].tolist() if name in df else [missing] * len(df)


def _debug_evidence(causes: list[Cause], compiles: pd.DataFrame) -> None:
    """What torch_xla's debug output said of a compile no rule explained."""
    for cause, reason, where in zip(causes, _column(compiles, "debug_reason", None),
                                    _column(compiles, "debug_where", None)):
        if cause.cause == CauseName.UNKNOWN and reason:
            cause.evidence = f"{cause.evidence}; torch_xla says: \"{reason}\"" + (f" at {where}" if where else "")


def _step_reads(syncs: pd.DataFrame) -> dict[int, list[Read]]:
    """Each step's host reads that were not deferred, by start time."""
    out: dict[int, list[Read]] = {}
    live = live_reads(syncs)
    if not len(live):
        return out
    ran = (live["executions"].to_numpy(dtype=np.int64) + live["uncached"].to_numpy(dtype=np.int64)
           + live["cached"].to_numpy(dtype=np.int64)) > 0
    for step, site, t0, t1, access, did in zip(live["step"].tolist(), live["site"].tolist(), live["t0"].tolist(),
                                               live["t1"].tolist(), live["access"].tolist(), ran.tolist()):
        out.setdefault(int(step), []).append(Read(int(site), float(t0), float(t1), str(access), False, bool(did)))
    for found in out.values():
        found.sort(key=lambda r: r.t0)
    return out


def _compile_facts(compiles: pd.DataFrame, syncs: pd.DataFrame) -> list[CompileFacts]:
    """Each compile as the rules see it, with the host read it ran inside."""
    index = {int(k): n for n, k in enumerate(syncs.index.tolist())} if len(syncs) else {}
    cols = [syncs[c].tolist() for c in ("site", "t0", "t1", "access", "deferred")] if len(syncs) else []
    out = []
    for at, row, nodes, t, ms in zip(compiles["at"].tolist(), compiles["sync_row"].tolist(),
                                     compiles["graph_nodes"].tolist(), compiles["t"].tolist(), compiles["ms"].tolist()):
        read = None
        n = index.get(int(row)) if int(row) >= 0 else None
        if n is not None:
            site, t0, t1, access, deferred = (c[n] for c in cols)
            read = Read(int(site), float(t0), float(t1), str(access), bool(deferred), True)
        out.append(CompileFacts(str(at), float(t), float(ms), None if pd.isna(nodes) else int(nodes), read))
    return out


def _walk_of(steps: pd.DataFrame, compiles: pd.DataFrame, syncs: pd.DataFrame, sigs: dict[int, Signature],
             sites: dict[int, Site], specs: Shardings, reads: dict[int, list[Read]]) -> Walk:
    """The walk before the first step, with the run's dictionaries and its whole-run facts."""
    walk = Walk(sites=sites, specs=specs, train_nodes=_train_graph_nodes(steps))
    for sid, sig in sigs.items():
        walk.add_sig(sid, sig)
    walk.loops = loop_lines(sites, training_barrier_sites(steps))
    in_train_mode = (phase_is(steps, "train") & steps["work"].to_numpy(dtype=bool)
                     & (steps["ordinal"].to_numpy() >= 1) & ~steps["eval_mode"].to_numpy(dtype=bool))
    if in_train_mode.any():
        walk.first_in_train_mode = int(steps["i"].to_numpy()[in_train_mode][0])
    sites_by_step = {step: frozenset(r.site for r in found) for step, found in reads.items()}
    walk.whole = WholeRun(
        eval_owner=eval_pass_owners(_eval_passes(steps, sites_by_step), walk),
        grown=_growing_graphs(steps, compiles, walk.train_nodes),
        fallback_calls=_fallback_calls(steps, live_reads(syncs), sites, walk.loops),
        entry_sig=_compile_entry_sigs(steps),
        # A recorder that counts backward passes marks eval barriers itself (steps.assign); the
        # graph-size guess is only for files without that evidence.
        size_guess=not ("backward" in steps and bool(steps["backward"].to_numpy().any())),
        optimizer=bool((steps["opt"].to_numpy() > 0).any()))
    return walk


def _step_facts(row: Any, prev_kind: str, ahead: int, reads: list[Read], dynamo_steps: set[int],
                walk: Walk) -> StepFacts:
    """A step table row as the rules see it."""
    i = int(row.i)
    sig_id = None if pd.isna(row.sig) else int(row.sig)
    traced = row.dynamo_graphs > 0 or i in dynamo_steps
    phase = str(row.phase)
    return StepFacts(
        i=i, ordinal=int(row.ordinal), phase=phase, sig_id=sig_id,
        sites=frozenset(r.site for r in reads),
        dd_sites=list(dict.fromkeys(r.site for r in reads if r.access in DATA_DEPENDENT_ACCESSES)),
        index_sites=list(dict.fromkeys(r.site for r in reads if r.access == "index")),
        ran_sites=frozenset(r.site for r in reads if r.ran), reads=reads,
        # (a shape dynamo retraced for: its graphs compile on first use)
        dynamo=(row.barrier == "dynamo" or prev_kind == "dynamo" or traced
                or (sig_id is not None and sig_id in walk.dynamo_sigs)),
        barrier_site=None if pd.isna(row.site) else int(row.site),
        eval_mode=bool(row.eval_mode) and phase == "train", work=bool(row.work),
        pass_began=phase == "train" and bool(row.nograd) and int(row.backward) > 0,
        accumulates=phase == "train" and int(row.backward) > 0 and not int(row.opt)
        and walk.whole is not None and walk.whole.optimizer,
        nodes=None if pd.isna(row.graph_nodes) else int(row.graph_nodes),
        fallback=frozenset(row.fallback or ()), traced=traced, user_step=int(row.user_step), ahead=ahead)


def signatures(inputs: pd.DataFrame) -> dict[int, Signature]:
    out: dict[int, list[tuple[str, Shape, str, str]]] = {}
    for sig, name, shape, dtype, src in zip(*(inputs[c].tolist() for c in ("sig", "name", "shape", "dtype", "src"))):
        out.setdefault(int(sig), []).append((name, tuple(shape), dtype, src))
    return {k: tuple(v) for k, v in out.items()}


def shardings(inputs: pd.DataFrame) -> Shardings:
    """The recorded sharding of each input of each signature (empty outside SPMD runs)."""
    out: Shardings = {}
    if "sharding" not in inputs:
        return out
    for sig, name, spec in zip(inputs["sig"].tolist(), inputs["name"].tolist(), inputs["sharding"].tolist()):
        if isinstance(spec, str):
            out.setdefault(int(sig), {})[str(name)] = spec
    return out



_ROW_COLUMNS = ["i", "sig", "ordinal", "user_step", "dynamo_graphs", "phase", "barrier", "site", "work",
                "fallback", "graph_nodes", "eval_mode", "nograd", "backward", "opt"]
_Row = NamedTuple("_Row", [(c, Any) for c in _ROW_COLUMNS])  # type: ignore[misc]


def _step_rows(steps: pd.DataFrame, rows: np.ndarray) -> list[Any]:
    """The step table's ``rows`` (positions) as named tuples of Python values (pd.NA or NaN
    where missing), as ``itertuples`` gives them, without a copy of the rows first."""
    return [_Row._make(r) for r in zip(*(steps[c].to_numpy()[rows].tolist() for c in _ROW_COLUMNS))]


def _rows_that_matter(steps: pd.DataFrame, compiled: set[int], read: set[int],
                      dynamo_steps: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """The steps :func:`attribute`'s walk has to visit: those that compiled, and those that add
    something to what it remembers (a read site, a fallback op, a signature, a (signature,
    sites) pair or a graph size not seen before, a dynamo signature). The others change
    nothing, and a long run has a million of them. Also the barrier kind of the step before
    each step (the walk reads it for the rows it visits). (A new line of state in the walk
    needs its rows here.)
    """
    barrier = steps["barrier"].to_numpy(dtype=object)
    prev = np.empty(len(barrier), dtype=object)
    prev[:1] = ""
    prev[1:] = barrier[:-1]
    idx = steps["i"].to_numpy()
    has_sites = np.isin(idx, list(read))
    matter = np.isin(idx, list(compiled)) | has_sites | np.isin(idx, list(dynamo_steps))
    matter[fallback_rows(steps)] = True
    matter |= steps["dynamo_graphs"].to_numpy() > 0
    trained = steps["work"].to_numpy(dtype=bool) & phase_is(steps, "train")
    steady = trained & (steps["ordinal"].to_numpy() >= 1)
    sig = steps["sig"].to_numpy(dtype=np.float64, na_value=np.nan)
    nodes = steps["graph_nodes"].to_numpy(dtype=np.float64, na_value=np.nan)
    # first seen: a signature in training (sig_step), a steady signature (seen_sigs), a steady
    # (signature, no reads) pair (seen_keys; rows with reads are all visited), a graph size
    for values, among in ((sig, trained), (sig, steady), (sig, steady & ~has_sites), (nodes, steady)):
        first = ~pd.Series(values[among]).duplicated(keep="first").to_numpy()
        rows = np.flatnonzero(among)
        matter[rows[first]] = True
    # a signature's second training step (sig_runs: a kind of batch's second step)
    matter[np.flatnonzero(trained)[second_seen(sig[trained])]] = True
    return matter, prev


def second_seen(values: np.ndarray) -> np.ndarray:
    """Where each value (NaN: none) is seen the second time: positions, in order (as a
    groupby's ``cumcount() == 1``, without the groupby)."""
    again = np.flatnonzero(pd.Series(values).duplicated(keep="first").to_numpy() & ~np.isnan(values))
    return again[~pd.Series(values[again]).duplicated(keep="first").to_numpy()]



def _eval_passes(steps: pd.DataFrame, sites_by_step: dict[int, frozenset[int]]) -> list[list[PassBarrier]]:
    """The run's eval passes (:func:`~xprof.analysis.steps.eval_pass_ids`), each its barriers
    in order, for :func:`~xprof.diagnosis.rules.passes.eval_pass_owners`."""
    ids = eval_pass_ids(steps)
    rows = np.flatnonzero(ids >= 0)
    if not len(rows):
        return []  # no eval barrier, no pass (and no walk over a long run's steps)
    site_col = _optional_ints(steps["site"].iloc[rows])
    step_ids = steps["i"].to_numpy()[rows].tolist()
    fed = steps["sig"].notna().to_numpy(dtype=bool)[rows].tolist() if "sig" in steps else [False] * len(rows)
    by_pass: dict[int, list[PassBarrier]] = {}
    for k, pass_id in enumerate(ids[rows].tolist()):
        step = int(step_ids[k])
        barrier = PassBarrier(step, site_col[k], sites_by_step.get(step, frozenset()), fed[k])
        by_pass.setdefault(pass_id, []).append(barrier)
    return list(by_pass.values())


def _optional_ints(column: pd.Series) -> list[int | None]:
    """A nullable integer column as a list of Python ints, None where missing."""
    if isinstance(column.dtype, pd.Int64Dtype):
        missing = column.isna().to_numpy()
        values = column.to_numpy(dtype=np.int64, na_value=0).tolist()
        if not missing.any():
            return values
        return [None if m else v for v, m in zip(values, missing.tolist())]
    return [None if pd.isna(v) else int(v) for v in column.tolist()]



def _growing_graphs(steps: pd.DataFrame, compiles: pd.DataFrame,
                    train_nodes: int | None) -> dict[tuple[int, int], list[int]]:
    """The barrier compiles of training steps after warm-up where, for one input signature,
    each new graph was larger than the training step's and every one before it, at least
    :data:`GROWING_GRAPHS` times: (step, nodes) -> the node counts of that run (50, 60, 70 for
    a list of 10 more losses stacked every 10 steps)."""
    if not len(compiles) or train_nodes is None:
        return {}
    # (the step table is in barrier order: each compile's row by bisection, not a re-index of
    # a run's million rows)
    ids = steps["i"].to_numpy()
    sig_col, ordinal, phase, work = (steps["sig"], steps["ordinal"].to_numpy(), steps["phase"].to_numpy(dtype=object),
                                     steps["work"].to_numpy(dtype=bool))
    at = compiles["at"].to_numpy(dtype=object)
    by_sig: dict[int, list[tuple[int, int]]] = {}
    for k, (step, nodes) in enumerate(zip(compiles["step"].tolist(), compiles["graph_nodes"].tolist())):
        row = int(np.searchsorted(ids, int(step)))
        if at[k] == "step" or nodes is None or pd.isna(nodes) or row >= len(ids) or ids[row] != int(step):
            continue
        sig = sig_col.iat[row]
        if phase[row] == "train" and work[row] and not pd.isna(sig) and ordinal[row] >= WARMUP_STEPS:
            by_sig.setdefault(int(sig), []).append((int(step), int(nodes)))
    return grown(by_sig, train_nodes)



def _train_graph_nodes(steps: pd.DataFrame) -> int | None:
    """The node count most steady steps' graphs have (the first seen among equals)."""
    nodes = steps["graph_nodes"]
    keep = steps["work"].to_numpy(dtype=bool) & (steps["ordinal"].to_numpy() >= 1) & nodes.notna().to_numpy()
    if not keep.any():
        return None
    codes, values = pd.factorize(nodes.to_numpy(dtype=np.int64, na_value=0)[keep])
    return int(values[int(np.argmax(np.bincount(codes)))])



def _fallback_calls(steps: pd.DataFrame, reads: pd.DataFrame, sites: dict[int, Site],
                    loops: frozenset[tuple[str, int]]) -> dict[str, tuple[str, str, int]]:
    """The CPU-fallback ops each of whose steps had reads of one library call made at a user
    line outside the training loop's own (see :attr:`~xprof.diagnosis.facts.WholeRun.fallback_calls`)."""
    rows = fallback_rows(steps)
    if not len(rows) or not len(reads):
        return {}
    call_steps: dict[tuple[str, str, int], set[int]] = {}
    for step, sid in zip(reads["step"].tolist(), reads["site"].tolist()):
        key = call_key(sites.get(int(sid)))
        if key is not None and key[1:] not in loops:
            call_steps.setdefault(key, set()).add(int(step))
    if not call_steps:
        return {}
    op_steps: dict[str, set[int]] = {}
    for i, d in zip(steps["i"].to_numpy()[rows].tolist(), steps["fallback"].to_numpy()[rows].tolist()):
        for op in d:
            op_steps.setdefault(op, set()).add(int(i))
    out = {}
    for op, ran in op_steps.items():
        calls = [c for c, seen in call_steps.items() if ran <= seen]
        if len(calls) == 1:
            out[op] = calls[0]
    return out



def _compile_entry_sigs(steps: pd.DataFrame) -> dict[int, int]:
    """Each torch_xla.compile entry barrier -> the signature of the call's barrier after it."""
    kinds = steps["barrier"].to_numpy(dtype=object)
    at = np.flatnonzero(kinds[:-1] == "compile_entry") if len(kinds) > 1 else np.zeros(0, dtype=np.int64)
    if not len(at):
        return {}
    ids, sig = steps["i"].to_numpy(), steps["sig"]
    return {int(ids[k]): int(sig.iat[k + 1]) for k in at.tolist()
            if kinds[k + 1] == "compile" and not pd.isna(sig.iat[k + 1])}


