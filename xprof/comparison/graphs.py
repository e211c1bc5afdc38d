"""Graphs and input shapes that only one of two runs has.

Run files carry no graph hashes (torch_xla's hash is private and its match with the
debug output unverified), so a compiled graph is identified by what the run does
record: its size in IR nodes (``TensorsGraphSize``) and the input shapes of the step
that compiled it. Two runs that compile a graph of the same size for the same inputs
are taken to compile the same graph; a graph the new run compiles for ``[4, 12]``
inputs that the base never saw is "new", whatever its size.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from xprof.analysis.model import Analysis
from xprof.comparison.model import GraphChange, ShapeChange


def _shape(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    try:
        return tuple(int(d) for d in value)
    except TypeError:
        return ()


def _signatures(analysis: Analysis) -> dict[int, str]:
    """Signature id -> ``input_ids[4, 12] int64, labels[4] int64``."""
    out: dict[int, list[str]] = {}
    df = analysis.inputs
    if df is None or not len(df):
        return {}
    for row in df.itertuples(index=False):
        sig = getattr(row, "sig", None)
        if sig is None or pd.isna(sig):
            continue
        dims = ", ".join(str(d) for d in _shape(getattr(row, "shape", None)))
        spec = getattr(row, "sharding", None)
        sharded = f" {spec or 'unsharded'}" if isinstance(spec, str) else ""  # SPMD runs
        out.setdefault(int(sig), []).append(f"{row.name}[{dims}] {row.dtype}{sharded}")
    return {k: ", ".join(v) for k, v in out.items()}


def _graphs(analysis: Analysis) -> dict[tuple[int | None, str], dict[str, Any]]:
    sigs = _signatures(analysis)
    df = analysis.compiles
    out: dict[tuple[int | None, str], dict[str, Any]] = {}
    if df is None or not len(df):
        return out
    # Steps as the summary numbers them (training steps, not barriers: a loader's empty first
    # barrier or an eval pass's barriers are not steps).
    steps = analysis.steps
    user_step = (dict(zip(steps["i"].tolist(), steps["user_step"].tolist()))
                 if steps is not None and len(steps) and "user_step" in steps else {})
    for row in df.itertuples(index=False):
        nodes_raw = getattr(row, "graph_nodes", None)
        nodes = None if nodes_raw is None or pd.isna(nodes_raw) else int(nodes_raw)
        sig_raw = getattr(row, "sig", None)
        inputs = "" if sig_raw is None or pd.isna(sig_raw) else sigs.get(int(sig_raw), "")
        key = (nodes, inputs)
        g = out.setdefault(key, {"compiles": 0, "first_step": int(user_step.get(int(row.step), row.step)),
                                 "cause": str(getattr(row, "cause", "") or "")})
        g["compiles"] += 1
    return out


def diff_graphs(base: Analysis, new: Analysis) -> list[GraphChange]:
    """Compiled graphs (by size and input shapes) that only one run has; base's first."""
    a, b = _graphs(base), _graphs(new)
    out: list[GraphChange] = []
    for side, mine, other in (("base", a, b), ("new", b, a)):
        for (nodes, inputs), g in mine.items():
            if (nodes, inputs) not in other:
                out.append(GraphChange(side, nodes, inputs, g["compiles"], g["first_step"], g["cause"]))
    return out


ShapeKey = tuple[str, tuple[int, ...], str, str | None]
"""(input, shape, dtype, sharding); the sharding is None outside SPMD runs."""


def _shapes(analysis: Analysis) -> Counter[ShapeKey]:
    """(input, shape, dtype, sharding) -> steps that fed it."""
    df = analysis.inputs
    steps = analysis.steps
    if df is None or not len(df):
        return Counter()
    per_sig: Counter[int] = Counter()
    if steps is not None and "sig" in steps:
        for s in steps["sig"].dropna():
            per_sig[int(s)] += 1
    out: Counter[ShapeKey] = Counter()
    for row in df.itertuples(index=False):
        if row.sig is None or pd.isna(row.sig):
            continue
        spec = getattr(row, "sharding", None)
        key = (str(row.name), _shape(row.shape), str(row.dtype), spec if isinstance(spec, str) else None)
        out[key] += per_sig.get(int(row.sig), 0)
    return out


def diff_shapes(base: Analysis, new: Analysis) -> list[ShapeChange]:
    """Input shapes, with their sharding in SPMD runs, that only one run fed (an input both
    runs lack is not listed). When only one of the runs recorded shardings, shapes are
    compared alone."""
    a, b = _shapes(base), _shapes(new)
    if not (any(k[3] is not None for k in a) and any(k[3] is not None for k in b)):
        a, b = _unsharded(a), _unsharded(b)
    out: list[ShapeChange] = []
    for side, mine, other in (("base", a, b), ("new", b, a)):
        for (name, shape, dtype, spec), steps in mine.items():
            if (name, shape, dtype, spec) not in other:
                out.append(ShapeChange(side, name, list(shape), dtype, steps, spec))
    return out


def _unsharded(shapes: Counter[ShapeKey]) -> Counter[ShapeKey]:
    """The same counts with the shardings left out (merging an input's shardings)."""
    out: Counter[ShapeKey] = Counter()
    for (name, shape, dtype, _), steps in shapes.items():
        out[(name, shape, dtype, None)] += steps
    return out
