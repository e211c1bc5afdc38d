"""How findings word their numbers, places and step patterns: shared by every kind of finding."""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from xprof.diagnosis.patterns import describe_period

_D = TypeVar("_D")


class UserSteps(Mapping[int, int]):
    """Barrier index -> the training step it is reported under, read from the step table's two
    columns where the table keeps them: a dict of a million barriers is ~100 MB of Python ints.

    ``index`` sorted and distinct (as read): found by position (no gaps) or by binary search;
    else (a table built by hand) a dict, the last row of an index winning as in ``dict(zip())``.
    """

    def __init__(self, index: np.ndarray, user: np.ndarray) -> None:
        self._index = np.asarray(index, dtype=np.int64)
        self._user = np.asarray(user, dtype=np.int64)
        n = len(self._index)
        ordered = n < 2 or bool((np.diff(self._index) > 0).all())
        self._first = int(self._index[0]) if n else 0
        self._dense = ordered and (n == 0 or int(self._index[-1]) - self._first == n - 1)
        self._dict = None if ordered else dict(zip(self._index.tolist(), self._user.tolist()))

    def _row(self, key: object) -> int | None:
        try:
            k = operator.index(key)  # type: ignore[arg-type]
        except TypeError:
            if not (isinstance(key, float) and key.is_integer()):
                return None  # (no barrier index is anything but an integer)
            k = int(key)
        if self._dense:
            row = k - self._first
            return row if 0 <= row < len(self._index) else None
        row = int(np.searchsorted(self._index, k))
        return row if row < len(self._index) and int(self._index[row]) == k else None

    def __getitem__(self, key: int) -> int:
        if self._dict is not None:
            return self._dict[key]
        row = self._row(key)
        if row is None:
            raise KeyError(key)
        return int(self._user[row])

    def get(self, key: int, default: _D | int | None = None) -> int | _D | None:  # type: ignore[override]
        if self._dict is not None:
            return self._dict.get(key, default)
        row = self._row(key)
        return default if row is None else int(self._user[row])

    def __contains__(self, key: object) -> bool:
        if self._dict is not None:
            return key in self._dict
        return self._row(key) is not None

    def __len__(self) -> int:
        return len(self._dict) if self._dict is not None else len(self._index)

    def __iter__(self) -> Iterator[int]:
        return iter(self._dict if self._dict is not None else self._index.tolist())


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
                    ordinal_of: Mapping[int, int]) -> tuple[int, int] | None:
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



def compiled_at(comp_steps: list[int], ordinal_of: Mapping[int, int]) -> str:
    """``compiled at steps 9, 19, 29`` in the user's training steps (ten at most)."""
    user = sorted({ordinal_of.get(s, s) for s in comp_steps})
    return (f"compiled at step{'s' if len(user) != 1 else ''} {', '.join(str(u) for u in user[:10])}"
            + (" ..." if len(user) > 10 else ""))
