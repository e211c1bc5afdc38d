"""Reading one field of a record as written, and the numbers no recorder writes: the
limits past which a record is impossible (:class:`Impossible`, counted in ``Run.impossible``).
"""

from __future__ import annotations

from itertools import chain
from typing import Any


def num_pairs(value: Any) -> list[tuple[float, float]]:
    """``[[a, b], ...]`` as float pairs; items that are not two numbers are dropped."""
    if not isinstance(value, list):
        return []
    # Fast path: every item a list of two floats (what the recorder writes), checked at C
    # speed. Anything else (ints, bools, odd items) goes through the item-by-item check.
    if (set(map(type, value)) <= {list} and set(map(len, value)) <= {2}
            and set(map(type, chain.from_iterable(value))) <= {float}):
        return list(map(tuple, value))
    out: list[tuple[float, float]] = []
    for item in value:
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item)
        ):
            out.append((float(item[0]), float(item[1])))
    return out


def as_int(v: Any, default: int = 0) -> int:
    return default if v is None else int(v)


def opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def plain_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def int_tuple(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return None


NO_COUNTS: dict[str, int] = {}
"""Shared by every step without counter deltas (never modified)."""


def counts_of(v: Any) -> dict[str, int]:
    return v if type(v) is dict else {}


# -- numbers no recorder writes -------------------------------------------------------------
# A record with one is an impossible record: skipped and counted (``Run.impossible``), and
# said wherever the run is shown; ``xprof compare`` will not judge such a file.

MAX_COUNT = 1 << 40
"""The largest count a record may hold (a step index, compiles, a counter's delta in one step):
far past any real run, and small enough that a million of them sum without overflow."""
MAX_SECONDS = 1e12
"""Times and durations in seconds are below this (the year 33658)."""
MAX_NS = MAX_SECONDS * 1e9


class Impossible(ValueError):
    """A record holding a number no recorder writes: negative, NaN, infinite or past the
    limits above, a duration that ends before it starts, a step index not after the last."""


def counts_possible(counts: dict[str, Any]) -> bool:
    """Every number among a step's counter deltas is a count (other values read as 0)."""
    for v in counts.values():
        if type(v) is int:
            if not 0 <= v <= MAX_COUNT:
                return False
        elif type(v) is float and not (0.0 <= v <= MAX_COUNT and v.is_integer()):
            return False
    return True


def pair_possible(pair: tuple[float, float]) -> bool:
    """A sample: (a time in seconds, a duration in ns or a node count)."""
    return 0.0 <= pair[0] < MAX_SECONDS and 0.0 <= pair[1] <= MAX_NS


def time_or_none(t: Any) -> float | None:
    """A time in seconds as written, or None when it is not one (absent, NaN, negative, huge)."""
    if isinstance(t, (int, float)) and not isinstance(t, bool) and 0.0 <= t < MAX_SECONDS:
        return float(t)
    return None
