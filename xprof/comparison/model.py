"""What a comparison of runs holds: the result objects that every renderer takes.

``xprof compare`` (terminal, Markdown, JSON, HTML) and the Python API share these
dataclasses; renderers never look at run files or analyses on their own. The JSON
form (:meth:`CompareResult.to_json`) is the documented, versioned object of
``xprof compare --json`` (docs/compare.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from xprof.analysis.model import Analysis, Finding, is_missing
from xprof.comparison.interval import Interval

SCHEMA = "xprof-compare"
VERSION = 1
"""Bump on any change that removes or renames a key of the JSON object."""


@dataclass
class RunInfo:
    """The identity of one compared run: enough to tell which file said what."""

    name: str
    path: str
    steps: int
    status: str
    complete: bool
    torch: str | None
    torch_xla: str | None
    device: str | None
    argv: list[str] | None
    started_at: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MetricChange:
    """One metric of one run against the base, with the verdict a person reads.

    ``verdict`` is ``worse``, ``better``, ``same``, ``changed`` (a metric with no good
    direction, e.g. steps), ``info`` (shown, not judged: a p95 over few steps) or
    ``n/a`` (missing on one side, or too few steady-state steps to judge a time).
    Timings are only ``worse``/``better`` when the change is both relatively and
    absolutely larger than the noise (:class:`xprof.comparison.metrics.Noise`).
    """

    key: str
    label: str
    unit: str
    """``count``, ``s``, ``ms`` or ``per step``."""
    base: float | None
    new: float | None
    delta: float | None
    rel: float | None
    """``delta / base``; None when the base is 0 or a side is missing."""
    verdict: str
    note: str | None = None
    interval: Interval | None = None
    """The 95% bootstrap interval of the change (the median execute time per step: see
    :mod:`xprof.comparison.interval`); None for the other metrics."""

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["interval"] = self.interval.to_json() if self.interval is not None else None
        return out


@dataclass
class FindingChange:
    """A finding matched across two runs (or seen in only one).

    ``status``: ``new`` (only in the new run), ``gone`` (only in the base), ``changed``
    (in both, with a different count, compile count or set of shapes) or ``same``.
    ``matched_by`` says which key paired them: ``cause+input``, ``code+function``
    (the source text of the line and its function: survives edits that move lines),
    ``file:line``, ``file name:line`` or ``cause+kind``.
    """

    status: str
    cause: str
    kind: str
    title: str
    where: str | None
    """``input_ids`` for shape findings, ``train.py:42`` for a line, else None."""
    matched_by: str | None
    base: Finding | None
    new: Finding | None
    moved_from: str | None = None
    """``train.py:40`` when the matched line moved (``where`` is the new place)."""

    @property
    def count_delta(self) -> int:
        return (self.new.count if self.new else 0) - (self.base.count if self.base else 0)

    @property
    def compiles_delta(self) -> int:
        return (self.new.compiles if self.new else 0) - (self.base.compiles if self.base else 0)

    @property
    def seconds_delta(self) -> float:
        return (self.new.seconds if self.new else 0.0) - (self.base.seconds if self.base else 0.0)

    def cause_text(self) -> str:
        """``input_shape on input_ids (shapes [4, 12], [4, 9])`` / ``implicit_sync at a.py:3``."""
        f = self.new or self.base
        assert f is not None
        if f.input:
            text = f"{f.cause} on {f.input}"
            if f.shapes:
                text += " (shapes " + ", ".join("[" + ", ".join(str(d) for d in s) + "]"
                                               for s in f.shapes[:6])
                text += ", ...)" if len(f.shapes) > 6 else ")"
            return text
        if self.where:
            return f"{f.cause} at {self.where}" + (f" ({f.kind})" if f.kind else "")
        return f"{f.cause} ({f.kind})"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "cause": self.cause,
            "kind": self.kind,
            "title": self.title,
            "where": self.where,
            "matched_by": self.matched_by,
            "moved_from": self.moved_from,
            "count_delta": self.count_delta,
            "compiles_delta": self.compiles_delta,
            "seconds_delta": round(self.seconds_delta, 6),
            "base": self.base.to_json() if self.base else None,
            "new": self.new.to_json() if self.new else None,
        }


@dataclass
class GraphChange:
    """A compiled graph seen in only one of the two runs.

    Run files hold no graph hashes, so a graph is known by its size (IR nodes, from
    ``TensorsGraphSize``) and the input shapes of the step that compiled it.
    """

    side: str
    """``base`` (gone in the new run) or ``new`` (appeared in the new run)."""
    nodes: int | None
    inputs: str
    """``input_ids[4, 12] int64, labels[4] int64``, or ``""`` when inputs were not recorded."""
    compiles: int
    first_step: int
    cause: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ShapeChange:
    """An input shape seen in only one of the two runs."""

    side: str
    input: str
    shape: list[int]
    dtype: str
    steps: int
    """Steps that fed this shape in the run that has it."""
    sharding: str | None = None
    """SPMD runs: the input's sharding spec with this shape (``""``: none); None outside SPMD."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PairComparison:
    """One run compared against the base run."""

    base: RunInfo
    new: RunInfo
    metrics: pd.DataFrame
    """One row per metric (index ``key``), columns ``label, unit, base, new, delta, rel,
    verdict, note`` (see :class:`MetricChange`)."""
    metric_changes: list[MetricChange]
    findings: list[FindingChange]
    graphs: list[GraphChange]
    shapes: list[ShapeChange]
    warnings: list[str]

    def metric(self, key: str) -> MetricChange:
        for m in self.metric_changes:
            if m.key == key:
                return m
        raise KeyError(key)

    @property
    def new_findings(self) -> list[FindingChange]:
        return [f for f in self.findings if f.status == "new"]

    @property
    def gone_findings(self) -> list[FindingChange]:
        return [f for f in self.findings if f.status == "gone"]

    @property
    def changed_findings(self) -> list[FindingChange]:
        return [f for f in self.findings if f.status == "changed"]

    @property
    def regressions(self) -> list[MetricChange]:
        return [m for m in self.metric_changes if m.verdict == "worse"]

    @property
    def improvements(self) -> list[MetricChange]:
        return [m for m in self.metric_changes if m.verdict == "better"]

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base.name,
            "new": self.new.name,
            "warnings": list(self.warnings),
            "metrics": [m.to_json() for m in self.metric_changes],
            "regressions": [m.key for m in self.regressions],
            "improvements": [m.key for m in self.improvements],
            "findings": {
                status: [f.to_json() for f in self.findings if f.status == status]
                for status in ("new", "gone", "changed", "same")
            },
            "graphs": {
                "only_base": [g.to_json() for g in self.graphs if g.side == "base"],
                "only_new": [g.to_json() for g in self.graphs if g.side == "new"],
            },
            "shapes": {
                "only_base": [s.to_json() for s in self.shapes if s.side == "base"],
                "only_new": [s.to_json() for s in self.shapes if s.side == "new"],
            },
        }


