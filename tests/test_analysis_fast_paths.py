"""The vectorized and counted shortcuts in the analysis give what the plain loops gave.

Each shortcut (``xprof/analysis``) is checked against the straightforward version it
replaced, on generated data (hypothesis). No torch needed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xprof.analysis.findings import _train_steps_before
from xprof.analysis.patterns import bucket, bucketing_what_if
from xprof.analysis.tables import _nullable_ints
from xprof.runcolumns import _int_column


def _what_if_by_step(lengths: list[int], each: float, current: float) -> list[dict[str, object]]:
    """bucketing_what_if as it was: one bucket() per step and strategy."""
    used = float(sum(lengths))
    out: list[dict[str, object]] = [{"strategy": "as recorded", "graphs": len(set(lengths)),
                                     "compile_seconds": round(current, 3), "saved_seconds": 0.0,
                                     "padding_waste": 0.0}]

    def row(strategy: str, graphs: int, waste: float) -> dict[str, object]:
        seconds = max(graphs - 1, 0) * each
        return {"strategy": strategy, "graphs": graphs, "compile_seconds": round(seconds, 3),
                "saved_seconds": round(max(current - seconds, 0.0), 3), "padding_waste": round(waste, 4)}

    for m in (8, 16, 32, 64):
        padded = [bucket(v, m) for v in lengths]
        out.append(row(f"pad_to_multiple_of={m}", len(set(padded)), sum(padded) / used - 1.0))
    top = max(lengths)
    out.append(row(f"padding='max_length' (max_length={top})", 1, top * len(lengths) / used - 1.0))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=300), st.floats(0, 10), st.floats(0, 1e4))
def test_what_if_counts_match_per_step(lengths: list[int], each: float, current: float) -> None:
    assert bucketing_what_if(lengths, each, current) == _what_if_by_step(lengths, each, current)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-2, 60), max_size=40), st.lists(st.integers(-2, 60), max_size=40))
def test_train_steps_before_matches_counting(starts: list[int], evals: list[int]) -> None:
    eval_ords = set(evals)
    expected = [sum(1 for o in range(r) if o not in eval_ords) for r in starts]
    assert _train_steps_before(starts, sorted(eval_ords)) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e6, 1e6, allow_nan=False), st.booleans()), max_size=50))
def test_nullable_ints_match_int_of_each(pairs: list[tuple[float, bool]]) -> None:
    values = np.asarray([v for v, _ in pairs], dtype=float)
    mask = np.asarray([m for _, m in pairs], dtype=bool)
    got = _nullable_ints(values, mask)
    want = pd.array([int(v) if m else None for v, m in pairs], dtype="Int64")
    pd.testing.assert_extension_array_equal(got, want)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e30])
def test_nullable_ints_fail_or_convert_like_int(bad: float) -> None:
    values, mask = np.asarray([1.0, bad]), np.asarray([True, True])
    try:
        want: Any = pd.array([int(v) for v in values], dtype="Int64")
    except (ValueError, OverflowError, TypeError) as exc:
        with pytest.raises(type(exc)):
            _nullable_ints(values, mask)
        return
    pd.testing.assert_extension_array_equal(_nullable_ints(values, mask), want)


@pytest.mark.parametrize("values", [[1, 2, 3], [True, 2], [False, True], [], [1.9, -1.9], ["3", 4],
                                    [2**40, -5]])
def test_int_column_converts_like_int(values: list[Any]) -> None:
    want = np.asarray([int(v) for v in values], dtype=np.int64)
    got = _int_column(values)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()


@pytest.mark.parametrize("values", [[1, None], [2**70, 3], ["x", 2]])
def test_int_column_counts_what_int_cannot_take_as_zero(values: list[Any]) -> None:
    # As DuckDB reads a counter that is not a 64-bit int: the step keeps its other counts.
    got = _int_column(values)
    assert got.dtype == np.int64
    assert got.tolist() == [v if isinstance(v, int) and abs(v) < 2**63 else 0 for v in values]
