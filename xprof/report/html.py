"""The run report: an :class:`Analysis` as one self-contained HTML file.

The page works offline and can be mailed or attached to a CI run: plotly.js is inlined
and nothing is fetched from the network (:mod:`xprof.report.page`: the shared template
environment, plotly loader and base template).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import shlex
from pathlib import Path
from typing import Any

from xprof._version import __version__
from xprof.analysis.model import Analysis, Finding, is_missing
from xprof.analysis.ranks import RanksView, span
from xprof.diagnosis.terms import WARMUP_STEPS
from xprof.report import fmt, plots, prose
from xprof.report.page import env, plotly_js, write_atomic

MAX_TABLE_ROWS = 500
"""Rows shown in the compile and host-read tables; the rest are counted, not listed."""


def default_report_path(run_name: str, folder: str | os.PathLike[str] = "reports") -> Path:
    """``reports/<run name>.html``, with the name made safe to be a file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", run_name).strip("._") or "run"
    return Path(folder) / f"{safe[:120]}.html"


def _finding_view(analysis: Analysis, f: Finding, rank: int) -> dict[str, Any]:
    shapes = f.shapes or []
    return {
        "rank": rank,
        "anchor": f"finding-{rank}",
        "f": f,
        "cost": prose.cost_line(f),
        "cause": prose.cause_label(f.cause),
        "color": prose.CAUSE_COLORS.get(f.cause, "#495057"),
        "location": fmt.location(f.file, f.line),
        "shapes": [fmt.shape(s) for s in shapes[:24]],
        "shardings": [fmt.sharding(s) for s in f.shardings or []],
        "more_shapes": max(0, len(shapes) - 24),
        "steps": fmt.short_list(f.steps or [], 20),
        "chart": plots.shape_figure(analysis, f),
        "what_if": f.what_if or [],
    }


def _compile_rows(analysis: Analysis, sigs: dict[int, str]) -> tuple[list[dict[str, Any]], int]:
    """One row per step that compiled: step, compiles, ms, causes, where, inputs."""
    df = analysis.compiles
    if df is None or df.empty or "step" not in df:
        return [], 0
    steps_sig: dict[int, Any] = {}
    st = analysis.steps
    if st is not None and not st.empty and "sig" in st:
        mine = st.loc[st["i"].isin(df["step"].unique()), ["i", "sig"]]  # only the steps that compiled
        steps_sig = dict(zip(mine["i"].astype(int), mine["sig"]))
    # Plain columns walked once in step order (a run of thousands of compiles: a pandas
    # group per step cost a millisecond each), and only the rows shown are built.
    df = df[df["step"].notna()].sort_values("step", kind="stable")
    n = len(df)

    def column(name: str) -> list[Any]:
        return df[name].tolist() if name in df else [None] * n

    step_col, cause_col, at_col, sig_col = column("step"), column("cause"), column("at"), column("sig")
    ms_col = df["ms"].fillna(0.0).tolist() if "ms" in df else [0.0] * n
    rows: list[dict[str, Any]] = []
    distinct = 0
    start = 0
    while start < n:
        end = start + 1
        while end < n and step_col[end] == step_col[start]:
            end += 1
        distinct += 1
        if len(rows) < MAX_TABLE_ROWS:
            step = int(step_col[start])
            causes = [str(c) for c in cause_col[start:end] if not is_missing(c) and c]
            ats = sorted({str(a) for a in at_col[start:end] if not is_missing(a) and a})
            sig = next((v for v in sig_col[start:end] if not is_missing(v)), None)
            sid = plots.sig_id(sig if sig is not None else steps_sig.get(step))
            rows.append({
                "step": step,
                "n": end - start,
                "ms": float(sum(ms_col[start:end])),
                "cause": ", ".join(dict.fromkeys(prose.cause_label(c) for c in causes)) or "unknown",
                "cause_key": causes[0] if causes else "unknown",
                "at": ", ".join("mid-step (host read)" if a == "step" else a for a in ats),
                "sig": sigs.get(sid, "") if sid is not None else "",
            })
        start = end
    return rows, distinct - len(rows)


def _sync_rows(analysis: Analysis) -> tuple[list[dict[str, Any]], int]:
    """Host reads grouped by the line that made them."""
    df = analysis.syncs
    if df is None or df.empty:
        return [], 0
    keys = [k for k in ("kind", "file", "line", "func", "code", "via") if k in df]
    work = df.copy()
    for k in keys:
        work[k] = work[k].astype(object).where(work[k].notna(), "")
    rows: list[dict[str, Any]] = []
    for key, group in work.groupby(keys, sort=False, dropna=False):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        deferred = int(group["deferred"].fillna(False).astype(bool).sum()) if "deferred" in group else 0
        rows.append({
            "kind": vals.get("kind", ""),
            "location": fmt.location(str(vals.get("file") or ""), int(vals["line"]) if vals.get("line") else None)
            or "?",
            "func": vals.get("func", ""),
            "code": vals.get("code", ""),
            "via": vals.get("via", ""),
            "count": len(group),
            "deferred": deferred,
            "ms": float(group["ms"].sum()) if "ms" in group else 0.0,
            "compiles": int(group["uncached"].fillna(0).sum()) if "uncached" in group else 0,
            "executions": int(group["executions"].fillna(0).sum()) if "executions" in group else 0,
        })
    rows.sort(key=lambda r: (-r["ms"], -r["count"]))
    return rows[:MAX_TABLE_ROWS], max(0, len(rows) - MAX_TABLE_ROWS)


