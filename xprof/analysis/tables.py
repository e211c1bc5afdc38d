"""Run columns -> pandas tables: one row per step, compile, host read and input.

The bulk records come as columns (:class:`xprof.runcolumns.RunColumns`: read from the file
by DuckDB, or built from typed records); this module turns them into the tables everything
after works on, column by column (no Python object per step), with ``searchsorted`` for
time attribution, so a million-step run builds its tables in about a second.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from xprof.runcolumns import RunColumns
from xprof.runfile import CACHED, EXECUTION_COUNTERS, TO_CPU, UNCACHED, Input, Site


def live_reads(syncs: pd.DataFrame) -> pd.DataFrame:
    """The rows of a host-read table that made the host wait (not deferred step-closure reads).

    Most runs defer no read: then a shallow copy (copy-on-write: changing it leaves ``syncs``
    as it is) instead of a filter that copies every column (the analysis asks about seven times)."""
    if not len(syncs):
        return syncs
    deferred = syncs["deferred"].to_numpy(dtype=bool)
    return syncs[~deferred] if deferred.any() else syncs.copy(deep=False)


def _nullable(col: np.ndarray) -> pd.array:
    """A masked int column as pandas' nullable Int64."""
    return pd.arrays.IntegerArray(np.asarray(np.ma.getdata(col), dtype=np.int64),
                                  np.asarray(np.ma.getmaskarray(col), dtype=bool).copy())


_NO_FALLBACK: dict[str, int] = {}
"""The ``fallback`` cell of every step that ran no CPU-fallback op (shared, never modified)."""


def step_table(cols: RunColumns) -> pd.DataFrame:
    st = cols.steps
    df = pd.DataFrame({
        "i": st["i"],
        "t0": st["t0"],
        "tb": st["tb"],
        "t1": st["t1"],
        "barrier": st["barrier"],
        "sig": _nullable(st["sig"]),
        "site": _nullable(st["site"]),
        "uncached": cols.counter(UNCACHED),
        "cached": cols.counter(CACHED),
        "barrier_uncached": st["barrier_uncached"],
        "barrier_cached": st["barrier_cached"],
        # A process's own executions, or SPMD's replicated ones (a run counts in one of them).
        "executions": sum((cols.counter(name) for name in EXECUTION_COUNTERS),
                          np.zeros(cols.n_steps, dtype=np.int64)),
        "transfers": cols.counter(TO_CPU),
        "opt": st["opt"],
        "dynamo_graphs": st["dynamo_graphs"],
        "nograd": st["nograd"],
        "eval_mode": st["eval_mode"],
        "backward": st["backward"],
        "mid_graphs": st["mid_graphs"],
        "grad_off": st["grad_off"],
    }, copy=False)  # (the run's arrays as they are, not a second copy of each: 150 MB at 1M steps)
    # The step ran a graph: at its barrier, or before it outside the host reads (eager
    # mode's ops; its barrier then has nothing left to run).
    df["work"] = (barrier_graphs(df) > 0) | (df["mid_graphs"].to_numpy() > 0)
    df["step_ms"] = (st["t1"] - st["t0"]) * 1e3
    df["fallback"] = _fallback_counts(cols)
    return df


def barrier_graphs(steps: pd.DataFrame) -> np.ndarray:
    """Graphs each barrier itself compiled or found cached (``bu`` + ``bc``): 0 for a barrier
    with nothing to run, such as eager mode's, whose step ran its ops before it."""
    return (steps["barrier_uncached"].to_numpy() + steps["barrier_cached"].to_numpy()).astype(np.int64)


def _fallback_counts(cols: RunColumns) -> np.ndarray:
    """The CPU-fallback counters of each step as a dict (the shared empty one where none ran)."""
    out = np.empty(cols.n_steps, dtype=object)
    out.fill(_NO_FALLBACK)
    fallback = cols.fallback_counters()
    if not fallback:
        return out
    names = list(fallback)
    values = np.column_stack([fallback[n] for n in names])
    for r in np.flatnonzero(values.any(axis=1)).tolist():
        out[r] = {n: int(v) for n, v in zip(names, values[r].tolist()) if v}
    return out


