"""Two folders of a multi-process run compared rank by rank (schema ``xprof-compare-ranks``).

Rank N of the base folder is compared with rank N of the new one; each pair is an
ordinary comparison (:func:`xprof.comparison.compare`), and the thresholds hold for every
rank. docs/json.md documents the JSON object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from xprof.comparison.model import CompareResult, Violation
from xprof.runfile import expand_run_paths, rank_of_path

COMPARE_RANKS_SCHEMA = "xprof-compare-ranks"
COMPARE_RANKS_VERSION = 1


@dataclass(frozen=True)
class RankPair:
    rank: int
    base: str
    new: str


@dataclass(frozen=True)
class RankProblem:
    """A rank that cannot be compared: no file on one side, or a file that cannot be read.
    Either is a regression of the pod (a host wrote nothing), not bad input."""

    rank: int
    kind: str
    """``missing`` or ``unreadable``."""
    side: str
    """``base`` or ``new``: where the file is missing or unreadable."""
    message: str
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "kind": self.kind, "side": self.side, "message": self.message, "path": self.path}


@dataclass
class RankPairing:
    pairs: list[RankPair]
    problems: list[RankProblem]


def is_rank_folder_pair(runs: list[str]) -> bool:
    """BASE and NEW are two folders (so they are compared rank by rank)."""
    return len(runs) == 2 and all(os.path.isdir(p) for p in runs)


def pair_rank_folders(base: str, new: str) -> RankPairing:
    """The run files of two folders paired by rank (the N of ``*.rankN.json``, else the
    position); a rank with a file on one side only is a :class:`RankProblem`. ``ValueError``
    (one line) when a folder holds no run file."""
    base_files, new_files = expand_run_paths([base]), expand_run_paths([new])
    by_base = {rank_of_path(p, k): p for k, p in enumerate(base_files)}
    by_new = {rank_of_path(p, k): p for k, p in enumerate(new_files)}
    pairs = [RankPair(r, by_base[r], by_new[r]) for r in sorted(set(by_base) & set(by_new))]
    problems = [RankProblem(r, "missing", "new", f"rank {r}: no file in {new} (the base has {by_base[r]})",
                            by_base[r]) for r in sorted(set(by_base) - set(by_new))]
    problems += [RankProblem(r, "missing", "base", f"rank {r}: no file in {base} (the new run has {by_new[r]})",
                             by_new[r]) for r in sorted(set(by_new) - set(by_base))]
    problems.sort(key=lambda p: p.rank)
    return RankPairing(pairs, problems)


def rank_output_path(path: str, rank: int) -> str:
    """``out.html`` -> ``out.rank1.html``: one file per rank."""
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"


def compare_ranks_json(results: list[tuple[int, CompareResult, list[Violation]]],
                       thresholds: dict[str, str] | None,
                       problems: list[RankProblem] | None = None) -> dict[str, Any]:
    """The ``xprof compare --json`` object for two rank folders."""
    return {"schema": COMPARE_RANKS_SCHEMA, "version": COMPARE_RANKS_VERSION,
            "ranks": [{"rank": rank, **result.to_json(violations, thresholds)}
                      for rank, result, violations in results],
            "problems": [p.to_json() for p in problems or []]}
