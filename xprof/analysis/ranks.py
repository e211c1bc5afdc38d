"""Several ranks of one multi-process run, side by side: the rank table, the stragglers and
the findings across ranks (:class:`RanksView`, and its JSON schemas ``xprof-ranks`` and
``xprof-ranks-summary``, docs/json.md).

Each process of a multi-process run records its own file (``run.rank0.json``,
``run.rank1.json``...). In data-parallel training every rank waits for the slowest one
at each collective, so a rank that compiles more (it saw another input shape) or
waits longer on host syncs slows all of them. This module lines the ranks up and names
the one that stands out. pandas only: no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from xprof.analysis.model import Analysis, Finding
from xprof.runfile import RANK_IN_NAME, Run

RANKS_SCHEMA = "xprof-ranks"
RANKS_SUMMARY_SCHEMA = "xprof-ranks-summary"
RANKS_VERSION = 1

COLUMNS = ["rank", "name", "steps", "compiles", "recompiles", "compile_s", "syncs",
           "sync_wait_s", "step_ms_median", "path"]

SYNC_WAIT_FLOOR_S = 0.05
"""Sync-wait differences below this are noise, not a straggler."""
RATIO = 1.5
"""A rank stands out when its sync wait or median step is this many times the others'."""


def analyze_ranks(runs: Sequence[Run]) -> list[Analysis]:
    from xprof.analysis import analyze

    return [analyze(r) for r in runs]


def _rank_of(run: Run, position: int) -> int:
    if run.rank is not None:
        return run.rank
    m = RANK_IN_NAME.search(run.path)
    return int(m.group(1)) if m else position


def _sync_wait_s(a: Analysis) -> float:
    live = a.live_syncs
    return float(live["ms"].sum()) / 1e3 if len(live) else 0.0


def rank_table(analyses: Sequence[Analysis]) -> pd.DataFrame:
    """One row per rank, sorted by rank: the numbers that make ranks wait for each other."""
    rows: list[dict[str, Any]] = []
    for pos, a in enumerate(analyses):
        t = a.totals
        rows.append({
            "rank": _rank_of(a.run, pos),
            "name": a.run.name,
            "steps": t.steps,
            "compiles": t.compiles,
            "recompiles": t.recompiles,
            "compile_s": round(t.compile_seconds, 6),
            "syncs": t.syncs,
            "sync_wait_s": round(_sync_wait_s(a), 6),
            "step_ms_median": t.step_ms_median,
            "path": a.run.path,
        })
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.sort_values("rank", kind="stable").reset_index(drop=True)


@dataclass
class Straggler:
    """A rank that stands out: which number (``metric``), its value and the others' baseline."""

    rank: int
    metric: str
    """``recompiles``, ``compiles``, ``sync_wait`` or ``step_time``."""
    value: float
    baseline: float
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RankFinding:
    """One finding across ranks: as found on the rank where it cost most, and where it appeared."""

    finding: Finding
    ranks: list[int]
    seconds: dict[int, float]
    """Seconds it cost on each rank it appeared on."""
    missing_on: list[int]
    """Ranks where it did not appear (a per-rank difference worth a look)."""

    @property
    def title(self) -> str:
        return self.finding.title

    @property
    def worst_seconds(self) -> float:
        return max(self.seconds.values(), default=0.0)

    def to_json(self) -> dict[str, Any]:
        f = self.finding
        return {"id": f.id, "cause": f.cause, "kind": f.kind, "title": f.title, "advice": f.advice,
                "ranks": self.ranks, "seconds": {str(r): round(v, 6) for r, v in self.seconds.items()},
                "worst_seconds": round(self.worst_seconds, 6), "missing_on": self.missing_on}