@dataclass
class Violation:
    """A gate threshold that a run crossed."""

    threshold: str
    """The option name, e.g. ``--max-new-recompiles``."""
    run: str
    value: float
    limit: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CompareResult:
    """``xprof.compare(base, new, *more)``: every run after the first against the first.

    ``metrics``, ``findings``, ``graphs``, ``shapes`` and ``warnings`` are those of the
    last run against the base (the only pair when two runs are given); ``pairs`` holds
    every pair and ``trend`` every metric of every run (rows: metric keys, columns: run
    names in order, base first).
    """

    runs: list[RunInfo]
    pairs: list[PairComparison]
    trend: pd.DataFrame
    analyses: list[Analysis] = field(repr=False, default_factory=list)
    """The analysis of each run (for plots); not part of the JSON."""

    @property
    def base(self) -> RunInfo:
        return self.runs[0]

    @property
    def last(self) -> PairComparison:
        return self.pairs[-1]

    @property
    def metrics(self) -> pd.DataFrame:
        return self.last.metrics

    @property
    def findings(self) -> list[FindingChange]:
        return self.last.findings

    @property
    def graphs(self) -> list[GraphChange]:
        return self.last.graphs

    @property
    def shapes(self) -> list[ShapeChange]:
        return self.last.shapes

    @property
    def warnings(self) -> list[str]:
        return self.last.warnings

    def to_json(self, violations: list[Violation] | None = None,
                thresholds: dict[str, str] | None = None) -> dict[str, Any]:
        from xprof._version import __version__

        out: dict[str, Any] = {
            "schema": SCHEMA,
            "version": VERSION,
            "xprof_version": __version__,
            "runs": [r.to_json() for r in self.runs],
            "comparisons": [p.to_json() for p in self.pairs],
            "trend": {
                str(key): [_plain(v) for v in row] for key, row in self.trend.iterrows()
            },
        }
        if thresholds is not None:
            out["gate"] = {
                "thresholds": dict(thresholds),
                "passed": not violations,
                "violations": [v.to_json() for v in violations or []],
            }
        return out


def _plain(value: Any) -> Any:
    """NaN -> None and numpy scalars -> Python, so the JSON is strict."""
    if is_missing(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value
