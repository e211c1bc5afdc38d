"""Compare runs: what got worse or better between a base run and a new one.

``xprof.compare(base, new)`` is the whole API; ``xprof compare`` is a thin shell
over it that renders the result and applies the CI gate (:mod:`xprof.comparison.gate`).
Each argument may be a path, a loaded :class:`~xprof.runfile.Run` or an
:class:`~xprof.analysis.model.Analysis`. Nothing here imports torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

import pandas as pd

from xprof.analysis.model import Analysis
from xprof.comparison.checks import run_info, warnings_for
from xprof.comparison.gate import Gate, Limit, ThresholdError, parse_count, parse_limit
from xprof.comparison.graphs import diff_graphs, diff_shapes
from xprof.comparison.interval import Interval, interval
from xprof.comparison.matching import diff_findings
from xprof.comparison.metrics import METRICS, Noise, judge, steady_execute_ms, steady_steps, values
from xprof.comparison.model import (
    SCHEMA,
    VERSION,
    CompareResult,
    FindingChange,
    GraphChange,
    MetricChange,
    PairComparison,
    RunInfo,
    ShapeChange,
    Violation,
)
from xprof.runcolumns import ColumnRun, load_columns
from xprof.runfile import Run

RunLike = Union[str, "os.PathLike[str]", Run, ColumnRun, Analysis]


def _analysis(item: RunLike) -> Analysis:
    if isinstance(item, Analysis):
        return item
    from xprof.analysis import analyze

    return analyze(item if isinstance(item, (Run, ColumnRun)) else load_columns(item))


def compare_pair(base: Analysis, new: Analysis, noise: Noise | None = None,
                 infos: tuple[RunInfo, RunInfo] | None = None) -> PairComparison:
    """One run against the base: metrics, findings, graphs, shapes and warnings."""
    noise = noise or Noise()
    a, b = infos or (run_info(base), run_info(new))
    va, vb = values(base), values(new)
    steady = (steady_steps(base), steady_steps(new))
    dc = int((vb["compiles"] or 0) - (va["compiles"] or 0))
    samples = (steady_execute_ms(base), steady_execute_ms(new))
    changes = [judge(spec, va[spec.key], vb[spec.key], noise, steady, dc,
                     interval(*samples, spec.percentile) if spec.sampled else None)
               for spec in METRICS]
    frame = pd.DataFrame([c.to_json() for c in changes]).set_index("key")
    return PairComparison(
        base=a,
        new=b,
        metrics=frame,
        metric_changes=changes,
        findings=diff_findings(base.findings, new.findings),
        graphs=diff_graphs(base, new),
        shapes=diff_shapes(base, new),
        warnings=warnings_for(base, new, a, b),
    )


def compare(base: RunLike, new: RunLike, *more: RunLike, noise: Noise | None = None) -> CompareResult:
    """Compare ``new`` (and each of ``more``) against ``base``.

    >>> result = xprof.compare("base.json", "new.json")
    >>> result.metrics.loc["recompiles", ["base", "new", "verdict"]]
    >>> [f.cause_text() for f in result.findings if f.status == "new"]

    Raises :class:`~xprof.runfile.RunFileError` (one-line message) for a file that
    cannot be read.
    """
    analyses = [_analysis(x) for x in (base, new, *more)]
    runs = _distinct_names([run_info(a) for a in analyses])
    pairs = [compare_pair(analyses[0], other, noise, (runs[0], runs[k]))
             for k, other in enumerate(analyses[1:], start=1)]
    trend = pd.DataFrame({r.name: values(a) for r, a in zip(runs, analyses)})
    trend.index.name = "key"
    return CompareResult(runs=runs, pairs=pairs, trend=trend, analyses=analyses)


def _distinct_names(runs: list[RunInfo]) -> list[RunInfo]:
    """Runs of one script share its name (``xprof run`` names runs after the script); then
    columns are told apart by file name, and by position if the file names agree too."""
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return runs
    stems = [Path(r.path).stem for r in runs]
    if len(set(stems)) != len(stems):
        stems = [f"{name} ({k})" for k, name in enumerate(names, start=1)]
    for r, stem in zip(runs, stems):
        r.name = stem
    return runs


__all__ = [
    "METRICS", "SCHEMA", "VERSION", "CompareResult", "FindingChange", "Gate", "GraphChange", "Interval", "Limit",
    "MetricChange", "Noise", "PairComparison", "RunInfo", "ShapeChange", "ThresholdError", "Violation",
    "compare", "compare_pair", "parse_count", "parse_limit",
]