def stragglers(table: pd.DataFrame) -> list[Straggler]:
    """The ranks that stand out, each with the number that stands out and a sentence.

    ``recompiles`` (or ``compiles`` when recompiles are equal): a rank compiled more
    than the rank that compiled least (another input shape or code path reached it).
    ``sync_wait``: a rank spent at least :data:`RATIO` times the median rank's time in host syncs (and
    :data:`SYNC_WAIT_FLOOR_S` more). ``step_time``: its median step is :data:`RATIO`
    times the median rank's.
    """
    out: list[Straggler] = []
    if len(table) < 2:
        return out
    # Recompiles first: the graph cache can be shared (CPU ranks are threads of one
    # process), so a rank's total compiles can hide that it alone met a new shape.
    for col, what in (("recompiles", "recompiled"), ("compiles", "compiled")):
        fewest = int(table[col].min())
        if int(table[col].max()) == fewest:
            continue
        for row in table.itertuples(index=False):
            value = int(getattr(row, col))
            if value > fewest:
                extra_s = float(row.compile_s) - float(table["compile_s"].min())
                out.append(Straggler(int(row.rank), col, value, fewest,
                                     f"rank {row.rank} {what} {value} time(s) where the fewest was "
                                     f"{fewest} ({max(extra_s, 0.0):.2f} s more compiling); the "
                                     "other ranks wait for it at the next collective"))
        break
    wait = table["sync_wait_s"].astype(float)
    median_wait = float(wait.median())
    for row in table.itertuples(index=False):
        w = float(row.sync_wait_s)
        if w >= RATIO * median_wait and w - median_wait >= SYNC_WAIT_FLOOR_S:
            out.append(Straggler(int(row.rank), "sync_wait", w, median_wait,
                                 f"rank {row.rank} waited {w:.2f} s on host syncs, the median rank "
                                 f"{median_wait:.2f} s"))
    step = table["step_ms_median"].astype(float)
    if step.notna().sum() >= 2:
        median_step = float(step.median())
        for row, value in zip(table.itertuples(index=False), step):
            if value == value and median_step > 0 and value >= RATIO * median_step:
                out.append(Straggler(int(row.rank), "step_time", float(value), median_step,
                                     f"rank {row.rank}'s median step took {value:.1f} ms, the median "
                                     f"rank's {median_step:.1f} ms"))
    return out


def merged_findings(analyses: Sequence[Analysis]) -> list[RankFinding]:
    """Findings across ranks: one per finding id, with the ranks it appeared on.

    Sorted by the seconds lost on the worst rank; each holds the finding as found there.
    """
    all_ranks = sorted(_rank_of(a.run, pos) for pos, a in enumerate(analyses))
    by_id: dict[str, RankFinding] = {}
    for pos, a in enumerate(analyses):
        rank = _rank_of(a.run, pos)
        for f in a.findings:
            entry = by_id.get(f.id)
            if entry is None:
                entry = by_id[f.id] = RankFinding(f, [], {}, [])
            elif f.seconds >= entry.worst_seconds:
                entry.finding = f
            entry.ranks.append(rank)
            entry.seconds[rank] = f.seconds
    out = list(by_id.values())
    for entry in out:
        entry.ranks.sort()
        entry.missing_on = [r for r in all_ranks if r not in entry.ranks]
    out.sort(key=lambda e: (-round(e.worst_seconds, 6), e.finding.id))
    return out


def focus_rank(analyses: Sequence[Analysis]) -> int:
    """Index of the analysis to show in full: the first straggler, else the first rank."""
    notes = stragglers(rank_table(analyses))
    if notes:
        for pos, a in enumerate(analyses):
            if _rank_of(a.run, pos) == notes[0].rank:
                return pos
    order = sorted(range(len(analyses)), key=lambda p: _rank_of(analyses[p].run, p))
    return order[0] if order else 0


@dataclass
class RanksView:
    """What the report, the summary and ``xprof ranks`` show about a multi-rank run."""

    table: pd.DataFrame
    """:func:`rank_table`: one row per rank, sorted by rank."""
    stragglers: list[Straggler]
    findings: list[RankFinding]
    focus: int | None
    """The rank shown in full (the first straggler, else the first rank)."""
    focus_index: int
    """Its position in the analyses."""

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The table's rows as plain dicts (with ``path``)."""
        return list(self.table.to_dict(orient="records"))

    def to_json(self) -> dict[str, Any]:
        """The ``xprof ranks --json`` object (schema ``xprof-ranks``, docs/json.md)."""
        return {"schema": RANKS_SCHEMA, "version": RANKS_VERSION, "ranks": self.rows,
                "stragglers": [s.to_json() for s in self.stragglers],
                "findings": [f.to_json() for f in self.findings], "focus": self.focus}


def ranks_view(analyses: Sequence[Analysis]) -> RanksView:
    table = rank_table(analyses)
    focus = focus_rank(analyses)
    return RanksView(table=table, stragglers=stragglers(table), findings=merged_findings(analyses),
                     focus=_rank_of(analyses[focus].run, focus) if analyses else None, focus_index=focus)


def ranks_summary_json(view: RanksView, analyses: Sequence[Analysis]) -> dict[str, Any]:
    """The ``xprof summary --json`` object of several ranks (schema ``xprof-ranks-summary``)."""
    return {**view.to_json(), "schema": RANKS_SUMMARY_SCHEMA, "version": RANKS_VERSION,
            "per_rank": [a.summary() for a in analyses]}
