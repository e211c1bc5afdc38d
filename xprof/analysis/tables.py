"""Run-file records -> pandas tables: one row per step, compile, host read and input.

This is the only place that knows how records are laid out; everything after works on
these tables. It is written to stay linear in the number of steps (plain list
comprehensions into columns, ``searchsorted`` for time attribution) so a million-step
run still loads in seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from xprof.runfile import Run

UNCACHED = "UncachedCompile"
CACHED = "CachedCompile"
EXECUTE = "ExecuteComputation"
TO_CPU = "xla::_to_cpu"
LOCAL_SCALAR = "aten::_local_scalar_dense"


def is_fallback(name: str) -> bool:
    return name.startswith("aten::") and name != LOCAL_SCALAR


def _col(steps: list[dict[str, Any]], key: str, default: Any = 0) -> list[Any]:
    return [s.get(key, default) for s in steps]


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
    counters = [s.get("c") or {} for s in steps]

    def counter(name: str) -> np.ndarray:
        return _int_column([c.get(name, 0) for c in counters])

    df = pd.DataFrame({
        "i": np.asarray(_col(steps, "i"), dtype=np.int64),
        "t0": np.asarray(_col(steps, "t0", 0.0), dtype=float),
        "tb": np.asarray(_col(steps, "tb", 0.0), dtype=float),
        "t1": np.asarray(_col(steps, "t1", 0.0), dtype=float),
        "barrier": _col(steps, "barrier", "sync"),
        "sig": pd.array(_col(steps, "sig", None), dtype="Int64"),
        "site": pd.array([v if isinstance(v, int) else None for v in _col(steps, "site", None)],
                         dtype="Int64"),
        "uncached": counter(UNCACHED),
        "cached": counter(CACHED),
        "barrier_uncached": np.asarray(_col(steps, "bu"), dtype=np.int64),
        "barrier_cached": np.asarray(_col(steps, "bc"), dtype=np.int64),
        "executions": counter(EXECUTE),
        "transfers": counter(TO_CPU),
        "opt": np.asarray(_col(steps, "o"), dtype=np.int64),
        "dynamo_graphs": np.asarray(_col(steps, "dz"), dtype=np.int64),
        "nograd": np.asarray([bool(v) for v in _col(steps, "ng", 0)], dtype=bool),
    })
    df["work"] = (df["barrier_uncached"] + df["barrier_cached"]) > 0
    df["step_ms"] = (df["t1"] - df["t0"]) * 1e3
    df["fallback"] = _fallback_counts(steps)
    return df


def _fallback_counts(steps: list[dict[str, Any]]) -> list[dict[str, int]]:
    """The CPU-fallback counters of each step (a new dict per step).

    Steps repeat a handful of counter-name sets, so which names are fallback ops is decided
    once per set of names rather than once per name per step.
    """
    fallback_names: dict[tuple[str, ...], tuple[str, ...]] = {}
    out: list[dict[str, int]] = []
    for s in steps:
        c = s.get("c")
        if not c:
            out.append({})
            continue
        names = tuple(c)
        picked = fallback_names.get(names)
        if picked is None:
            picked = fallback_names[names] = tuple(k for k in names if is_fallback(k))
        out.append({k: c[k] for k in picked} if picked else {})
    return out


def _step_index_by_time(df: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """Row of the step whose barrier started last at or before each time (0 before any)."""
    tb = df["tb"].to_numpy()
    rows = np.searchsorted(tb, times, side="right") - 1
    return np.clip(rows, 0, max(len(df) - 1, 0))


def sync_table(run: Run) -> pd.DataFrame:
    cols = ["step", "t0", "t1", "ms", "site", "access", "file", "line", "func", "code", "via",
            "deferred", "uncached", "cached", "executions", "thread", "inner"]
    if not run.syncs:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    sites = run.sites
    rows = []
    for s in run.syncs:
        site = sites.get(s.get("site", -1), {})
        rows.append((
            int(s.get("i", 0)), float(s.get("t0", 0.0)), float(s.get("t1", 0.0)),
            (float(s.get("t1", 0.0)) - float(s.get("t0", 0.0))) * 1e3,
            int(s.get("site", -1)), str(site.get("kind", "?")), str(site.get("file", "?")),
            int(site.get("line", 0) or 0), str(site.get("func", "?")), str(site.get("code", "")),
            site.get("via"), bool(s.get("deferred", False)), int(s.get("u", 0)),
            int(s.get("c", 0)), int(s.get("x", 0)), s.get("thread"), site.get("inner"),
        ))
    return pd.DataFrame(rows, columns=cols)


def compile_table(run: Run, steps: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """One row per compile event; ``sync_row`` is the host read it happened inside, if any."""
    cols = ["step", "t", "ms", "at", "sync_row", "graph_nodes"]
    if not run.compiles:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    t = np.asarray([float(c.get("t", 0.0)) for c in run.compiles])
    ms = np.asarray([float(c.get("ns", 0.0)) / 1e6 for c in run.compiles])
    step = np.asarray([int(c.get("i", 0)) for c in run.compiles])
    at = [str(c.get("at", "barrier")) for c in run.compiles]
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
    live = syncs[~syncs["deferred"].astype(bool)] if len(syncs) else syncs
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


def sync_executions(run: Run, syncs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Executions that started inside each host read's window: (ms, count) per sync row."""
    out = np.zeros(len(syncs))
    if not run.executions or not len(syncs):
        return out, np.zeros(len(syncs), dtype=np.int64)
    ex = np.asarray(sorted(run.executions))
    dur_s = ex[:, 1] / 1e9
    start = ex[:, 0] - dur_s
    order = np.argsort(start, kind="stable")
    start, dur_s = start[order], dur_s[order]
    csum = np.concatenate([[0.0], np.cumsum(dur_s)])
    lo = np.searchsorted(start, syncs["t0"].to_numpy(), side="left")
    hi = np.searchsorted(start, syncs["t1"].to_numpy(), side="right")
    return (csum[hi] - csum[lo]) * 1e3, (hi - lo).astype(np.int64)


def input_table(run: Run) -> pd.DataFrame:
    rows = []
    for sid, inputs in run.signatures.items():
        for entry in inputs:
            shape = entry.get("shape")
            rows.append((sid, str(entry.get("name", "?")),
                         tuple(int(x) for x in shape) if isinstance(shape, list) else (),
                         str(entry.get("dtype", "?")), str(entry.get("src", "?"))))
    return pd.DataFrame(rows, columns=["sig", "name", "shape", "dtype", "src"])
