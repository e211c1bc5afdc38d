"""Give every uncached compile exactly one cause (docs/diagnosis.md has the rules).

The rules, in order, for a compile at a barrier (a compile inside a host read is
``implicit_sync`` at that read's line):

1. ``warmup``: the barrier of one of the first :data:`WARMUP_STEPS` steps that ran a graph,
   except a second step with other input shapes than the first when the first graph was
   not a one-off (its shapes came back later without compiling, or the second graph has
   the same size): then the shape change is to blame; and except a host read's second and
   later compiles in a step where its graph grew from read to read (:func:`growing_reads`).
2. ``cpu_fallback``: ops without an XLA lowering ran for the first time in this step.
3. ``input_shape``: this step's input signature was never seen in an earlier steady-state
   step (step 0's graph is a one-off, so a shape seen only there still recompiles).
   ``input_sharding`` (SPMD runs) when its shapes were all seen before, in a signature
   that sharded one or more of the inputs another way: the sharding is part of the graph.
4. ``implicit_sync``: same inputs as before, but a host read in this step (at a line not
   read from before with these inputs) materialized a tensor, which changes the graph.
5. ``graph_change``: same inputs and reads, different graph: control flow that depends on
   the step, an eval pass, a Python scalar baked in as a constant.
6. ``unknown``: no inputs were recorded for the step and nothing else explains it.

A compile in an eval pass (eval barriers, from the recorded grad mode, ``model.eval()`` and
backward-pass evidence) belongs to the mechanism that ran the pass (the HF Trainer's
evaluation) or to the pass (``graph_change``/``eval_pass``), whatever its input shapes. In
files recorded without backward-pass evidence, a barrier graph far smaller than the
training graph stands in for that evidence.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from operator import ne
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from xprof.analysis.mechanisms import DATA_DEPENDENT_ACCESSES, loop_lines, mechanism, mechanisms_through, own_barrier
from xprof.analysis.model import EVAL_KEY, EVAL_MODE_KEY, WARMUP_KEY, WARMUP_STEPS, FindingKey
from xprof.analysis.patterns import Shape, changed_dims, shape_distance
from xprof.analysis.steps import eval_pass_ids, training_barrier_sites
from xprof.analysis.tables import fallback_rows, live_reads
from xprof.runfile import (
    GROWING_GRAPHS,
    Site,
    added_inputs,
    base_input_name,
    grew,
    listed_inputs,
    micro_batch_change,
)

EVAL_GRAPH_RATIO = 0.75
"""A barrier graph with fewer nodes than this share of the training graph is an eval pass."""

Signature = tuple[tuple[str, Shape, str, str], ...]
Shardings = dict[int, dict[str, str]]
"""SPMD runs: signature id -> input name -> its sharding spec (``""``: none)."""


@dataclass
class Cause:
    cause: str
    key: FindingKey
    """Groups compiles into one finding."""
    input: str | None = None
    dim: int | None = None
    old: Shape | None = None
    new: Shape | None = None
    site: int | None = None
    evidence: str = ""
    sharding: tuple[str, str] | None = None
    """``input_sharding``: the input's sharding (before, now)."""
    earlier: int | None = None
    """``input_sharding``: the step that ran the same shapes sharded the other way."""
    first_step_only: bool = False
    """``input_shape``: these inputs ran before, but only in the one-off first step (two tasks
    taking turns: each one's second step compiles its steady graph)."""
    no_host: str = ""
    """``graph_change`` in a step with no input from the host: ``same`` when a graph of its
    size ran before (the same ops: other shapes or constants), ``new`` when none did."""
    leftovers: bool = False
    """``implicit_sync`` at a barrier whose graph was larger than the training step's: ops
    left pending before the step joined it."""


FIRST_STEP_ONLY = "; these inputs ran before only in the one-off first step, whose graph differs"
"""Said of a shape change whose inputs only the first step had (:attr:`Cause.first_step_only`)."""


def signatures(inputs: pd.DataFrame) -> dict[int, Signature]:
    out: dict[int, list[tuple[str, Shape, str, str]]] = {}
    for row in inputs.itertuples(index=False):
        out.setdefault(int(row.sig), []).append((row.name, tuple(row.shape), row.dtype, row.src))
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


def no_sharding(spec: str) -> str:
    """How a spec reads to a person: ``""`` (no annotation) is replicated by XLA."""
    return spec if spec else "no sharding (replicated)"


def _closest(sig: Signature, previous: list[Signature], index: SigIndex | None = None) -> tuple[
        Signature | None, str | None, int | None, Shape | None, Shape | None]:
    """The earlier signature nearest to ``sig`` (the first of equals) and the input that
    differs most usefully. ``index``: the earlier signatures as compared, kept by the
    caller (a run's walk asks again with the same list, longer by a few, each time)."""
    if not previous:
        return None, None, None, None, None
    index = SigIndex() if index is None else index
    index.catch_up(previous)
    mine = _known(sig)
    names = [name for name, _, _, _ in sig]
    shapes = [shape for _, shape, _, _ in sig]
    dist = np.zeros(len(previous), dtype=np.int64)
    for layout, group in index.groups.items():
        if mine.layout is not None and layout == mine.layout:
            # same inputs and ranks: the distance is how many dims differ
            dist[group.positions[:group.n]] = (group.rows[:group.n] != mine.dims).sum(axis=1)
        else:
            for k in group.positions[:group.n].tolist():
                dist[k] = _sig_distance(names, shapes, len(previous[k]), index.entries[k].shapes)
    prev = previous[int(np.argmin(dist))]  # (argmin: the first of equals)
    prev_by_name = _shape_map(prev)
    candidates = []
    for name, shape, _, src in sig:
        old = prev_by_name.get(name)
        if old is not None and old != shape:
            dims = changed_dims(old, shape)
            # Prefer loader batch names over ad-hoc .to() names, then the biggest change.
            rank = (0 if src in ("batch", "loader", "arg") else 1, -len(dims))
            candidates.append((rank, name, dims[0] if dims else None, old, shape))
    if not candidates:
        new_names = [name for name, _, _, _ in sig if name not in prev_by_name]
        return prev, (new_names[0] if new_names else None), None, None, None
    candidates.sort(key=lambda c: c[0])
    _, name, dim, old, new = candidates[0]
    return prev, name, dim, old, new


def _shape_map(sig: Signature) -> dict[str, Shape]:
    """Input name -> shape (the last input of a name, where a signature repeats one)."""
    return {name: shape for name, shape, _, _ in sig}


