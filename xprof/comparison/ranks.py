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


def is_rank_folder_pair(runs: list[str]) -> bool:
    """BASE and NEW are two folders (so they are compared rank by rank)."""
    return len(runs) == 2 and all(os.path.isdir(p) for p in runs)


def pair_rank_folders(base: str, new: str) -> list[RankPair]:
    """The run files of two folders paired by rank; ``ValueError`` (one line) when they differ."""
    base_files, new_files = expand_run_paths([base]), expand_run_paths([new])
    if len(base_files) != len(new_files):
        raise ValueError(f"{base} has {len(base_files)} run file(s) and {new} has {len(new_files)}: "
                         "compare folders with the same ranks")
    return [RankPair(rank_of_path(b, k), b, n) for k, (b, n) in enumerate(zip(base_files, new_files))]


def rank_output_path(path: str, rank: int) -> str:
    """``out.html`` -> ``out.rank1.html``: one file per rank."""
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"


def compare_ranks_json(results: list[tuple[int, CompareResult, list[Violation]]],
                       thresholds: dict[str, str] | None) -> dict[str, Any]:
    """The ``xprof compare --json`` object for two rank folders."""
    return {"schema": COMPARE_RANKS_SCHEMA, "version": COMPARE_RANKS_VERSION,
            "ranks": [{"rank": rank, **result.to_json(violations, thresholds)}
                      for rank, result, violations in results]}
