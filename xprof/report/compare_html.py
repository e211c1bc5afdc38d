"""Render a :class:`~xprof.comparison.model.CompareResult` into one self-contained HTML file.

Like the run report it works offline and shares its page machinery
(:mod:`xprof.report.page`). Plots show what a table cannot: the relative change of every
metric at a glance, and the step times and cumulative compile time of the runs
overlaid, so a reader sees *where* in the loop the new run pays.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from pathlib import Path
from typing import Any

from xprof._version import __version__
from xprof.comparison.model import CompareResult, Violation
from xprof.report.compare_text import change, interval_text, sections, value, verdict_line
from xprof.report.page import env, plotly_js, write_atomic

COLORS = ("#495057", "#1c7ed6", "#e8590c", "#2b8a3e", "#ae3ec9", "#f08c00", "#0c8599")
VERDICT_COLORS = {"worse": "#c92a2a", "better": "#2b8a3e", "changed": "#f08c00"}


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _delta_chart(result: CompareResult) -> dict[str, Any]:
    """Grouped bars: relative change (%) of each metric, one group per compared run."""
    data = []
    labels = [m.label for m in result.pairs[0].metric_changes]
    for k, pair in enumerate(result.pairs):
        ys: list[float | None] = []
        colors: list[str] = []
        text: list[str] = []
        for m in pair.metric_changes:
            if m.rel is not None and math.isfinite(m.rel):
                ys.append(round(m.rel * 100, 2))
            elif m.delta:
                ys.append(100.0 if m.delta > 0 else -100.0)  # from zero: show as +-100%
            else:
                ys.append(0.0)
            colors.append(VERDICT_COLORS.get(m.verdict, "#adb5bd"))
            text.append(f"{value(m.base, m.unit)} → {value(m.new, m.unit)} ({change(m)}), {m.verdict}")
        data.append({"type": "bar", "name": pair.new.name, "x": labels, "y": ys,
                     "marker": {"color": colors if len(result.pairs) == 1 else COLORS[(k + 1) % len(COLORS)]},
                     "hovertext": text, "hoverinfo": "text+name"})
    layout = {"barmode": "group", "height": 360, "margin": {"l": 60, "r": 20, "t": 10, "b": 130},
              "yaxis": {"title": {"text": f"change vs {result.base.name} (%)"}, "zeroline": True},
              "showlegend": len(result.pairs) > 1}
    return {"data": data, "layout": layout}


def _step_charts(result: CompareResult) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Step time per step and cumulative compile seconds, one line per run."""
    if not result.analyses:
        return None
    steps_data: list[dict[str, Any]] = []
    cum_data: list[dict[str, Any]] = []
    for k, (run, a) in enumerate(zip(result.runs, result.analyses)):
        df = a.steps
        if df is None or not len(df) or "step_ms" not in df:
            continue
        color = COLORS[k % len(COLORS)]
        xs = [int(i) for i in df["i"]]
        ys = [_finite(v) for v in df["step_ms"]]
        steps_data.append({"type": "scatter", "mode": "lines", "name": run.name, "x": xs, "y": ys,
                           "line": {"color": color, "width": 1.5}})
        if "uncached" in df:
            marks = df[df["uncached"].fillna(0).astype(int) > 0]
            steps_data.append({"type": "scatter", "mode": "markers", "name": f"{run.name}: compiles",
                               "x": [int(i) for i in marks["i"]],
                               "y": [_finite(v) for v in marks["step_ms"]],
                               "marker": {"color": color, "symbol": "x", "size": 9},
                               "showlegend": False,
                               "hovertext": [str(c) for c in marks.get("cause", [""] * len(marks))]})
        if "compile_ms" in df:
            total, cum = 0.0, []
            for v in df["compile_ms"]:
                total += _finite(v) or 0.0
                cum.append(round(total / 1000.0, 4))
            cum_data.append({"type": "scatter", "mode": "lines", "name": run.name, "x": xs, "y": cum,
                             "line": {"color": color, "width": 2, "shape": "hv"}})
    if not steps_data:
        return None
    base = {"height": 320, "margin": {"l": 60, "r": 20, "t": 10, "b": 40},
            "xaxis": {"title": {"text": "step"}}, "legend": {"orientation": "h"}}
    step_layout = {**base, "yaxis": {"title": {"text": "step time (ms)"}, "type": "log"}}
    cum_layout = {**base, "yaxis": {"title": {"text": "compile time so far (s)"}}}
    return {"data": steps_data, "layout": step_layout}, {"data": cum_data, "layout": cum_layout}


def compare_context(result: CompareResult, violations: list[Violation] | None = None,
                    gated: bool = False) -> dict[str, Any]:
    pairs = []
    for pair in result.pairs:
        rows = []
        for m in pair.metric_changes:
            rows.append({"label": m.label, "base": value(m.base, m.unit), "new": value(m.new, m.unit),
                         "change": change(m) + (f" ({interval_text(m)})" if m.interval is not None else ""),
                         "verdict": m.verdict, "note": m.note or ""})
        pairs.append({"base": pair.base.name, "new": pair.new.name, "rows": rows,
                      "warnings": pair.warnings, "sections": sections(pair),
                      "verdict": verdict_line(pair)})
    trend = None
    if len(result.pairs) > 1:
        trend = []
        for k, m0 in enumerate(result.pairs[0].metric_changes):
            cells = [{"text": value(m0.base, m0.unit), "verdict": "same"}]
            for pair in result.pairs:
                m = pair.metric_changes[k]
                cells.append({"text": value(m.new, m.unit) + (f" ({change(m, compact=True)})" if m.delta else ""),
                              "verdict": m.verdict})
            trend.append({"label": m0.label, "cells": cells})
    charts = {"chart-delta": _delta_chart(result)}  # keyed by the element each is drawn in
    step = _step_charts(result)
    if step:
        charts["chart-steps"], charts["chart-compile"] = step
    names = " → ".join(r.name for r in result.runs)
    return {
        "title": f"xprof compare: {names}",
        "names": names,
        "version": __version__,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": [r.to_json() for r in result.runs],
        "pairs": pairs,
        "trend": trend,
        "gated": gated,
        "violations": [v.to_json() for v in violations or []],
        "charts": charts,
        "plotly_js": plotly_js(),
    }


def render_compare(result: CompareResult, violations: list[Violation] | None = None,
                   gated: bool = False) -> str:
    """The whole comparison as one HTML string (about 5 MB, most of it plotly.js)."""
    return env().get_template("compare.html.j2").render(**compare_context(result, violations, gated))


def write_compare(result: CompareResult, path: str | os.PathLike[str],
                  violations: list[Violation] | None = None, gated: bool = False) -> Path:
    """Render and write to ``path`` (folders created) through a temporary file and a rename."""
    return write_atomic(path, render_compare(result, violations, gated))