class _Known(NamedTuple):
    """A signature as :func:`_closest` compares it."""

    shapes: dict[str, Shape]
    """Input name -> shape (:func:`_shape_map`)."""
    layout: tuple[tuple[str, int], ...] | None
    """Each input's name and rank, when the names are distinct and every dim an int (else None)."""
    dims: np.ndarray
    """Every input's dims, one after the other (with a layout)."""


def _known(sig: Signature) -> _Known:
    shapes = _shape_map(sig)
    layout = tuple((name, len(shape)) for name, shape, _, _ in sig)
    dims = [d for _, shape, _, _ in sig for d in shape]
    if len(shapes) == len(sig) and all(type(d) is int and _LO <= d <= _HI for d in dims):
        return _Known(shapes, layout, np.asarray(dims, dtype=np.int64))
    return _Known(shapes, None, np.zeros(0, dtype=np.int64))


_LO, _HI = -(1 << 63), (1 << 63) - 1


class _Group:
    """The earlier signatures of one layout: their positions and their dims, a row each
    (arrays grown by doubling; the first ``n`` rows are filled)."""

    def __init__(self, width: int) -> None:
        self.n = 0
        self.positions = np.zeros(8, dtype=np.int64)
        self.rows = np.zeros((8, width), dtype=np.int64)

    def add(self, position: int, dims: np.ndarray) -> None:
        n = self.n
        if n == len(self.positions):
            self.positions = np.concatenate([self.positions, np.zeros_like(self.positions)])
            self.rows = np.concatenate([self.rows, np.zeros_like(self.rows)])
        self.positions[n] = position
        if len(dims):
            self.rows[n] = dims
        self.n = n + 1


class SigIndex:
    """Earlier signatures as :func:`_closest` compares them, grouped by layout (names and
    ranks) so the many alike ones are compared in one array operation: linear in the run's
    distinct signatures per question, not in their dims times a Python loop."""

    def __init__(self) -> None:
        self.entries: list[_Known] = []
        self.groups: dict[tuple[tuple[str, int], ...] | None, _Group] = {}

    def catch_up(self, previous: list[Signature]) -> None:
        """Take in the signatures appended to ``previous`` since the last call."""
        for k in range(len(self.entries), len(previous)):
            entry = _known(previous[k])
            self.entries.append(entry)
            group = self.groups.get(entry.layout)
            if group is None:
                group = self.groups[entry.layout] = _Group(len(entry.dims))
            group.add(k, entry.dims)


def _sig_distance(names: list[str], shapes: list[Shape], other_len: int, other: dict[str, Shape]) -> int:
    """How far a signature (its input ``names`` and ``shapes``) is from another (its length and
    input name -> shape): 10 for each input the other lacks or length apart, else
    :func:`~xprof.analysis.patterns.shape_distance` of the two shapes."""
    d = 10 * abs(len(names) - other_len)
    for name, shape in zip(names, shapes):
        was = other.get(name)
        if was is None:
            d += 10
        elif was != shape:  # (equal shapes are 0 apart)
            d += sum(map(ne, shape, was)) if len(shape) == len(was) else shape_distance(shape, was)
    return d


DATA_DEPENDENT_ACCESS = DATA_DEPENDENT_ACCESSES
"""Recorded accesses whose output shape depends on values (xprof.recorder.hooks)."""


