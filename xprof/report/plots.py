"""Plotly figures as plain dicts (``data`` and ``layout``), drawn in the page by plotly.js.

Figures are built as JSON-ready dicts rather than ``plotly.graph_objects`` so the report
needs only the plotly.js bundle, and so their size is under our control: a run of a
million steps is bucketed down to a few thousand points, while every step that compiled
stays a point of its own.

Hover texts pass through plotly's own small HTML renderer, so every value from the run
in them is HTML-escaped here.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.model import Analysis, Finding, is_missing
from xprof.diagnosis.cause import CauseName
from xprof.report import fmt
from xprof.report.prose import CAUSE_COLORS, cause_label
from xprof.words import plural

MAX_POINTS = 5000
"""Above this many steps the timeline shows buckets (mean and max) instead of steps."""
BUCKETS = 1000
"""How many buckets a long run is cut into."""

EXECUTE_COLOR = "#1c7ed6"
EXECUTE_MAX_COLOR = "#a5d8ff"
FONT = "Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def sig_id(value: Any) -> int | None:
    """A signature id from a nullable table cell (None where missing or not a number)."""
    if is_missing(value):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def signature_texts(analysis: Analysis) -> dict[int, str]:
    """``sig id -> "input_ids [8, 37] int64, labels [8, 37] int64"``."""
    out: dict[int, list[str]] = {}
    df = analysis.inputs
    if df is None or df.empty:
        return {}
    for row in df.itertuples(index=False):
        sid = sig_id(getattr(row, "sig", None))
        if sid is None:
            continue
        dims = getattr(row, "shape", None)
        dtype = getattr(row, "dtype", "") or ""
        text = f"{getattr(row, 'name', '?')} {fmt.shape(list(dims) if dims is not None else None)}"
        spec = getattr(row, "sharding", None)
        if isinstance(spec, str):  # SPMD: the sharding beside the shape
            dtype = f"{dtype} {fmt.sharding(spec)}"
        out.setdefault(sid, []).append(f"{text} {dtype}".strip())
    return {k: ", ".join(v) for k, v in out.items()}


def _bucketed(x: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float], list[float]]:
    """Cut a long series into :data:`BUCKETS` runs of steps: (first step, mean, max)."""
    size = math.ceil(len(x) / BUCKETS)
    starts = np.arange(0, len(x), size)
    counts = np.diff(np.append(starts, len(x)))
    y = np.asarray(y, dtype=float)
    mean = np.add.reduceat(y, starts) / counts
    return np.asarray(x)[starts].tolist(), mean.tolist(), np.maximum.reduceat(y, starts).tolist()


def _numbers(steps: pd.DataFrame, name: str) -> np.ndarray:
    """A step column as floats, 0 where missing, not a number or not finite."""
    if name not in steps:
        return np.zeros(len(steps))
    col = steps[name]
    try:
        values = col.to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):
        values = np.asarray([_num(v) for v in col.tolist()], dtype=float)
    return np.where(np.isfinite(values), values, 0.0)


def _base_layout(height: int) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 64, "r": 24, "t": 16, "b": 48},
        "font": {"family": FONT, "size": 13, "color": "#212529"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",
        "hovermode": "closest",
        "hoverlabel": {"font": {"family": FONT, "size": 12}, "align": "left"},
        "legend": {"orientation": "h", "y": -0.16, "x": 0},
    }


def _execute_traces(idx: np.ndarray, exe: np.ndarray, max_points: int) -> tuple[list[dict[str, Any]], bool, int]:
    """The execute panel's lines: per step, or (over ``max_points`` steps) the mean and the max
    of each bucket of steps; with whether they are bucketed, and how many steps a bucket holds."""
    traces: list[dict[str, Any]] = []
    bucketed = len(idx) > max_points
    bucket_size = 1
    if bucketed:
        xs, mean, top = _bucketed(idx, exe)
        bucket_size = math.ceil(len(idx) / BUCKETS)
        traces.append({
            "type": "scatter", "mode": "lines", "name": f"execute ms, max per {bucket_size} steps",
            "x": xs, "y": [round(v, 3) for v in top], "xaxis": "x", "yaxis": "y",
            "line": {"color": EXECUTE_MAX_COLOR, "width": 1},
            "hovertemplate": "steps %{x}+<br>max %{y:.2f} ms<extra></extra>",
        })
        traces.append({
            "type": "scatter", "mode": "lines", "name": f"execute ms, mean per {bucket_size} steps",
            "x": xs, "y": [round(v, 3) for v in mean], "xaxis": "x", "yaxis": "y",
            "line": {"color": EXECUTE_COLOR, "width": 1.5},
            "hovertemplate": "steps %{x}+<br>mean %{y:.2f} ms<extra></extra>",
        })
    else:
        traces.append({
            "type": "scatter", "mode": "lines+markers" if len(idx) <= 300 else "lines",
            "name": "execute ms", "x": idx.tolist(), "y": np.round(exe, 3).tolist(),
            "xaxis": "x", "yaxis": "y", "line": {"color": EXECUTE_COLOR, "width": 1.5},
            "marker": {"size": 4},
            "hovertemplate": "step %{x}<br>execute %{y:.2f} ms<extra></extra>",
        })
    return traces, bucketed, bucket_size


def timeline_figure(analysis: Analysis, max_points: int = MAX_POINTS) -> dict[str, Any] | None:
    """Compile ms (top) and execute ms (bottom) per step, every compile step marked.

    Returns None when the run has no steps. ``layout.meta.bucketed`` says whether the
    execute panel shows buckets (``bucket_size`` steps each) rather than single steps.
    """
    steps = analysis.steps
    if steps is None or steps.empty or "i" not in steps:
        return None
    sigs = signature_texts(analysis)
    # Column by column: a long run has a million steps, a few hundred of which compiled.
    idx = steps["i"].to_numpy(dtype=np.int64)
    exe = _numbers(steps, "execute_ms")
    comp = _numbers(steps, "compile_ms")
    unc = _numbers(steps, "uncached").astype(np.int64)
    cause_col = steps["cause"].astype(object) if "cause" in steps else pd.Series([""] * len(steps), dtype=object)
    cause_col = cause_col.where(cause_col.notna(), "")
    warm = (steps["warmup"].to_numpy(dtype=bool) if "warmup" in steps
            else (cause_col == CauseName.WARMUP).to_numpy(dtype=bool))
    sig_col = steps["sig"] if "sig" in steps else pd.Series([None] * len(steps), dtype=object)
    marked = np.flatnonzero((unc != 0) | (comp > 0))
    causes = {int(n): str(c or "") for n, c in zip(marked.tolist(), cause_col.iloc[marked].tolist())}
    recompiled = np.flatnonzero((unc != 0) & ~warm)
    for n, c in zip(recompiled.tolist(), cause_col.iloc[recompiled].tolist()):
        causes[int(n)] = str(c or "")

    traces: list[dict[str, Any]] = []
    # Top panel: one bar per step that compiled, coloured by cause (never bucketed).
    by_cause: dict[str, dict[str, list[Any]]] = {}
    for n in marked.tolist():
        i = int(idx[n])
        cause = CauseName.WARMUP if warm[n] and causes[n] in ("", CauseName.WARMUP) else (causes[n] or "unknown")
        g = by_cause.setdefault(cause, {"x": [], "y": [], "text": []})
        sid = sig_id(sig_col.iat[n])
        sig = sigs.get(sid, "") if sid is not None else ""
        g["x"].append(i)
        g["y"].append(round(float(comp[n]), 3))
        g["text"].append(
            f"<b>step {i}</b><br>{plural(int(unc[n]), 'uncached compile')}, {fmt.ms(float(comp[n]))}"
            f"<br>cause: {_e(cause_label(cause))}" + (f"<br>inputs: {_e(sig)}" if sig else ""))
    for cause in sorted(by_cause, key=lambda c: (c != CauseName.WARMUP, c)):
        g = by_cause[cause]
        traces.append({
            "type": "bar", "name": f"compile: {cause_label(cause)}", "x": g["x"], "y": g["y"],
            "hovertext": g["text"], "hoverinfo": "text", "xaxis": "x", "yaxis": "y2",
            "marker": {"color": CAUSE_COLORS.get(cause, "#495057")},
        })
    execute, bucketed, bucket_size = _execute_traces(idx, exe, max_points)
    traces += execute
    # Every step with an uncached compile also gets a mark on the execute panel.
    if len(recompiled):
        rows = recompiled.tolist()
        traces.append({
            "type": "scatter", "mode": "markers", "name": "recompile", "x": idx[recompiled].tolist(),
            "y": [round(float(exe[n]), 3) for n in rows], "xaxis": "x", "yaxis": "y",
            "marker": {"symbol": "x", "size": 9, "color": "#c92a2a"},
            "hovertext": [f"<b>step {int(idx[n])}</b>: recompiled<br>cause: "
                          f"{_e(cause_label(causes[n]) or 'unknown')}" for n in rows],
            "hoverinfo": "text",
        })
    bar_width = max(0.8, len(idx) / 300)  # (bars one step wide vanish on a long axis)
    for t in traces:
        if t.get("type") == "bar":
            t["width"] = bar_width
    positive = np.sort(exe[exe > 0])
    log_y = bool(len(positive)) and positive[-1] > 20 * positive[len(positive) // 2]
    layout = _base_layout(460)
    layout.update({
        "barmode": "overlay",
        "bargap": 0.1,
        "xaxis": {"title": {"text": "step"}, "anchor": "y", "zeroline": False,
                  "gridcolor": "#f1f3f5", "range": [int(idx.min()) - 0.5, int(idx.max()) + 0.5]},
        "yaxis": {"title": {"text": "execute ms" + (" (log)" if log_y else "")}, "domain": [0.0, 0.42],
                  "gridcolor": "#f1f3f5", **({"type": "log", "dtick": 1} if log_y else {"rangemode": "tozero"})},
        "yaxis2": {"title": {"text": "compile ms"}, "domain": [0.52, 1.0], "rangemode": "tozero",
                   "anchor": "x", "gridcolor": "#f1f3f5"},
        "meta": {"bucketed": bucketed, "bucket_size": bucket_size, "steps": len(idx)},
    })
    return {"data": traces, "layout": layout}


def _varying_dim(shapes: list[list[int]]) -> int | None:
    if not shapes:
        return None
    rank = min(len(s) for s in shapes)
    for d in range(rank):
        if len({s[d] for s in shapes}) > 1:
            return d
    return None


def shape_figure(analysis: Analysis, finding: Finding,
                 max_points: int = MAX_POINTS) -> dict[str, Any] | None:
    """The size of ``finding.input`` along its changing dimension, step by step."""
    name = finding.input
    inputs = analysis.inputs
    steps = analysis.steps
    if not name or inputs is None or inputs.empty or steps is None or steps.empty or "sig" not in steps:
        return None
    dim = finding.dim if finding.dim is not None else _varying_dim(finding.shapes or [])
    by_sig: dict[int, list[int]] = {}
    for row in inputs.itertuples(index=False):
        if getattr(row, "name", None) != name:
            continue
        sid = sig_id(getattr(row, "sig", None))
        dims = getattr(row, "shape", None)
        if sid is not None and dims is not None:
            by_sig[sid] = [int(d) for d in dims]
    if not by_sig:
        return None
    # Per signature, then spread over the steps by index (a long run has a million steps).
    sig_ids = sorted(by_sig)
    sig_arr = steps["sig"].to_numpy(dtype=np.float64, na_value=np.nan)
    pos = np.searchsorted(np.asarray(sig_ids, dtype=np.float64), sig_arr)
    safe = np.clip(pos, 0, len(sig_ids) - 1)
    keep = np.flatnonzero(np.asarray(sig_ids, dtype=np.float64)[safe] == sig_arr)
    which = safe[keep]
    size = [float(by_sig[k][dim]) if dim is not None and dim < len(by_sig[k]) else float(math.prod(by_sig[k]))
            for k in sig_ids]
    label_of = [fmt.shape(by_sig[k]) for k in sig_ids]
    x_arr = steps["i"].to_numpy(dtype=np.int64)[keep]
    y_arr = np.asarray(size, dtype=float)[which]
    if not len(x_arr):
        return None
    xs: list[int] = x_arr.tolist()
    ys: list[float] = y_arr.tolist()
    ylabel = f"{name} dim {dim}" if dim is not None else f"{name} elements"
    hit = set(finding.steps or [])
    traces: list[dict[str, Any]] = []
    if len(xs) > max_points:
        bx, _mean, top = _bucketed(x_arr, y_arr)
        bucket = math.ceil(len(xs) / BUCKETS)
        low = np.minimum.reduceat(y_arr, np.arange(0, len(xs), bucket)).tolist()
        traces.append({"type": "scatter", "mode": "lines", "name": f"max per {bucket} steps",
                       "x": bx, "y": top, "line": {"color": "#ffc078", "width": 1}})
        traces.append({"type": "scatter", "mode": "lines", "name": f"min per {bucket} steps",
                       "x": bx, "y": low, "line": {"color": "#ffd8a8", "width": 1}})
    else:
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": _e(ylabel), "x": xs, "y": ys,
            "line": {"shape": "hv", "color": "#adb5bd", "width": 1}, "marker": {"size": 5, "color": "#868e96"},
            "hovertext": [f"step {x}: {_e(name)} {label_of[w]}" for x, w in zip(xs, which.tolist())],
            "hoverinfo": "text",
        })
    at_hit = np.flatnonzero(np.isin(x_arr, list(hit)))
    cx = x_arr[at_hit].tolist()
    if cx:
        cy = y_arr[at_hit].tolist()
        cl = [label_of[w] for w in which[at_hit].tolist()]
        traces.append({
            "type": "scatter", "mode": "markers", "name": "compiled here", "x": cx, "y": cy,
            "marker": {"size": 9, "color": CAUSE_COLORS[CauseName.INPUT_SHAPE], "symbol": "diamond"},
            "hovertext": [f"<b>step {x}</b> compiled<br>{_e(name)} {lab}" for x, lab in zip(cx, cl)],
            "hoverinfo": "text",
        })
    layout = _base_layout(220)
    layout.update({
        "margin": {"l": 56, "r": 16, "t": 8, "b": 40},
        "showlegend": True,
        "legend": {"orientation": "h", "y": 1.12, "x": 0},
        "xaxis": {"title": {"text": "step"}, "gridcolor": "#f1f3f5", "zeroline": False},
        "yaxis": {"title": {"text": _e(ylabel)}, "gridcolor": "#f1f3f5", "rangemode": "tozero"},
    })
    return {"data": traces, "layout": layout}