def fallback_rows(steps: pd.DataFrame) -> np.ndarray:
    """Rows of the step table whose step ran a CPU-fallback op (a ``fallback`` dict that is not
    empty): most steps ran none, and a long run has a million of them."""
    if not len(steps):
        return np.zeros(0, dtype=np.int64)
    cells = steps["fallback"].to_numpy(dtype=object)
    maybe = np.flatnonzero(cells != _NO_FALLBACK)  # (one C loop: an empty cell equals the shared {})
    return maybe[np.asarray([bool(cells[r]) for r in maybe.tolist()], dtype=bool)] if len(maybe) else maybe


def _step_index_by_time(df: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """Row of the step whose barrier started last at or before each time (0 before any)."""
    tb = df["tb"].to_numpy()
    rows = np.searchsorted(tb, times, side="right") - 1
    return np.clip(rows, 0, max(len(df) - 1, 0))


SYNC_COLUMNS = ["step", "t0", "t1", "ms", "site", "access", "file", "line", "func", "code", "via",
                "deferred", "uncached", "cached", "executions", "thread", "inner"]

_NO_SITE = ("?", "?", 0, "?", None, "", None)
"""What a read shows when its site record is missing."""


def sync_table(cols: RunColumns, sites: dict[int, Site]) -> pd.DataFrame:
    sy = cols.syncs
    n = len(sy["step"])
    if not n:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SYNC_COLUMNS})
    # Reads name a handful of sites: look each up once, then spread them by index.
    site_ids = sy["site"]
    inverse, distinct = pd.factorize(site_ids)
    info = [(s.access, s.file, s.line, s.func, s.via, s.code, s.inner) if (s := sites.get(int(k))) else _NO_SITE
            for k in distinct.tolist()]
    attrs = list(zip(*info)) if info else [()] * 7

    def spread(k: int) -> list[Any]:
        return np.asarray(attrs[k], dtype=object)[inverse].tolist()

    access, file, line, func, via, code, inner = (spread(k) for k in range(7))
    return pd.DataFrame({
        "step": sy["step"], "t0": sy["t0"], "t1": sy["t1"], "ms": (sy["t1"] - sy["t0"]) * 1e3,
        "site": site_ids, "access": access, "file": file, "line": line, "func": func, "code": code,
        "via": via, "deferred": sy["deferred"], "uncached": sy["uncached"], "cached": sy["cached"],
        "executions": sy["executions"], "thread": sy["thread"].tolist(), "inner": inner,
    }, columns=SYNC_COLUMNS)


def compile_table(cols: RunColumns, steps: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """One row per compile event; ``sync_row`` is the host read it happened inside, if any."""
    names = ["step", "t", "ms", "at", "sync_row", "graph_nodes"]
    co = cols.compiles
    if not len(co["step"]):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in names})
    t = co["t"]
    ms = co["ns"] / 1e6
    step = co["step"]
    at = co["at"].tolist()
    sync_row = np.full(len(t), -1, dtype=np.int64)
    if len(syncs):
        order = np.argsort(syncs["t0"].to_numpy(), kind="stable")
        s0 = syncs["t0"].to_numpy()[order]
        s1 = syncs["t1"].to_numpy()[order]
        pos = np.searchsorted(s0, t, side="right") - 1
        safe = np.clip(pos, 0, None)
        inside = (pos >= 0) & (np.asarray(at, dtype=object) == "step") & (t <= s1[safe])
        sync_row[inside] = order[safe[inside]]
    nodes = _graph_nodes_after(cols, t)
    df = pd.DataFrame({"step": step, "t": t, "ms": ms, "at": at, "sync_row": sync_row,
                       "graph_nodes": nodes})
    if (np.diff(t) >= 0).all():
        return df  # (in time order already, as recorded: a stable sort would leave it as it is)
    return df.sort_values("t", kind="stable").reset_index(drop=True)


def _sorted_sizes(cols: RunColumns) -> np.ndarray:
    """The graph-size samples sorted by time (then size), as the record reader's ``sorted()`` did."""
    return _by_time(cols.sample("graph_sizes"))