def attribute(steps: pd.DataFrame, compiles: pd.DataFrame, syncs: pd.DataFrame,
              sigs: dict[int, Signature], site_info: dict[int, Site] | None = None,
              specs: Shardings | None = None) -> list[Cause]:
    """One :class:`Cause` per row of ``compiles`` (same order)."""
    causes: list[Cause] = []
    if not len(compiles):
        return causes
    live = live_reads(syncs)
    sites_by_step: dict[int, frozenset[int]] = {}
    ran_sites: dict[int, set[int]] = {}
    dd_by_step: dict[int, list[int]] = {}
    index_by_step: dict[int, list[int]] = {}
    """Per step, sites where a device tensor was used as an index or slice bound (``t[:, :n]``)."""
    if len(live):
        read_sites: dict[int, set[int]] = {}
        ran = (live["executions"].to_numpy(dtype=np.int64) + live["uncached"].to_numpy(dtype=np.int64)
               + live["cached"].to_numpy(dtype=np.int64)) > 0
        for step, site, access, did in zip(live["step"].tolist(), live["site"].tolist(), live["access"].tolist(),
                                           ran.tolist()):
            read_sites.setdefault(int(step), set()).add(int(site))
            if did:
                ran_sites.setdefault(int(step), set()).add(int(site))
            if access in DATA_DEPENDENT_ACCESS:
                found_dd = dd_by_step.setdefault(int(step), [])
                if int(site) not in found_dd:
                    found_dd.append(int(site))
            elif access == "index":
                found_ix = index_by_step.setdefault(int(step), [])
                if int(site) not in found_ix:
                    found_ix.append(int(site))
        sites_by_step = {step: frozenset(found) for step, found in read_sites.items()}
    train_nodes = _train_graph_nodes(steps)
    first_rows = np.flatnonzero(steps["work"].to_numpy(dtype=bool) & (steps["phase"].to_numpy(dtype=object) == "train")
                                & (steps["ordinal"].to_numpy() == 0))
    first: tuple[int | None, int | None] = (None, None)
    first_sigs: set[int] = set()
    """Every signature of step 0's barriers (a teacher's sync and the student's update are two)."""
    if len(first_rows):
        fs, fn = steps["sig"].iat[first_rows[0]], steps["graph_nodes"].iat[first_rows[0]]
        first = (None if pd.isna(fs) else int(fs), None if pd.isna(fn) else int(fn))
        first_sigs = {int(v) for v in steps["sig"].iloc[first_rows].dropna()}
    first_steady = _first_graph_was_steady(steps, first)

    # Walk the steps in order, remembering what steady-state steps have shown so far. The
    # columns are taken out once as plain lists: per-row DataFrame lookups cost ~50 µs each,
    # which made this loop most of the analysis time of a long run.
    seen_sigs: set[int] = set()
    seen_sig_list: list[Signature] = []
    seen_keys: set[tuple[int | None, frozenset[int]]] = set()
    seen_fallback: set[str] = set()
    seen_nodes: set[int] = set()
    by_step: dict[int, list[int]] = {}
    for k, step in enumerate(compiles["step"].to_numpy()):
        by_step.setdefault(int(step), []).append(k)
    rows = _compile_rows(compiles)
    dynamo_steps = {int(compiles["step"].iat[k]) for k, r in enumerate(rows) if r["debug_dynamo"]}
    dynamo_sigs: set[int] = set()
    """Input signatures torch.compile traced a graph for (dynamo ran in their step)."""
    result: dict[int, Cause] = {}
    empty: frozenset[int] = frozenset()
    ctx = _Context(syncs=syncs, sigs=sigs, train_nodes=train_nodes, seen_nodes=seen_nodes,
                   seen_keys=seen_keys, sites=site_info or {}, specs=specs or {})
    if ctx.specs:
        for sid, sig in sigs.items():
            ctx.same_shapes.setdefault(sig, []).append(sid)
    ctx.loops = loop_lines(ctx.sites, training_barrier_sites(steps))
    ctx.eval_owner = _eval_pass_owners(steps, sites_by_step, ctx)
    ctx.grown = _growing_graphs(steps, compiles, train_nodes)
    ctx.entry_sig = _compile_entry_sigs(steps)
    ctx.fallback_calls = _fallback_calls(steps, live, ctx.sites, ctx.loops)
    # A recorder that counts backward passes marks eval barriers itself (steps.assign); the
    # graph-size guess below is only for files without that evidence.
    ctx.size_guess = not ("backward" in steps and bool(steps["backward"].to_numpy().any()))

    in_train_mode = ((steps["phase"] == "train").to_numpy() & steps["work"].to_numpy(dtype=bool)
                     & (steps["ordinal"].to_numpy() >= 1) & ~steps["eval_mode"].to_numpy(dtype=bool))
    if in_train_mode.any():
        ctx.first_in_train_mode = int(steps["i"].to_numpy()[in_train_mode][0])
    matter, prev_barrier = _rows_that_matter(steps, set(by_step), set(sites_by_step), dynamo_steps)
    # The training step each barrier leads to: torch.compile's own syncs belong to the step
    # whose forward it is tracing (the first steps' tracing is warm-up).
    next_train = steps["ordinal"].where(steps["phase"] == "train").bfill().fillna(-1).to_numpy()[matter].tolist()
    rows_in = steps.loc[matter, _ROW_COLUMNS]
    for (step_i, sig_id, ordinal, user_step, dz, phase, kind, bsite, work, fallback_d, nodes, in_eval,
         prev_kind, ahead) in zip(
            rows_in["i"].tolist(), _optional_ints(rows_in["sig"]), rows_in["ordinal"].tolist(),
            rows_in["user_step"].tolist(), rows_in["dynamo_graphs"].tolist(),
            rows_in["phase"].tolist(), rows_in["barrier"].tolist(), _optional_ints(rows_in["site"]),
            rows_in["work"].tolist(), rows_in["fallback"].tolist(), _optional_ints(rows_in["graph_nodes"]),
            rows_in["eval_mode"].tolist(), prev_barrier[matter].tolist(), next_train):
        sites = sites_by_step.get(step_i, empty)
        ks = by_step.get(step_i)
        if ks is not None:
            fallback = set(fallback_d)
            if sig_id is not None and sig_id in dynamo_sigs:
                dz = max(dz, 1)  # the shape dynamo retraced for: its graphs compile on first use
            step = _StepFacts(ordinal=ordinal, phase=phase, sig_id=sig_id, sites=sites, i=step_i,
                              dd_sites=dd_by_step.get(step_i, []), index_sites=index_by_step.get(step_i, []),
                              dynamo=kind == "dynamo" or prev_kind == "dynamo" or dz > 0 or step_i in dynamo_steps,
                              barrier_site=bsite, eval_mode=bool(in_eval) and phase == "train",
                              ran_sites=frozenset(ran_sites.get(step_i, ())))
            read_compiled: set[int] = set()
            read_of = {k: _read_site(rows[k], ctx) for k in ks if rows[k]["at"] == "step"}
            growing = growing_reads([(site, rows[k]["graph_nodes"]) for k, site in read_of.items()])
            for k in ks:
                c = rows[k]
                if (ordinal == 1 and phase == "train" and c["at"] != "step" and sig_id is not None
                        and first[0] is not None and sig_id not in first_sigs and (first_steady or (
                            first[1] is not None and not pd.isna(c["graph_nodes"])
                            and int(c["graph_nodes"]) == first[1]))):
                    # The first graph was the steady one: this compile is the new shape's.
                    result[k] = _one(c, step, False, {first[0]}, [sigs.get(first[0], ())],
                                     set(), ctx)
                    continue
                # Warm-up: every compile inside the first two training steps, including
                # those counted at an empty barrier of theirs (a logging sync after step 1).
                warm = ((phase in ("train", "empty") and 0 <= user_step < WARMUP_STEPS)
                        or (phase == "dynamo" and 0 <= ahead < WARMUP_STEPS))
                if warm and c["at"] == "step":
                    # Except a read whose graph grew from read to read in this step: the ops
                    # since the barrier pile up between its reads (an RL episode acting step
                    # by step), which every longer step pays again. Its first compile there
                    # is warm-up's.
                    site = read_of[k]
                    if site is not None and site in growing:
                        warm = site not in read_compiled
                        read_compiled.add(site)
                result[k] = _one(c, step, warm, seen_sigs, seen_sig_list, fallback - seen_fallback, ctx)
        if phase == "train":
            ctx.seen_sites.update(sites)
            if work and sig_id is not None:
                ctx.sig_step.setdefault(sig_id, step_i)
        if work and phase == "train" and ordinal >= 1:
            if sig_id is not None and sig_id not in seen_sigs:
                seen_sigs.add(sig_id)
                if sig_id in sigs:
                    seen_sig_list.append(sigs[sig_id])
            seen_keys.add((sig_id, sites))
            if nodes is not None:
                seen_nodes.add(nodes)
        if fallback_d:
            seen_fallback.update(fallback_d)
        if sig_id is not None and (dz > 0 or step_i in dynamo_steps):
            dynamo_sigs.add(sig_id)
    out = [result[k] for k in range(len(compiles))]
    for k, found_k in enumerate(out):
        if found_k.cause == "unknown" and rows[k]["debug_reason"]:
            where = rows[k]["debug_where"]
            found_k.evidence = (f"{found_k.evidence}; torch_xla says: \"{rows[k]['debug_reason']}\""
                          + (f" at {where}" if where else ""))
    return out