def _meta_rows(analysis: Analysis) -> list[tuple[str, str]]:
    run, meta = analysis.run, analysis.run.meta
    argv = meta.get("argv")
    argv_text = shlex.join(str(a) for a in argv) if isinstance(argv, list) else (str(argv) if argv else "")
    pairs: list[tuple[str, Any]] = [
        ("run", run.name),
        ("file", run.path),
        ("status", analysis.totals.status + ("" if run.complete else " (no end record)")),
        ("started", run.started_at),
        ("command", argv_text),
        ("working dir", meta.get("cwd")),
        ("device", meta.get("device")),
        ("host", meta.get("host")),
        ("process", meta.get("pid")),
        ("rank", f"{meta.get('rank')} of {meta.get('world_size')}" if meta.get("world_size") else None),
        ("SPMD", (prose.spmd_line(run) or "").removeprefix("SPMD").removeprefix(": ") or
         ("on" if run.spmd is not None else None)),
        ("python", meta.get("python")),
        ("torch", meta.get("torch")),
        ("torch_xla", meta.get("torch_xla")),
        ("recorded by", f"xprof {run.xprof_version or '?'}"),
        ("recorded", ", ".join(k for k in ("inputs", "syncs") if meta.get(k)) or None),
        ("PT_XLA_DEBUG_LEVEL", meta.get("debug_level")),
        ("XLA_METRICS_SAMPLES", meta.get("metrics_samples")),
    ]
    if run.skipped_lines:
        pairs.append(("skipped lines", f"{run.skipped_lines} unreadable or unknown records"))
    return [(k, str(v)) for k, v in pairs if v not in (None, "")]


def ranks_context(view: RanksView) -> dict[str, Any]:
    groups, rows = prose.rank_rows(view)
    return {"count": len(view.table), "world_size": view.world_size, "columns": prose.RANK_COLUMNS,
            "groups": groups, "rows": rows,
            "faults": [{"kind": f.kind, "message": f.message} for f in view.faults],
            "stragglers": [s.message for s in view.stragglers], "no_straggler": prose.NO_STRAGGLER,
            "findings": [{"title": f.title, "ranks": span(f.ranks), "missing_on": span(f.missing_on)}
                         for f in view.findings], "focus": view.focus}


def report_context(analysis: Analysis, ranks: RanksView | None = None) -> dict[str, Any]:
    """Everything the template shows, already worded and formatted.

    ``ranks`` (from :func:`xprof.analysis.ranks.ranks_view`) adds a section that lines up every
    rank of a multi-process run; the rest of the report is then about one rank.
    """
    t = analysis.totals
    sigs = plots.signature_texts(analysis)
    findings = [_finding_view(analysis, f, n + 1) for n, f in enumerate(prose.ranked(analysis.findings))]
    compile_rows, compile_more = _compile_rows(analysis, sigs)
    sync_rows, sync_more = _sync_rows(analysis)
    timeline = plots.timeline_figure(analysis)
    charts: dict[str, Any] = {}
    if timeline is not None:
        charts["timeline"] = timeline
    for view in findings:
        if view["chart"] is not None:
            charts[f"{view['anchor']}-chart"] = view["chart"]
    errors = [{"where": e.where, "error": e.error, "trace": e.trace or ""} for e in analysis.run.errors[:20]]
    kpis = [
        ("Steps", str(t.steps), f"{t.barriers} barriers" if t.barriers != t.steps else ""),
        ("Wall time", fmt.seconds(t.wall_seconds),
         f"median step {fmt.ms(t.step_ms_median)}" if t.step_ms_median is not None else ""),
        ("Compile time", fmt.seconds(t.compile_seconds), f"{fmt.percent(t.compile_share)} of wall time"),
        ("Distinct graphs", str(t.distinct_graphs), f"{t.compiles} uncached compiles"),
        ("Recompiles", str(t.recompiles), f"after the first {WARMUP_STEPS} steps"),
        ("Host reads", str(t.syncs), f"{t.extra_executions} extra executions"),
    ]
    return {
        "title": f"xprof: {analysis.run.name}",
        "name": analysis.run.name,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "banner": prose.status_banner(analysis),
        "headline": prose.headline(analysis),
        "next_step": prose.next_step(analysis),
        "kpis": kpis,
        "alarm": {"Compile time": t.compile_share >= 0.2, "Recompiles": t.recompiles > 0,
                  "Host reads": t.syncs > 0},
        "findings": findings,
        "minor": prose.minor(analysis.findings),
        "minor_line": prose.minor_line(analysis),
        "timeline": timeline is not None,
        "bucketed": bool(timeline and timeline["layout"]["meta"]["bucketed"]),
        "bucket_size": timeline["layout"]["meta"]["bucket_size"] if timeline else 1,
        "compile_rows": compile_rows,
        "compile_more": compile_more,
        "sync_rows": sync_rows,
        "sync_more": sync_more,
        "cause_colors": prose.CAUSE_COLORS,
        "meta_rows": _meta_rows(analysis),
        "notes": list(analysis.notes),
        "errors": errors,
        "error_count": t.profiler_errors or len(analysis.run.errors),
        "fallback_ops": sorted(t.fallback_ops.items(), key=lambda kv: -kv[1]),
        "charts": charts,
        "plotly_js": plotly_js(),
        "ranks": ranks_context(ranks) if ranks is not None else None,
    }


def render_report(analysis: Analysis, ranks: RanksView | None = None) -> str:
    """The whole report as one HTML string (about 5 MB, most of it plotly.js)."""
    ctx = report_context(analysis, ranks)
    return env().get_template("report.html.j2").render(**ctx)


def write_report(analysis: Analysis, path: str | os.PathLike[str], ranks: RanksView | None = None) -> Path:
    """Render and write the report, creating its folder; returns the path written.

    Writes to a temporary file beside ``path`` and renames it, so a failed write never
    leaves half a report where the last good one was.
    """
    return write_atomic(path, render_report(analysis, ranks))
