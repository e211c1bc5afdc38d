"""Several ranks of one multi-process run, side by side.

Each process of a multi-process run records its own file (``run.rank0.json``,
``run.rank1.json``...). In data-parallel training every rank waits for the slowest one
at each collective, so a rank that compiles more (it saw another input shape) or
waits longer on host syncs slows all of them. This module lines the ranks up and names
the one that stands out. pandas only: no torch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from xprof.analysis.model import Analysis
from xprof.runfile import FORMAT, Run

_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.[^.]+$")

COLUMNS = ["rank", "name", "steps", "compiles", "recompiles", "compile_s", "syncs",
           "sync_wait_s", "step_ms_median", "path"]

SYNC_WAIT_FLOOR_S = 0.05
"""Sync-wait differences below this are noise, not a straggler."""
RATIO = 1.5
"""A rank stands out when its sync wait or median step is this many times the others'."""


def _looks_like_run(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline(4096)
    except OSError:
        return False
    return f'"{FORMAT}"' in first


def rank_of_path(path: str, position: int) -> int:
    """The N of ``*.rankN.json``, else ``position``."""
    m = _RANK_IN_NAME.search(path)
    return int(m.group(1)) if m else position


def _rank_key(path: str) -> tuple[int, str]:
    m = _RANK_IN_NAME.search(path)
    return (int(m.group(1)) if m else 1 << 30, path)


def expand_run_paths(paths: Sequence[str]) -> list[str]:
    """Run files named by ``paths``: a folder stands for the run files in it.

    In a folder, ``*.rankN.json`` files are taken when there are any (sorted by rank),
    otherwise every ``*.json`` file that starts with an xprof run header. Files named
    directly are kept as given (the loader reports bad ones). Raises ``ValueError`` with
    one line when a path does not exist or a folder holds no run file.
    """
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if n.endswith(".json"))
            ranked = [os.path.join(p, n) for n in names if _RANK_IN_NAME.search(n)]
            found = ranked or [os.path.join(p, n) for n in names
                               if not n.endswith(".trace.json") and _looks_like_run(os.path.join(p, n))]
            if not found:
                raise ValueError(f"{p}: no xprof run files in this folder")
            out.extend(sorted(found, key=_rank_key))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise ValueError(f"{p}: no such file or folder")
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def analyze_ranks(runs: Sequence[Run]) -> list[Analysis]:
    from xprof.analysis import analyze

    return [analyze(r) for r in runs]


def _rank_of(run: Run, position: int) -> int:
    if run.rank is not None:
        return run.rank
    m = _RANK_IN_NAME.search(run.path)
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


def stragglers(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The ranks that stand out, each with ``rank``, ``kind`` and a sentence.

    ``recompiles`` (or ``compiles`` when recompiles are equal): a rank compiled more
    than the rank that compiled least (another input shape or code path reached it).
    ``sync_wait``: a rank spent at least :data:`RATIO` times the median rank's time in host syncs (and
    :data:`SYNC_WAIT_FLOOR_S` more). ``step_time``: its median step is :data:`RATIO`
    times the median rank's.
    """
    out: list[dict[str, Any]] = []
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
                out.append({"rank": int(row.rank), "kind": col, "value": value, "baseline": fewest,
                            "message": f"rank {row.rank} {what} {value} time(s) where the fewest was "
                                       f"{fewest} ({max(extra_s, 0.0):.2f} s more compiling); the "
                                       "other ranks wait for it at the next collective"})
        break
    wait = table["sync_wait_s"].astype(float)
    median_wait = float(wait.median())
    for row in table.itertuples(index=False):
        w = float(row.sync_wait_s)
        if w >= RATIO * median_wait and w - median_wait >= SYNC_WAIT_FLOOR_S:
            out.append({"rank": int(row.rank), "kind": "sync_wait", "value": w,
                        "baseline": median_wait,
                        "message": f"rank {row.rank} waited {w:.2f} s on host syncs, the median rank "
                                   f"{median_wait:.2f} s"})
    step = table["step_ms_median"].astype(float)
    if step.notna().sum() >= 2:
        median_step = float(step.median())
        for row, value in zip(table.itertuples(index=False), step):
            if value == value and median_step > 0 and value >= RATIO * median_step:
                out.append({"rank": int(row.rank), "kind": "step_time", "value": float(value),
                            "baseline": median_step,
                            "message": f"rank {row.rank}'s median step took {value:.1f} ms, the median "
                                       f"rank's {median_step:.1f} ms"})
    return out


def merged_findings(analyses: Sequence[Analysis]) -> list[dict[str, Any]]:
    """Findings across ranks: one entry per finding id, with the ranks it appeared on.

    Sorted by the seconds lost on the worst rank. ``ranks`` lists where it appeared,
    ``missing_on`` the ranks where it did not (a per-rank difference worth a look).
    """
    table = rank_table(analyses)
    all_ranks = [int(r) for r in table["rank"]]
    by_id: dict[str, dict[str, Any]] = {}
    for pos, a in enumerate(analyses):
        rank = _rank_of(a.run, pos)
        for f in a.findings:
            entry = by_id.setdefault(f.id, {"id": f.id, "cause": f.cause, "kind": f.kind, "title": f.title,
                                            "advice": f.advice, "ranks": [], "seconds": {}, "worst_seconds": 0.0})
            entry["ranks"].append(rank)
            entry["seconds"][str(rank)] = round(f.seconds, 6)
            if f.seconds >= entry["worst_seconds"]:
                entry["worst_seconds"] = round(f.seconds, 6)
                entry["title"] = f.title
    out = []
    for entry in by_id.values():
        entry["ranks"] = sorted(entry["ranks"])
        entry["missing_on"] = [r for r in all_ranks if r not in entry["ranks"]]
        out.append(entry)
    out.sort(key=lambda e: (-e["worst_seconds"], e["id"]))
    return out


def focus_rank(analyses: Sequence[Analysis]) -> int:
    """Index of the analysis to show in full: the first straggler, else the first rank."""
    table = rank_table(analyses)
    notes = stragglers(table)
    if notes:
        rank = notes[0]["rank"]
        for pos, a in enumerate(analyses):
            if _rank_of(a.run, pos) == rank:
                return pos
    order = sorted(range(len(analyses)), key=lambda p: _rank_of(analyses[p].run, p))
    return order[0] if order else 0


def ranks_view(analyses: Sequence[Analysis]) -> dict[str, Any]:
    """What the report and the summary show about a multi-rank run."""
    table = rank_table(analyses)
    focus = focus_rank(analyses)
    return {
        "rows": table.drop(columns=["path"]).to_dict(orient="records"),
        "paths": list(table["path"]),
        "stragglers": stragglers(table),
        "findings": merged_findings(analyses),
        "focus": _rank_of(analyses[focus].run, focus) if analyses else None,
        "focus_index": focus,
    }