_ROW_COLUMNS = ["i", "sig", "ordinal", "user_step", "dynamo_graphs", "phase", "barrier", "site", "work",
                "fallback", "graph_nodes", "eval_mode"]


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
    trained = steps["work"].to_numpy(dtype=bool) & (steps["phase"].to_numpy(dtype=object) == "train")
    steady = trained & (steps["ordinal"].to_numpy() >= 1)
    sig = steps["sig"].to_numpy(dtype=np.float64, na_value=np.nan)
    nodes = steps["graph_nodes"].to_numpy(dtype=np.float64, na_value=np.nan)
    # first seen: a signature in training (sig_step), a steady signature (seen_sigs), a steady
    # (signature, no reads) pair (seen_keys; rows with reads are all visited), a graph size
    for values, among in ((sig, trained), (sig, steady), (sig, steady & ~has_sites), (nodes, steady)):
        first = ~pd.Series(values[among]).duplicated(keep="first").to_numpy()
        rows = np.flatnonzero(among)
        matter[rows[first]] = True
    return matter, prev


@dataclass
class _StepFacts:
    ordinal: int
    phase: str
    sig_id: int | None
    sites: frozenset[int]
    dd_sites: list[int]
    """Sites of data-dependent ops (mask indexing, nonzero...) that ran in the step."""
    dynamo: bool
    """The barrier is torch.compile's own, or follows one (dynamo was tracing)."""
    barrier_site: int | None = None
    """Where the barrier was asked for, when it compiled (a library's logging...)."""
    index_sites: list[int] = field(default_factory=list)
    """Sites where a device tensor was read as an index or slice bound in the step."""
    i: int = -1
    """The barrier's index."""
    eval_mode: bool = False
    """A training step (backward, optimizer step) with the model in eval mode."""
    ran_sites: frozenset[int] = frozenset()
    """Sites of the step's reads that ran a graph (or looked one up): only those can have
    taken ops out of the barrier's graph; a read of a value already computed changes nothing."""


@dataclass
class _Context:
    syncs: pd.DataFrame
    sigs: dict[int, Signature]
    train_nodes: int | None
    seen_nodes: set[int]
    seen_keys: set[tuple[int | None, frozenset[int]]]
    sites: dict[int, Site]
    seen_sites: set[int] = field(default_factory=set)
    """Read sites seen in earlier training steps (warm-up included)."""
    size_guess: bool = True
    """Tell eval graphs by their size (files recorded without backward-pass evidence)."""
    specs: Shardings = field(default_factory=dict)
    same_shapes: dict[Signature, list[int]] = field(default_factory=dict)
    """SPMD: signatures with the same names, shapes, dtypes and sources (they differ in sharding)."""
    sig_step: dict[int, int] = field(default_factory=dict)
    """The first training step that ran each signature."""
    eval_owner: dict[int, Cause] = field(default_factory=dict)
    """For each barrier of an eval pass, the cause its compiles get (:func:`_eval_pass_owners`)."""
    known_sigs: SigIndex = field(default_factory=lambda: SigIndex())
    """The earlier signatures as :func:`_closest` compares them."""
    loops: frozenset[tuple[str, int]] = frozenset()
    """The user lines the training loop asks for its barriers from (mechanisms.loop_lines)."""
    entry_sig: dict[int, int] = field(default_factory=dict)
    """torch_xla.compile's entry barrier -> the signature of the call it leads to (the inputs
    moved before the entry are the call's: eager ops on them compile for the call's shapes)."""
    grown: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    """(step, nodes) of each barrier graph in a run of graphs of one input signature, each
    larger than every graph before it (:func:`_growing_graphs`) -> the node counts of that run."""
    fallback_calls: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    """CPU-fallback ops that ran only in steps where one library call read values (outside the
    training loop's own lines): op -> that call (via, file, line). Its calls are the library
    call's (``generate()``'s ``torch.isin``), not the training step's."""
    first_in_train_mode: int | None = None
    """The first steady training step run with the model in train mode (after it, one in
    eval mode is a change)."""
    calls_by_step: dict[int, list[tuple[float, float, str, str, int, int]]] | None = None
    """Per step, its reads made inside a library call: (t0, t1, via, file, line, site), by time
    (built on first use by :func:`_library_call_around`)."""


def _eval_pass_owners(steps: pd.DataFrame, sites_by_step: dict[int, frozenset[int]],
                      ctx: _Context) -> dict[int, Cause]:
    """One owner per eval pass: the library mechanism that ran it, else the plain eval pass.

    A pass is a run of consecutive barriers outside training steps (eval and empty ones)
    with at least one eval barrier. Its compiles are the evaluation's whatever their input
    shapes (an eval pass has batches of its own); which mechanism drove it is read from the
    barriers' and the reads' sites anywhere in the pass (the HF Trainer's evaluation_loop).
    """
    owners: dict[int, Cause] = {}
    ids = eval_pass_ids(steps)
    rows = np.flatnonzero(ids >= 0)
    if not len(rows):
        return owners  # no eval barrier, no pass (and no walk over a long run's steps)
    site_col = _optional_ints(steps["site"].iloc[rows])
    step_ids = steps["i"].to_numpy()[rows].tolist()
    by_pass: dict[int, list[int]] = {}
    for k, pass_id in enumerate(ids[rows].tolist()):
        by_pass.setdefault(pass_id, []).append(k)
    for ks in by_pass.values():
        owner: Cause | None = None
        for k in ks:
            barrier_site = site_col[k]
            for site in ([barrier_site] if barrier_site is not None else []) + sorted(
                    sites_by_step.get(int(step_ids[k]), frozenset())):
                # (anywhere on the site's way: generate()'s reads inside the Trainer's evaluation)
                mech = next((m for m in mechanisms_through(ctx.sites.get(site)) if m.evaluates), None)
                if mech is not None:
                    owner = Cause("library", FindingKey.parse(mech.key), site=site, evidence=(
                        f"{mech.what} ran this eval pass (its barriers and reads go through it)"))
                    break
            if owner is not None:
                break
        for k in ks:
            asked = site_col[k]
            asker = ctx.sites.get(asked) if asked is not None else None
            if (owner is None and asked is not None and own_barrier(asker) and asker is not None
                    and (asker.file, asker.line) not in ctx.loops):
                # A library call's own sync after the pass's batches (xm.mesh_reduce's
                # rendezvous): its graphs are the call's, not the evaluation's.
                owners[int(step_ids[k])] = Cause("implicit_sync", FindingKey.sync(asked), site=asked, evidence=(
                    f"{asker.via if asker else '?'} asked for this barrier itself and ran a graph of its own"))
                continue
            owners[int(step_ids[k])] = owner or Cause("graph_change", EVAL_KEY, evidence=(
                "compiled in an eval pass (no optimizer step or backward pass; grad off or the "
                "model in eval mode)"))
    return owners