def _graph_nodes_after(cols: RunColumns, times: np.ndarray) -> pd.array:
    """TensorsGraphSize is sampled right after a graph is compiled: the first sample at or
    after each compile's end is that graph's node count."""
    gs = _sorted_sizes(cols)
    if not len(gs):
        return pd.array([None] * len(times), dtype="Int64")
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


def barrier_graph_nodes(cols: RunColumns, steps: pd.DataFrame) -> pd.array:
    """Node count of the graph each barrier ran: the graph-size sample inside [tb, t1]."""
    gs = _sorted_sizes(cols)
    if not len(gs) or not len(steps):
        return pd.array([None] * len(steps), dtype="Int64")
    t1 = steps["t1"].to_numpy()
    tb = steps["tb"].to_numpy()
    pos = np.searchsorted(gs[:, 0], t1, side="right") - 1
    safe = np.clip(pos, 0, None)
    found = (pos >= 0) & (gs[safe, 0] >= tb) & steps["work"].to_numpy(dtype=bool)
    return _nullable_ints(gs[safe, 1], found)


def attribute_executions(executions: np.ndarray, steps: pd.DataFrame, syncs: pd.DataFrame) -> tuple[
        np.ndarray, np.ndarray, float]:
    """Execution ms per step, of which forced by host reads, and the total seconds.

    ExecuteTime samples are ``(end time, duration)`` and arrive late (executions are
    asynchronous), so each is placed by its start time: inside a host read's window it
    belongs to that read's step; otherwise to the last barrier that started before it.
    """
    n = len(steps)
    per_step = np.zeros(n)
    by_sync = np.zeros(n)
    if not len(executions) or not n:
        return per_step, by_sync, 0.0
    ex = np.asarray(executions, dtype=np.float64).reshape(-1, 2)
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
        # The read's step, as a row of ``steps``, where it has one.
        hit, at = _step_rows(steps, sstep[safe[in_sync]])
        rows[np.flatnonzero(in_sync)[hit]] = at
    np.add.at(per_step, rows, dur_s * 1e3)
    np.add.at(by_sync, rows[in_sync], dur_s[in_sync] * 1e3)
    return per_step, by_sync, float(dur_s.sum())


