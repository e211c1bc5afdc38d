"""How findings word their numbers, places and step patterns: shared by every kind of finding."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from xprof.diagnosis.patterns import describe_period


def title_seconds(seconds: float) -> str:
    """A read finding's cost in its title: ``0.38 s``, or ``3.1 ms`` under 10 ms (where
    ``0.00 s`` would say nothing)."""
    return f"{seconds * 1e3:.1f} ms" if seconds < 0.01 else f"{seconds:.2f} s"



def dur_text(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1e3:.2f} s"



def loc_text(file: str, line: int) -> str:
    return f"{os.path.basename(file)}:{line}"



def step_pattern(ordinals: list[int], steady_steps: int) -> str | None:
    periodic = describe_period(sorted(set(ordinals)))
    if periodic is not None:
        return periodic
    if steady_steps and len(set(ordinals)) >= max(3, int(0.9 * steady_steps)):
        return "every step"
    return None



def compiled_early(rows: pd.DataFrame, occurrences: list[tuple[int, int]],
                    ordinal_of: dict[int, int]) -> tuple[int, int] | None:
    """(the training step of the last compile, how many occurrences came after it) when a
    finding's compiles all came before some of its occurrences (``(barrier, count)``: calls
    of a CPU-fallback op, host reads) that compiled nothing: a one-off, cached afterwards."""
    if not len(rows):
        return None
    last = int(rows["step"].max())
    later = sum(k for i, k in occurrences if i > last)
    return (ordinal_of.get(last, last), later) if later else None



def short_code(code: str, limit: int = 80) -> str:
    return code if len(code) <= limit else code[:limit - 3] + "..."



def and_list(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"



def first_few(values: list[Any], n: int = 8) -> str:
    """``16, 24, 32`` (the first ``n``, then ``...``)."""
    return ", ".join(str(v) for v in values[:n]) + ("..." if len(values) > n else "")



def compiled_at(comp_steps: list[int], ordinal_of: dict[int, int]) -> str:
    """``compiled at steps 9, 19, 29`` in the user's training steps (ten at most)."""
    user = sorted({ordinal_of.get(s, s) for s in comp_steps})
    return (f"compiled at step{'s' if len(user) != 1 else ''} {', '.join(str(u) for u in user[:10])}"
            + (" ..." if len(user) > 10 else ""))