def _optional_ints(column: pd.Series) -> list[int | None]:
    """A nullable integer column as a list of Python ints, None where missing."""
    if isinstance(column.dtype, pd.Int64Dtype):
        missing = column.isna().to_numpy()
        values = column.to_numpy(dtype=np.int64, na_value=0).tolist()
        if not missing.any():
            return values
        return [None if m else v for v, m in zip(values, missing.tolist())]
    return [None if pd.isna(v) else int(v) for v in column.tolist()]


def _compile_rows(compiles: pd.DataFrame) -> list[dict[str, Any]]:
    """The columns :func:`_one` reads, one dict per compile (``compiles.iloc[k]`` is slow)."""
    n = len(compiles)
    reasons = compiles["debug_reason"].tolist() if "debug_reason" in compiles else [None] * n
    wheres = compiles["debug_where"].tolist() if "debug_where" in compiles else [None] * n
    dyn = compiles["debug_dynamo"].tolist() if "debug_dynamo" in compiles else [False] * n
    return [{"at": at, "sync_row": sync_row, "graph_nodes": nodes, "debug_reason": r, "debug_where": w,
             "debug_dynamo": bool(d), "t": t, "ms": ms}
            for at, sync_row, nodes, r, w, d, t, ms in zip(
                compiles["at"].tolist(), compiles["sync_row"].tolist(), compiles["graph_nodes"].tolist(),
                reasons, wheres, dyn, compiles["t"].tolist(), compiles["ms"].tolist())]


def _first_graph_was_steady(steps: pd.DataFrame, first: tuple[int | None, int | None]) -> bool:
    """Did the first step's graph serve later steps with the same inputs without compiling?"""
    if first[0] is None:
        return False
    sig = steps["sig"]
    later = np.flatnonzero(steps["work"].to_numpy(dtype=bool) & (steps["ordinal"].to_numpy() >= 1)
                           & sig.notna().to_numpy() & (sig.to_numpy(dtype=np.int64, na_value=0) == first[0]))
    return bool(len(later)) and int(steps["barrier_uncached"].iat[later[0]]) == 0


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
    out: dict[tuple[int, int], list[int]] = {}
    for seq in by_sig.values():
        run: list[tuple[int, int]] = []
        top = train_nodes
        for step, nodes in seq:
            if nodes <= top:
                break
            run.append((step, nodes))
            top = nodes
        if len(run) >= GROWING_GRAPHS:
            sizes = [n for _, n in run]
            out.update({key: sizes for key in run})
    return out


def _first_nodes(sizes: list[int]) -> str:
    return ", ".join(str(n) for n in sizes[:6]) + (" ..." if len(sizes) > 6 else "")


def _train_graph_nodes(steps: pd.DataFrame) -> int | None:
    """The node count most steady steps' graphs have (the first seen among equals)."""
    nodes = steps["graph_nodes"]
    keep = steps["work"].to_numpy(dtype=bool) & (steps["ordinal"].to_numpy() >= 1) & nodes.notna().to_numpy()
    if not keep.any():
        return None
    codes, values = pd.factorize(nodes.to_numpy(dtype=np.int64, na_value=0)[keep])
    return int(values[int(np.argmax(np.bincount(codes)))])