def _executions_by_start(executions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ExecuteTime samples as (start times, durations in seconds), sorted by start."""
    ex = _by_time(np.asarray(executions, dtype=np.float64).reshape(-1, 2))
    dur_s = ex[:, 1] / 1e9
    start = ex[:, 0] - dur_s
    if len(start) > 1 and not (np.diff(start) >= 0).all():
        order = np.argsort(start, kind="stable")
        start, dur_s = start[order], dur_s[order]
    return start, dur_s


def _work_barriers(steps: pd.DataFrame) -> np.ndarray:
    return steps["tb"].to_numpy(dtype=float)[steps["work"].to_numpy(dtype=bool)]


def sync_executions(executions: np.ndarray, syncs: pd.DataFrame,
                    steps: pd.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Executions that started inside each host read's window: (ms, count) per sync row.

    A barrier that compiled a graph launched it asynchronously: the first execution that starts
    at or after the barrier's start is that graph's, even when a host read early in the next
    step waited for it (and so saw it start inside its window). Those are not the read's."""
    out = np.zeros(len(syncs))
    if not len(executions) or not len(syncs):
        return out, np.zeros(len(syncs), dtype=np.int64)
    start, dur_s = _executions_by_start(executions)
    if steps is not None and len(steps):
        own = _barrier_executions(start, _work_barriers(steps))
        start, dur_s = start[~own], dur_s[~own]
    csum = np.concatenate([[0.0], np.cumsum(dur_s)])
    lo = np.searchsorted(start, syncs["t0"].to_numpy(), side="left")
    hi = np.searchsorted(start, syncs["t1"].to_numpy(), side="right")
    return (csum[hi] - csum[lo]) * 1e3, (hi - lo).astype(np.int64)


def sync_savings(executions: np.ndarray, syncs: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """What removing each host read would save, in ms per sync row: its wait, less what the
    host would have waited at the barrier anyway.

    A barrier launches its graph and returns; the device runs it while the host traces the
    next step, and the next barrier waits for it to finish before launching its own. A read
    early in that step waits for that graph too. Without the step's reads the host would
    still wait at its barrier for as long as the graph outlasts the host's own work: when
    the device is the slower side, that part of a read's wait is not the read's. So per step:
    saved = waits - max(0, E - H), with E when the graph the step began with (launched by an
    earlier barrier) ended and H the host's work before the barrier (its time less the
    waits), both from the step's start; the step's saving is shared by its reads by wait.
    Deferred reads, reads on other threads and steps without execution samples keep their
    wait."""
    saved = syncs["ms"].to_numpy(dtype=float).copy() if len(syncs) else np.zeros(0)
    if not len(executions) or not len(syncs) or not len(steps):
        return saved
    start, dur_s = _executions_by_start(executions)
    own = _barrier_executions(start, _work_barriers(steps))
    own_start, own_end = start[own], start[own] + dur_s[own]
    if not len(own_start):
        return saved
    waiting = (~syncs["deferred"].to_numpy(dtype=bool)) & syncs["thread"].isna().to_numpy() & (saved > 0)
    if not waiting.any():
        return saved
    rows = np.flatnonzero(waiting)
    found, srow = _step_rows(steps, syncs["step"].to_numpy()[rows])  # (as attribute_executions places them)
    rows = rows[found]
    if not len(rows):
        return saved  # (reads after the last barrier: in no step)
    waits = np.bincount(srow, weights=saved[rows], minlength=len(steps)).astype(float)
    t0 = steps["t0"].to_numpy(dtype=float)
    tb = steps["tb"].to_numpy(dtype=float)
    # when the graphs launched by earlier barriers (started before the step's own) ended
    k = np.searchsorted(own_start, tb, side="left")
    ended = np.where(k > 0, np.maximum.accumulate(own_end)[np.clip(k - 1, 0, None)], -np.inf)
    host_ms = (tb - t0) * 1e3 - waits
    anyway = np.clip((ended - t0) * 1e3 - host_ms, 0.0, waits)
    share = np.divide(waits - anyway, waits, out=np.ones_like(waits), where=waits > 0)
    saved[rows] *= share[srow]
    return saved


def _step_rows(steps: pd.DataFrame, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row of ``steps`` of each step index in ``wanted`` (the last row with that index):
    (which of ``wanted`` have one, their rows)."""
    idx = steps["i"].to_numpy()
    by_i = np.argsort(idx, kind="stable")
    sorted_i = idx[by_i]
    pos = np.searchsorted(sorted_i, wanted, side="right") - 1
    hit = (pos >= 0) & (sorted_i[np.clip(pos, 0, None)] == wanted)
    return hit, by_i[pos[hit]]


def _by_time(pairs: np.ndarray) -> np.ndarray:
    """(time, value) pairs sorted by time, then value (as ``sorted()`` sorts tuples); samples
    come in time order, so mostly nothing moves."""
    if len(pairs) > 1 and not (np.diff(pairs[:, 0]) > 0).all():
        return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    return pairs


def _barrier_executions(start: np.ndarray, barriers: np.ndarray) -> np.ndarray:
    """Which executions (sorted start times) are barriers' own: each barrier, in order, takes
    the first execution starting at or after it that no earlier barrier took.

    With barriers in time order (what the recorder writes) the k-th barrier takes
    ``max(its first candidate, what the one before took + 1)``: a running maximum, no loop.
    """
    own = np.zeros(len(start), dtype=bool)
    first = np.searchsorted(start, barriers, side="left")
    if len(barriers) and np.all(np.diff(barriers) >= 0):
        n = np.arange(len(first))
        taken = np.maximum.accumulate(first - n) + n
        own[taken[taken < len(start)]] = True
        return own
    for k in first.tolist():  # barriers out of time order (a damaged file): one at a time
        while k < len(start) and own[k]:
            k += 1
        if k < len(start):
            own[k] = True
    return own


def input_table(signatures: dict[int, tuple[Input, ...]]) -> pd.DataFrame:
    """One row per input of each signature; ``sharding`` is None outside SPMD runs."""
    rows = [(sid, entry.name, entry.shape, entry.dtype, entry.src, entry.sharding)
            for sid, inputs in signatures.items() for entry in inputs]
    return pd.DataFrame(rows, columns=["sig", "name", "shape", "dtype", "src", "sharding"])
