"""Typed run records -> pandas tables: one row per step, compile, host read and input.

The records come decoded from :mod:`xprof.runfile`; this module turns them into the
columns everything after works on. It is written to stay linear in the number of steps (plain list
comprehensions into columns, ``searchsorted`` for time attribution) so a million-step
run still loads in seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from xprof.runfile import CACHED, EXECUTION_COUNTERS, TO_CPU, UNCACHED, Run, Step, is_fallback_counter


def live_reads(syncs: pd.DataFrame) -> pd.DataFrame:
    """The rows of a host-read table that made the host wait (not deferred step-closure reads)."""
    return syncs[~syncs["deferred"].astype(bool)] if len(syncs) else syncs


def _int_column(values: list[Any]) -> np.ndarray:
    """``values`` as int64, converting each the way ``int()`` does.

    A list of Python ints (what the recorder writes) converts in one numpy call; anything
    else (floats, strings, huge ints) goes through ``int()`` one by one, so it converts or
    fails exactly as it always did.
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "ib":
        return arr.astype(np.int64)
    return np.asarray([int(v) for v in values], dtype=np.int64)


def step_table(run: Run) -> pd.DataFrame:
    steps = run.steps
    cols: list[tuple[Any, ...]] = list(zip(*steps)) if steps else [()] * len(Step._fields)
    i, t0, tb, t1, barrier, counters, bu, bc, sig, opt, nograd, dz, site, eval_mode, backward = cols

    def counter(name: str) -> np.ndarray:
        return _int_column([c.get(name, 0) for c in counters])

    df = pd.DataFrame({
        "i": np.asarray(i, dtype=np.int64),
        "t0": np.asarray(t0, dtype=float),
        "tb": np.asarray(tb, dtype=float),
        "t1": np.asarray(t1, dtype=float),
        "barrier": list(barrier),
        "sig": pd.array(list(sig), dtype="Int64"),
        "site": pd.array(list(site), dtype="Int64"),
        "uncached": counter(UNCACHED),
        "cached": counter(CACHED),
        "barrier_uncached": np.asarray(bu, dtype=np.int64),
        "barrier_cached": np.asarray(bc, dtype=np.int64),
        # A process's own executions, or SPMD's replicated ones (a run counts in one of them).
        "executions": sum((counter(name) for name in EXECUTION_COUNTERS), np.zeros(len(steps), dtype=np.int64)),
        "transfers": counter(TO_CPU),
        "opt": np.asarray(opt, dtype=np.int64),
        "dynamo_graphs": np.asarray(dz, dtype=np.int64),
        "nograd": np.asarray(nograd, dtype=bool),
        "eval_mode": np.asarray(eval_mode, dtype=bool),
        "backward": np.asarray(backward, dtype=np.int64),
    })
    df["work"] = (df["barrier_uncached"] + df["barrier_cached"]) > 0
    df["step_ms"] = (df["t1"] - df["t0"]) * 1e3
    df["fallback"] = _fallback_counts(counters)
    return df


def _fallback_counts(counters: tuple[dict[str, int], ...]) -> list[dict[str, int]]:
    """The CPU-fallback counters of each step (a new dict per step).

    Steps repeat a handful of counter-name sets, so which names are fallback ops is decided
    once per set of names rather than once per name per step.
    """
    fallback_names: dict[tuple[str, ...], tuple[str, ...]] = {}
    out: list[dict[str, int]] = []
    for c in counters:
        if not c:
            out.append({})
            continue
        names = tuple(c)
        picked = fallback_names.get(names)
        if picked is None:
            picked = fallback_names[names] = tuple(k for k in names if is_fallback_counter(k))
        out.append({k: c[k] for k in picked} if picked else {})
    return out


