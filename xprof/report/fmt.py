"""Numbers and names written the way a person reads them (shared by HTML and terminal)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


def seconds(value: float | None) -> str:
    """``0.004`` -> ``4 ms``, ``12.34`` -> ``12.3 s``, ``125`` -> ``2 min 5 s``."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value < 0.001 and value > 0:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 10:
        return f"{value:.2f} s"
    if value < 100:
        return f"{value:.1f} s"
    if value < 3600:
        m, s = divmod(round(value), 60)
        return f"{m} min {s} s"
    h, rest = divmod(round(value), 3600)
    return f"{h} h {rest // 60} min"


def ms(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 10:
        return f"{value:.0f} ms"
    return f"{value:.2f} ms"


def percent(share: float | None) -> str:
    if share is None or not math.isfinite(share):
        return "n/a"
    p = share * 100
    if 0 < p < 1:
        return "<1%"
    return f"{p:.0f}%"




def shape(dims: Sequence[int] | None) -> str:
    if dims is None:
        return "?"
    return "[" + ", ".join(str(int(d)) for d in dims) + "]"


def sharding(spec: str | None) -> str:
    """An SPMD sharding spec as recorded (``{devices=[4,1]0,1,2,3}``); ``""`` is none
    (XLA replicates the tensor); None (not recorded) is empty."""
    if spec is None:
        return ""
    return spec if spec else "unsharded"


def short_list(items: Iterable[Any], limit: int = 12) -> str:
    """``1, 2, 3 … (40 more)``: long lists stay one line."""
    values = [str(i) for i in items]
    if len(values) <= limit:
        return ", ".join(values)
    return ", ".join(values[:limit]) + f" … ({len(values) - limit} more)"


def location(file: str | None, line: int | None) -> str | None:
    if not file:
        return None
    return f"{file}:{line}" if line else file
