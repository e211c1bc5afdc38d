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

import pandas as pd

from xprof.analysis.model import Analysis, Finding, is_missing
from xprof.report import fmt
from xprof.report.prose import CAUSE_COLORS, cause_label

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


def _bucketed(x: list[int], y: list[float]) -> tuple[list[float], list[float], list[float]]:
    """Cut a long series into :data:`BUCKETS` runs of steps: (first step, mean, max)."""
    size = math.ceil(len(x) / BUCKETS)
    xs: list[float] = []
    mean: list[float] = []
    top: list[float] = []
    for start in range(0, len(x), size):
        chunk = y[start:start + size]
        xs.append(x[start])
        mean.append(sum(chunk) / len(chunk))
        top.append(max(chunk))
    return xs, mean, top


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


def timeline_figure(analysis: Analysis, max_points: int = MAX_POINTS) -> dict[str, Any] | None:
    """Compile ms (top) and execute ms (bottom) per step, every compile step marked.

    Returns None when the run has no steps. ``layout.meta.bucketed`` says whether the
    execute panel shows buckets (``bucket_size`` steps each) rather than single steps.
    """
    steps = analysis.steps
    if steps is None or steps.empty or "i" not in steps:
        return None
    sigs = signature_texts(analysis)
    idx = [int(v) for v in steps["i"]]
    exe = [_num(v) for v in steps.get("execute_ms", pd.Series([0.0] * len(steps)))]
    comp = [_num(v) for v in steps.get("compile_ms", pd.Series([0.0] * len(steps)))]
    unc = [int(_num(v)) for v in steps.get("uncached", pd.Series([0] * len(steps)))]
    causes = [str(v or "") if not pd.isna(v) else "" for v in
              steps.get("cause", pd.Series([""] * len(steps)))]
    if "warmup" in steps:
        warm = [bool(v) for v in steps["warmup"]]
    else:
        warm = [c == "warmup" for c in causes]
    sig_col = list(steps.get("sig", pd.Series([None] * len(steps))))

    traces: list[dict[str, Any]] = []
    # Top panel: one bar per step that compiled, coloured by cause (never bucketed).
    by_cause: dict[str, dict[str, list[Any]]] = {}
    for n, i in enumerate(idx):
        if not unc[n] and comp[n] <= 0:
            continue
        cause = "warmup" if warm[n] and causes[n] in ("", "warmup") else (causes[n] or "unknown")
        g = by_cause.setdefault(cause, {"x": [], "y": [], "text": []})
        sid = sig_id(sig_col[n])
        sig = sigs.get(sid, "") if sid is not None else ""
        g["x"].append(i)
        g["y"].append(round(comp[n], 3))
        g["text"].append(
            f"<b>step {i}</b><br>{unc[n]} uncached compile(s), {fmt.ms(comp[n])}"
            f"<br>cause: {_e(cause_label(cause))}" + (f"<br>inputs: {_e(sig)}" if sig else ""))
    for cause in sorted(by_cause, key=lambda c: (c != "warmup", c)):
        g = by_cause[cause]
        traces.append({
            "type": "bar", "name": f"compile: {cause_label(cause)}", "x": g["x"], "y": g["y"],
            "hovertext": g["text"], "hoverinfo": "text", "xaxis": "x", "yaxis": "y2",
            "marker": {"color": CAUSE_COLORS.get(cause, "#495057")},
        })
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
            "name": "execute ms", "x": idx, "y": [round(v, 3) for v in exe],
            "xaxis": "x", "yaxis": "y", "line": {"color": EXECUTE_COLOR, "width": 1.5},
            "marker": {"size": 4},
            "hovertemplate": "step %{x}<br>execute %{y:.2f} ms<extra></extra>",
        })
    # Every step with an uncached compile also gets a mark on the execute panel.
    rx = [i for n, i in enumerate(idx) if unc[n] and not warm[n]]
    if rx:
        ry = [exe[n] for n, i in enumerate(idx) if unc[n] and not warm[n]]
        rt = [f"<b>step {i}</b>: recompiled<br>cause: {_e(cause_label(causes[n]) or 'unknown')}"
              for n, i in enumerate(idx) if unc[n] and not warm[n]]
        traces.append({
            "type": "scatter", "mode": "markers", "name": "recompile", "x": rx,
            "y": [round(v, 3) for v in ry], "xaxis": "x", "yaxis": "y",
            "marker": {"symbol": "x", "size": 9, "color": "#c92a2a"},
            "hovertext": rt, "hoverinfo": "text",
        })
    # Bars one step wide vanish on a long axis: keep them a few pixels wide.
    bar_width = max(0.8, len(idx) / 300)
    for t in traces:
        if t.get("type") == "bar":
            t["width"] = bar_width
    positive = sorted(v for v in exe if v > 0)
    log_y = bool(positive) and positive[-1] > 20 * positive[len(positive) // 2]
    layout = _base_layout(460)
    layout.update({
        "barmode": "overlay",
        "bargap": 0.1,
        "xaxis": {"title": {"text": "step"}, "anchor": "y", "zeroline": False,
                  "gridcolor": "#f1f3f5", "range": [min(idx) - 0.5, max(idx) + 0.5]},
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
    xs: list[int] = []
    ys: list[float] = []
    labels: list[str] = []
    for i, sig in zip(steps["i"], steps["sig"]):
        sid = sig_id(sig)
        dims = by_sig.get(sid) if sid is not None else None
        if dims is None:
            continue
        xs.append(int(i))
        if dim is not None and dim < len(dims):
            ys.append(float(dims[dim]))
        else:
            ys.append(float(math.prod(dims)))
        labels.append(fmt.shape(dims))
    if not xs:
        return None
    ylabel = f"{name} dim {dim}" if dim is not None else f"{name} elements"
    hit = set(finding.steps or [])
    traces: list[dict[str, Any]] = []
    if len(xs) > max_points:
        bx, _mean, top = _bucketed(xs, ys)
        size = math.ceil(len(xs) / BUCKETS)
        low = [min(ys[k:k + size]) for k in range(0, len(xs), size)]
        traces.append({"type": "scatter", "mode": "lines", "name": f"max per {size} steps",
                       "x": bx, "y": top, "line": {"color": "#ffc078", "width": 1}})
        traces.append({"type": "scatter", "mode": "lines", "name": f"min per {size} steps",
                       "x": bx, "y": low, "line": {"color": "#ffd8a8", "width": 1}})
    else:
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": _e(ylabel), "x": xs, "y": ys,
            "line": {"shape": "hv", "color": "#adb5bd", "width": 1}, "marker": {"size": 5, "color": "#868e96"},
            "hovertext": [f"step {x}: {_e(name)} {lab}" for x, lab in zip(xs, labels)],
            "hoverinfo": "text",
        })
    cx = [x for x in xs if x in hit]
    if cx:
        cy = [y for x, y in zip(xs, ys) if x in hit]
        cl = [lab for x, lab in zip(xs, labels) if x in hit]
        traces.append({
            "type": "scatter", "mode": "markers", "name": "compiled here", "x": cx, "y": cy,
            "marker": {"size": 9, "color": CAUSE_COLORS["input_shape"], "symbol": "diamond"},
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