def _one(c: Any, step: _StepFacts, warm: bool, seen_sigs: set[int], seen_sig_list: list[Signature],
         new_fallback: set[str], ctx: _Context) -> Cause:
    if warm:
        # Every compile inside the first two training steps, host reads included.
        return Cause("warmup", WARMUP_KEY)
    if c["at"] == "step":
        return _mid_step(c, step, new_fallback, ctx, seen_sigs, seen_sig_list)
    if c["at"] == "op":
        return _op_compile(step, seen_sigs, seen_sig_list, ctx)
    if step.phase == "dynamo":
        return Cause("dynamo", FindingKey("dynamo"), evidence="compiled at a sync of torch.compile's XLA bridge")
    owner = ctx.eval_owner.get(step.i)
    if owner is not None:
        return owner
    found = _step_mechanism(step, ctx, new_reads_only=True)
    if found is not None and (step.sig_id is None or step.sig_id in seen_sigs):
        # A library asked for the barrier or read values in the step, with inputs seen before.
        # (Who asked for a barrier does not make its graph theirs when the inputs are new: a
        # training step's graph cut by the eval loader's first batch is still the step's.)
        return found
    nodes = None if pd.isna(c["graph_nodes"]) else int(c["graph_nodes"])
    train_nodes = ctx.train_nodes
    if ctx.size_guess and nodes is not None and train_nodes and nodes < EVAL_GRAPH_RATIO * train_nodes:
        return Cause("graph_change", EVAL_KEY, evidence=(
            (f"a {nodes}-node graph against the {train_nodes}-node training graph "
             if nodes is not None and train_nodes else "a graph ")
            + "(no backward pass or optimizer: an evaluation or inference pass)"))
    sig_id = step.sig_id
    if step.dd_sites and (sig_id is None or sig_id in seen_sigs):
        site = step.dd_sites[0]
        return Cause("data_dependent", FindingKey.sync(site), site=site, evidence=(
            "same input shapes as before, but an op with a value-dependent output shape ran in "
            "this step, so the tensors after it (and the barrier graph) took a new shape"))
    if (step.index_sites and sig_id is not None and sig_id in seen_sigs and nodes is not None
            and any(abs(nodes - n) <= max(2, n // 20) for n in ctx.seen_nodes)):
        # The same inputs and a graph of about a size seen before (the same ops, other shapes:
        # a slice to the full length is one node less), in a step that read a device tensor as
        # a slice bound: its value set a shape (t[:, :n.max()]).
        site = step.index_sites[0]
        return Cause("data_dependent", FindingKey.sync(site), site=site, evidence=(
            "same input shapes and graph size as an earlier step, but a device tensor read as a "
            "slice bound or index in this step set a shape from its value"))
    call = _call_of_fallback(new_fallback, step, ctx)
    if new_fallback and call is None:
        ops = ",".join(sorted(new_fallback))
        return Cause("cpu_fallback", FindingKey.fallback(new_fallback),
                     evidence=f"ops without an XLA lowering ran on the CPU for the first time: {ops}")
    if sig_id is None:
        if nodes is not None and nodes not in ctx.seen_nodes:
            return Cause("graph_change", FindingKey.graph(nodes), no_host="new",
                         evidence=f"a {nodes}-node graph not seen before (no input shapes recorded)")
        if nodes is not None:
            # Nothing came from the host: the graph's data are tensors the last steps left on
            # the device. The same ops (the same size), so other shapes or constants: one of
            # those tensors grew (a KV cache, generated tokens), or a Python number changed.
            return Cause("graph_change", FindingKey.graph(nodes), no_host="same", evidence=(
                f"no input came from the host in this step, and a graph of the same size ({nodes} nodes) "
                "ran before: the same ops on tensors kept on the device, with other shapes or constants"))
        return Cause("unknown", FindingKey("unknown", "noinputs"), evidence=(
            "no step inputs were recorded, and no graph size either"))
    if sig_id not in seen_sigs:
        extra = added_inputs(ctx.sigs.get(sig_id, ()), seen_sig_list)
        if (extra and nodes is not None and train_nodes and nodes > train_nodes
                and micro_batch_change(ctx.sigs.get(sig_id, ()), seen_sig_list) is None):
            # (more micro-batches of the step's own inputs, x#3, are a longer accumulation
            # window, not another pass)
            # The step's inputs plus others, every shape seen before, and a graph larger than
            # the training step's: a pass with no barrier of its own (an evaluation moving its
            # batches) left its ops and inputs pending, and this barrier ran them with the step.
            return Cause("graph_change", FindingKey("joined"), evidence=(
                f"this step's graph also took {listed_inputs(extra)}"
                f"{f' ({len(extra)} tensors)' if len(extra) > len(set(map(base_input_name, extra))) else ''}, "
                "inputs no training step had, and had "
                f"{nodes} nodes against the training step's {train_nodes}: another pass's ops, with no barrier "
                "of their own, ran in it"))
        return _shape_cause(sig_id, seen_sigs, seen_sig_list, ctx)
    if step.dynamo:
        return Cause("dynamo", FindingKey("dynamo"), evidence=(
            "torch.compile traced a graph again in this step (same input shapes as before), "
            "so the step graph changed with it"))
    sizes = ctx.grown.get((step.i, nodes)) if nodes is not None else None
    if sizes is not None:
        # Larger each time, from the same inputs: something kept from step to step grows in
        # it (a Python list of device tensors, appended to every step and stacked at a read).
        return Cause("graph_change", FindingKey("grows"), evidence=(
            f"same input shapes each time, and a graph larger each time it changed: {_first_nodes(sizes)} "
            f"nodes, against the training step's {ctx.train_nodes}"))
    sites = step.sites
    seen_keys = ctx.seen_keys
    if step.ran_sites and (sig_id, sites) not in seen_keys:
        earlier = set().union(*[s for (sg, s) in seen_keys if sg == sig_id]) if seen_keys else set()
        new_sites = sorted(step.ran_sites - earlier) or sorted(step.ran_sites)
        if call is not None:
            # The library call new in this step ran the fallback ops too: the graph it left
            # pending joined the barrier's. Its first read site stands for the call.
            via, file, line = call
            mine = [s for s in new_sites if _call_key(ctx.sites.get(s)) == call]
            site = (mine or new_sites)[0]
            return Cause("implicit_sync", FindingKey.sync(site), site=site, evidence=(
                f"same inputs as before, but {via} at {os.path.basename(file)}:{line} ran in this step "
                f"(with {', '.join(sorted(new_fallback))} on the CPU, which runs only in steps that call it), "
                "and the graph at the barrier changed"))
        grown = ""
        if nodes is not None and train_nodes and nodes > train_nodes:
            # More than the training graph: ops left pending before the step (an evaluation pass
            # with no barrier of its own, what its reads did not need) ran with it.
            grown = (f"; its graph had {nodes} nodes against the training step's {train_nodes}: ops left "
                     "pending before the step (an evaluation pass with no barrier of its own, what the "
                     "reads did not need) joined it, and a torch_xla.sync() after them keeps the step's "
                     "graph as it was")
        return Cause("implicit_sync", FindingKey.sync(new_sites[0]), site=new_sites[0], leftovers=bool(grown),
                     evidence=("same inputs as before, but a host read in this step materialized a tensor, "
                               "so the graph at the barrier changed" + grown))
    if step.eval_mode and ctx.first_in_train_mode is not None and step.i > ctx.first_in_train_mode:
        return Cause("graph_change", EVAL_MODE_KEY, evidence=(
            "same input shapes as an earlier step, but this training step (a backward pass and an "
            "optimizer step) ran with the model in eval mode, which earlier training steps did not"))
    return Cause("graph_change", FindingKey.graph(nodes), evidence=(
        "same input shapes as an earlier step, different graph"
        + (f" ({nodes} nodes)" if nodes is not None else "")))


def _fallback_calls(steps: pd.DataFrame, reads: pd.DataFrame, sites: dict[int, Site],
                    loops: frozenset[tuple[str, int]]) -> dict[str, tuple[str, str, int]]:
    """The CPU-fallback ops each of whose steps had reads of one library call made at a user
    line outside the training loop's own (see :attr:`_Context.fallback_calls`)."""
    rows = fallback_rows(steps)
    if not len(rows) or not len(reads):
        return {}
    call_steps: dict[tuple[str, str, int], set[int]] = {}
    for step, sid in zip(reads["step"].tolist(), reads["site"].tolist()):
        key = _call_key(sites.get(int(sid)))
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


def _call_key(site: Site | None) -> tuple[str, str, int] | None:
    return (site.via, site.file, site.line) if site is not None and site.via else None


def _call_of_fallback(ops: set[str], step: _StepFacts, ctx: _Context) -> tuple[str, str, int] | None:
    """The library call all of ``ops`` belong to (:attr:`_Context.fallback_calls`), if one."""
    calls = {ctx.fallback_calls.get(op) for op in ops}
    return calls.pop() if len(calls) == 1 and None not in calls else None


def _shape_cause(sig_id: int, seen_sigs: set[int], seen_sig_list: list[Signature], ctx: _Context) -> Cause:
    """The input whose shape is new in this step's signature (or, under SPMD, whose
    sharding is new while every shape was seen before)."""
    if ctx.specs:
        found = _sharding_cause(sig_id, seen_sigs, ctx)
        if found is not None:
            return found
    sig = ctx.sigs.get(sig_id, ())
    micro = micro_batch_change(sig, seen_sig_list)
    if micro is not None:
        # Every shape seen before, another number of micro-batches (x#3 is x again): a longer
        # or shorter accumulation window, not an input of its own.
        before, now, base = micro
        return Cause("input_shape", FindingKey("micro", base), input=base, old=(before,), new=(now,),
                     evidence=f"the step ran {now} micro-batch{'es' if now != 1 else ''} ({base} x{now}) where an "
                              f"earlier one ran {before}, every shape seen before")
    prev, name, dim, old, new = _closest(sig, seen_sig_list, ctx.known_sigs)
    first_only = sig_id in ctx.sig_step and sig_id not in seen_sigs
    if name is not None:
        # ``input_ids#2`` is the same input in the next micro-batch of the step: one finding.
        base = base_input_name(name)
        said = (f"{name} changed shape {_fmt(old)} -> {_fmt(new)}" if old is not None and new is not None
                else f"{name} {_fmt(new)} is an input no earlier step had" if new is not None
                else f"{name} ({_fmt(old)} before) is missing from this step's inputs" if old is not None
                else f"{name} appears or goes in this step's inputs")
        if first_only:
            said += FIRST_STEP_ONLY
        return Cause("input_shape", FindingKey.input(base), input=base, dim=dim, old=old, new=new, evidence=said,
                     first_step_only=first_only)
    nearest = _shape_map(prev) if prev is not None else {}
    gone = [n for n in nearest if n not in {n for n, _, _, _ in sig}]
    if gone:
        # No input new or of another shape: one the nearest signature had is gone (moved to
        # the device in some steps only).
        base = base_input_name(gone[0])
        said = f"{gone[0]} ({_fmt(nearest[gone[0]])} before) is missing from this step's inputs"
        return Cause("input_shape", FindingKey.input(base), input=base, old=nearest[gone[0]],
                     evidence=said + (FIRST_STEP_ONLY if first_only else ""), first_step_only=first_only)
    if prev is None:
        # Only step 0 had inputs before: the shape is new to the steady-state graph.
        first = sig[0] if sig else None
        return Cause("input_shape", FindingKey.input(first[0] if first else None),
                     input=first[0] if first else None, new=first[1] if first else None,
                     evidence="input shapes first seen at the one-off first step")
    return Cause("input_shape", FindingKey.input(None), evidence="a new input signature")


def _sharding_cause(sig_id: int, seen_sigs: set[int], ctx: _Context) -> Cause | None:
    """``input_sharding`` when an earlier signature had exactly these inputs and shapes
    but sharded at least one of them another way (the first such signature seen)."""
    now = ctx.specs.get(sig_id)
    sig = ctx.sigs.get(sig_id)
    if not now or sig is None:
        return None
    # Every signature in ``seen_sigs`` ran in a training step before this one.
    earlier = sorted((ctx.sig_step.get(p, -1), p) for p in ctx.same_shapes.get(sig, ())
                     if p != sig_id and p in seen_sigs)
    for step, prev in earlier:
        before = ctx.specs.get(prev, {})
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
        return Cause("input_sharding", FindingKey.sharding(base), input=base, sharding=(old, new), earlier=step,
                     evidence=f"{name}{also} sharded {no_sharding(new)}, at step {step} {no_sharding(old)}; "
                              "same shapes")
    return None


def _step_mechanism(step: _StepFacts, ctx: _Context, new_reads_only: bool = False) -> Cause | None:
    """A known library mechanism that asked for this barrier, or read values in this step.

    ``new_reads_only`` (for a barrier's compile): a mechanism that read in earlier training
    steps too (a model's attention-mask check, every step) did not change this step's graph;
    its first read did, once, and the graph was cached after."""
    reads = sorted(s for s in step.sites if not (new_reads_only and s in ctx.seen_sites))
    candidates = ([step.barrier_site] if step.barrier_site is not None else []) + reads
    for site in candidates:
        mech = mechanism(ctx.sites.get(site))
        if mech is not None:
            where = "asked for the barrier" if site == step.barrier_site else "read values in this step"
            return Cause("library", FindingKey.parse(mech.key), site=site, evidence=(
                f"{mech.what} {where} and ran a small graph of its own"))
    return None


def growing_reads(compiled: list[tuple[int | None, Any]]) -> set[int]:
    """Read sites whose graphs grew in one step (:func:`xprof.runfile.grew`), from each
    compile's (site, graph nodes) in order; compiles outside a read (site None) left out."""
    nodes: dict[int, list[int | None]] = {}
    for site, n in compiled:
        if site is not None:
            nodes.setdefault(site, []).append(None if n is None or pd.isna(n) else int(n))
    return {site for site, ns in nodes.items() if grew(ns)}


def _read_site(c: Any, ctx: _Context) -> int | None:
    """The site of the live (not deferred) host read a compile happened inside, if any."""
    row = int(c["sync_row"])
    if row < 0 or row not in ctx.syncs.index:
        return None
    read = ctx.syncs.loc[row]
    return None if bool(read["deferred"]) else int(read["site"])


def _mid_step(c: Any, step: _StepFacts, new_fallback: set[str], ctx: _Context, seen_sigs: set[int],
              seen_sig_list: list[Signature]) -> Cause:
    """A compile between two barriers: the read it happened inside, or what ran around it."""
    row = int(c["sync_row"])
    syncs = ctx.syncs
    if row >= 0 and row in syncs.index:
        read = syncs.loc[row]
        site = int(read["site"])
        if bool(read["deferred"]):
            return Cause("step_closure", FindingKey("closure", str(site)), site=site, evidence=(
                "compiled inside a read in an xm.add_step_closure callback: it runs after the "
                "barrier, on a small graph of its own (compiled once, cached afterwards)"))
        if read["access"] in DATA_DEPENDENT_ACCESS:
            return Cause("data_dependent", FindingKey.sync(site), site=site,
                         evidence="compiled inside an op whose output shape depends on values")
        if site in ctx.seen_sites and step.sig_id is not None and step.sig_id not in seen_sigs:
            # The same read compiled before: it compiles again only because the inputs changed,
            # an eval pass's batches (a model's mask check in its forward) being the pass's.
            owner = ctx.eval_owner.get(step.i)
            if owner is not None:
                return owner
            return _shape_cause(step.sig_id, seen_sigs, seen_sig_list, ctx)
        if site in ctx.seen_sites and step.dd_sites and (step.sig_id is None or step.sig_id in seen_sigs):
            # The same read, the same inputs, compiling again after an op with a value-dependent
            # output shape earlier in the step (`.item()` of `acc[labels != -100].mean()`): the
            # graph it ran took that op's new shape. Removing the read would not remove it.
            earlier = syncs[(syncs["step"] == read["step"]) & (syncs["t1"] <= read["t0"])
                            & syncs["site"].isin(step.dd_sites)]
            if len(earlier):
                dd = int(earlier["site"].iloc[-1])
                return Cause("data_dependent", FindingKey.sync(dd), site=dd, evidence=(
                    "compiled inside a later read of the step: an op with a value-dependent output "
                    "shape ran before it, so the graph the read ran took a new shape"))
        return Cause("implicit_sync", FindingKey.sync(site), site=site,
                     evidence="compiled inside a host read of a tensor value")
    if step.dynamo:
        return Cause("dynamo", FindingKey("dynamo"),
                     evidence="compiled while torch.compile's XLA bridge traced a graph")
    owner = ctx.eval_owner.get(step.i)
    if owner is not None:
        # (unless a mechanism inside the pass made the reads on both sides of it: generate()
        # in a Seq2SeqTrainer's evaluation, an op on the CPU cutting its token graphs)
        return _mechanism_around(c, step, ctx) or owner
    found = _step_mechanism(step, ctx)
    if found is not None:
        return found
    inside = _library_call_around(c, step, ctx)
    if inside is not None:
        return inside
    if new_fallback:
        ops = ",".join(sorted(new_fallback))
        return Cause("cpu_fallback", FindingKey.fallback(new_fallback),
                     evidence=f"compiled mid-step around ops that ran on the CPU: {ops}")
    if step.sig_id is not None and step.sig_id not in seen_sigs and ctx.sigs.get(step.sig_id):
        # Outside any read, in a step whose inputs are new: a graph cut mid-step (by an op on
        # the CPU: a CTC loss and its backward cut each step in three) compiles for the new
        # shape like the barrier's does.
        return _shape_cause(step.sig_id, seen_sigs, seen_sig_list, ctx)
    return Cause("unknown", FindingKey("unknown", "step"),
                 evidence="compiled mid-step outside any recorded host read")


def _op_compile(step: _StepFacts, seen_sigs: set[int], seen_sig_list: list[Signature], ctx: _Context) -> Cause:
    """An op run on its own (eager mode) compiled after warm-up: for inputs of a new shape
    (the step's, or, at torch_xla.compile's entry, the call's), the shape's; else an op that
    ran for the first time (a logging op, a metric), compiled once and cached after."""
    sig_id = step.sig_id if step.sig_id is not None else ctx.entry_sig.get(step.i)
    if sig_id is not None and sig_id not in seen_sigs and ctx.sigs.get(sig_id):
        return _shape_cause(sig_id, seen_sigs, seen_sig_list, ctx)
    return Cause("graph_change", FindingKey("eager_ops"), evidence=(
        "an op run on its own (eager mode, outside the compiled step) compiled the first time it ran "
        "with these shapes"))


def _compile_entry_sigs(steps: pd.DataFrame) -> dict[int, int]:
    """Each torch_xla.compile entry barrier -> the signature of the call's barrier after it."""
    kinds = steps["barrier"].to_numpy(dtype=object)
    at = np.flatnonzero(kinds[:-1] == "compile_entry") if len(kinds) > 1 else np.zeros(0, dtype=np.int64)
    if not len(at):
        return {}
    ids, sig = steps["i"].to_numpy(), steps["sig"]
    return {int(ids[k]): int(sig.iat[k + 1]) for k in at.tolist()
            if kinds[k + 1] == "compile" and not pd.isna(sig.iat[k + 1])}


def _mechanism_around(c: Any, step: _StepFacts, ctx: _Context) -> Cause | None:
    """A known mechanism (not an eval pass's own) whose reads come right before and right
    after a compile outside any read, in its step: the compile happened inside it."""
    syncs = ctx.syncs
    if not len(syncs):
        return None
    t = float(c["t"])
    live = live_reads(syncs)
    in_step = live[live["step"] == step.i]
    before = in_step[in_step["t1"] <= t]
    after = in_step[in_step["t0"] >= t]
    if not len(before) or not len(after):
        return None
    first = int(before["site"].iloc[int(np.argmax(before["t1"].to_numpy()))])
    then = int(after["site"].iloc[int(np.argmin(after["t0"].to_numpy()))])
    theirs = mechanisms_through(ctx.sites.get(then))
    mech = next((m for m in mechanisms_through(ctx.sites.get(first)) if m in theirs and not m.evaluates), None)
    if mech is None:
        return None
    return Cause("library", FindingKey.parse(mech.key), site=first, evidence=(
        f"compiled between two of {mech.what}'s reads, outside them (an op on the CPU cutting its graph)"))


def _library_call_around(c: Any, step: _StepFacts, ctx: _Context) -> Cause | None:
    """A compile outside any read, between two reads that one library call at one user line
    made (the same ``via``, file and line): it happened inside that call (``model.generate()``
    reading its stop condition every token, with an op on the CPU cutting a graph between two
    reads). It is the call's, like its reads, whatever op forced it."""
    if ctx.calls_by_step is None:
        ctx.calls_by_step = {}
        syncs = ctx.syncs
        if len(syncs) and "via" in syncs:
            live = syncs[~syncs["deferred"].astype(bool) & syncs["via"].notna()]
            for row in zip(live["step"].tolist(), live["t0"].tolist(), live["t1"].tolist(), live["via"].tolist(),
                           live["file"].tolist(), live["line"].tolist(), live["site"].tolist()):
                ctx.calls_by_step.setdefault(int(row[0]), []).append(
                    (float(row[1]), float(row[2]), str(row[3]), str(row[4]), int(row[5]), int(row[6])))
            for in_step in ctx.calls_by_step.values():
                in_step.sort()
    reads = ctx.calls_by_step.get(step.i)
    if not reads:
        return None
    t = float(c["t"])
    start = t - float(c["ms"]) / 1e3
    before = [r for r in reads if r[1] <= start]
    after = [r for r in reads if r[0] >= t]
    if not before or not after:
        return None
    b, a = before[-1], after[0]
    if b[2:5] != a[2:5]:
        return None
    via, file, line, site = b[2], b[3], b[4], b[5]
    return Cause("implicit_sync", FindingKey.sync(site), site=site, evidence=(
        f"compiled inside {via} (called from {os.path.basename(file)}:{line}), between two of its "
        "host reads: a graph it ran, cut there by an op on the CPU or a sync of its own"))


def _fmt(shape: Shape | None) -> str:
    return "?" if shape is None else "[" + ", ".join(str(s) for s in shape) + "]"