def _step_index_by_time(df: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """Row of the step whose barrier started last at or before each time (0 before any)."""
    tb = df["tb"].to_numpy()
    rows = np.searchsorted(tb, times, side="right") - 1
    return np.clip(rows, 0, max(len(df) - 1, 0))


SYNC_COLUMNS = ["step", "t0", "t1", "ms", "site", "access", "file", "line", "func", "code", "via",
                "deferred", "uncached", "cached", "executions", "thread", "inner"]


def sync_table(run: Run) -> pd.DataFrame:
    if not run.syncs:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SYNC_COLUMNS})
    sites = run.sites
    rows = []
    for s in run.syncs:
        site = sites.get(s.site)
        access, file, line, func, via, code, inner = (
            (site.access, site.file, site.line, site.func, site.via, site.code, site.inner)
            if site else ("?", "?", 0, "?", None, "", None))
        rows.append((s.i, s.t0, s.t1, (s.t1 - s.t0) * 1e3, s.site, access, file, line, func, code, via,
                     s.deferred, s.uncached, s.cached, s.executions, s.thread, inner))
    return pd.DataFrame(rows, columns=SYNC_COLUMNS)


def compile_table(run: Run, steps: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """One row per compile event; ``sync_row`` is the host read it happened inside, if any."""
    cols = ["step", "t", "ms", "at", "sync_row", "graph_nodes"]
    if not run.compiles:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    step_c, t_c, ns_c, at_c = zip(*run.compiles)
    t = np.asarray(t_c, dtype=float)
    ms = np.asarray(ns_c, dtype=float) / 1e6
    step = np.asarray(step_c, dtype=np.int64)
    at = list(at_c)
    sync_row = np.full(len(t), -1, dtype=np.int64)
    if len(syncs):
        order = np.argsort(syncs["t0"].to_numpy(), kind="stable")
        s0 = syncs["t0"].to_numpy()[order]
        s1 = syncs["t1"].to_numpy()[order]
        pos = np.searchsorted(s0, t, side="right") - 1
        safe = np.clip(pos, 0, None)
        inside = (pos >= 0) & (np.asarray(at, dtype=object) == "step") & (t <= s1[safe])
        sync_row[inside] = order[safe[inside]]
    nodes = _graph_nodes_after(run, t)
    df = pd.DataFrame({"step": step, "t": t, "ms": ms, "at": at, "sync_row": sync_row,
                       "graph_nodes": nodes})
    return df.sort_values("t", kind="stable").reset_index(drop=True)


def _graph_nodes_after(run: Run, times: np.ndarray) -> pd.array:
    """TensorsGraphSize is sampled right after a graph is compiled: the first sample at or
    after each compile's end is that graph's node count."""
    if not run.graph_sizes:
        return pd.array([None] * len(times), dtype="Int64")
    gs = np.asarray(sorted(run.graph_sizes))
    pos = np.searchsorted(gs[:, 0], times, side="left")
    safe = np.clip(pos, 0, len(gs) - 1)
    found = (pos < len(gs)) & (gs[safe, 0] - times < 1.0)
    return _nullable_ints(gs[safe, 1], found)


def _nullable_ints(values: np.ndarray, mask: np.ndarray) -> pd.array:
    """``int(values[k])`` where ``mask`` is set, missing elsewhere, as an Int64 array.

    Built in one step instead of a list of ints and Nones; values that ``astype`` would not
    convert the way ``int()`` does (NaN, infinities, beyond int64) take the slow path so
    they fail or convert exactly as before.
    """
    picked = values[mask]
    if len(picked) and not (np.isfinite(picked).all() and np.abs(picked).max() < 2.0 ** 63):
        return pd.array([int(v) if m else None for v, m in zip(values, mask)], dtype="Int64")
    data = np.zeros(len(values), dtype=np.int64)
    data[mask] = picked.astype(np.int64)
    return pd.arrays.IntegerArray(data, ~mask)


def barrier_graph_nodes(run: Run, steps: pd.DataFrame) -> pd.array:
    """Node count of the graph each barrier ran: the graph-size sample inside [tb, t1]."""
    if not run.graph_sizes or not len(steps):
        return pd.array([None] * len(steps), dtype="Int64")
    gs = np.asarray(sorted(run.graph_sizes))
    t1 = steps["t1"].to_numpy()
    tb = steps["tb"].to_numpy()
    pos = np.searchsorted(gs[:, 0], t1, side="right") - 1
    safe = np.clip(pos, 0, None)
    found = (pos >= 0) & (gs[safe, 0] >= tb) & steps["work"].to_numpy(dtype=bool)
    return _nullable_ints(gs[safe, 1], found)


def attribute_executions(run: Run, steps: pd.DataFrame, syncs: pd.DataFrame) -> tuple[
        np.ndarray, np.ndarray, float]:
    """Execution ms per step, of which forced by host reads, and the total seconds.

    ExecuteTime samples are ``(end time, duration)`` and arrive late (executions are
    asynchronous), so each is placed by its start time: inside a host read's window it
    belongs to that read's step; otherwise to the last barrier that started before it.
    """
    n = len(steps)
    per_step = np.zeros(n)
    by_sync = np.zeros(n)
    if not run.executions or not n:
        return per_step, by_sync, 0.0
    ex = np.asarray(run.executions)
    dur_s = ex[:, 1] / 1e9
    start = ex[:, 0] - dur_s
    rows = _step_index_by_time(steps, start)
    in_sync = np.zeros(len(ex), dtype=bool)
    live = live_reads(syncs)
    if len(live):
        order = np.argsort(live["t0"].to_numpy(), kind="stable")
        s0 = live["t0"].to_numpy()[order]
        s1 = live["t1"].to_numpy()[order]
        sstep = live["step"].to_numpy()[order]
        pos = np.searchsorted(s0, start, side="right") - 1
        safe = np.clip(pos, 0, None)
        in_sync = (pos >= 0) & (start <= s1[safe])
        # The read's step, as a row of ``steps`` (the last row with that index), where it has one.
        idx = steps["i"].to_numpy()
        by_i = np.argsort(idx, kind="stable")
        sorted_i = idx[by_i]
        want = sstep[safe[in_sync]]
        j = np.searchsorted(sorted_i, want, side="right") - 1
        hit = (j >= 0) & (sorted_i[np.clip(j, 0, None)] == want)
        moved = np.flatnonzero(in_sync)[hit]
        rows[moved] = by_i[j[hit]]
    np.add.at(per_step, rows, dur_s * 1e3)
    np.add.at(by_sync, rows[in_sync], dur_s[in_sync] * 1e3)
    return per_step, by_sync, float(dur_s.sum())


def sync_executions(run: Run, syncs: pd.DataFrame,
                    steps: pd.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Executions that started inside each host read's window: (ms, count) per sync row.

    A barrier that compiled a graph launched it asynchronously: the first execution that starts
    at or after the barrier's start is that graph's, even when a host read early in the next
    step waited for it (and so saw it start inside its window). Those are not the read's."""
    out = np.zeros(len(syncs))
    if not run.executions or not len(syncs):
        return out, np.zeros(len(syncs), dtype=np.int64)
    ex = np.asarray(sorted(run.executions))
    dur_s = ex[:, 1] / 1e9
    start = ex[:, 0] - dur_s
    order = np.argsort(start, kind="stable")
    start, dur_s = start[order], dur_s[order]
    if steps is not None and len(steps):
        own = np.zeros(len(start), dtype=bool)
        for tb in steps.loc[steps["work"].astype(bool), "tb"].to_numpy(dtype=float):
            k = int(np.searchsorted(start, tb, side="left"))
            while k < len(start) and own[k]:
                k += 1
            if k < len(start):
                own[k] = True
        start, dur_s = start[~own], dur_s[~own]
    csum = np.concatenate([[0.0], np.cumsum(dur_s)])
    lo = np.searchsorted(start, syncs["t0"].to_numpy(), side="left")
    hi = np.searchsorted(start, syncs["t1"].to_numpy(), side="right")
    return (csum[hi] - csum[lo]) * 1e3, (hi - lo).astype(np.int64)


def input_table(run: Run) -> pd.DataFrame:
    """One row per input of each signature; ``sharding`` is None outside SPMD runs."""
    rows = [(sid, entry.name, entry.shape, entry.dtype, entry.src, entry.sharding)
            for sid, inputs in run.signatures.items() for entry in inputs]
    return pd.DataFrame(rows, columns=["sig", "name", "shape", "dtype", "src", "sharding"])
