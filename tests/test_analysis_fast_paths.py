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

from xprof.analysis.findings import train_steps_before
from xprof.analysis.tables import _nullable_ints
from xprof.diagnosis.patterns import bucket, bucketing_what_if
from xprof.runcolumns import int_column


def _what_if_by_step(lengths: list[int], each: float, current: float) -> list[dict[str, object]]:
    """bucketing_what_if as it was: one bucket() per step and strategy."""
    used = float(sum(lengths))
    out: list[dict[str, object]] = [{"strategy": "as recorded", "graphs": len(set(lengths)),
                                     "compile_seconds": round(current, 3), "saved_seconds": 0.0,
                                     "padding_waste": 0.0, "recompiles": len(set(lengths)) - 1}]

    def row(strategy: str, graphs: int, waste: float) -> dict[str, object]:
        seconds = max(graphs - 1, 0) * each
        return {"strategy": strategy, "graphs": graphs, "compile_seconds": round(seconds, 3),
                "saved_seconds": round(max(current - seconds, 0.0), 3), "padding_waste": round(waste, 4),
                "recompiles": max(graphs - 1, 0)}

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
    assert train_steps_before(starts, sorted(eval_ords)) == expected


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
    got = int_column(values)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()


@pytest.mark.parametrize("values", [[1, None], [2**70, 3], ["x", 2]])
def test_int_column_counts_what_int_cannot_take_as_zero(values: list[Any]) -> None:
    # As DuckDB reads a counter that is not a 64-bit int: the step keeps its other counts.
    got = int_column(values)
    assert got.dtype == np.int64
    assert got.tolist() == [v if isinstance(v, int) and abs(v) < 2**63 else 0 for v in values]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.lists(st.integers(0, 40), max_size=30),
       st.booleans())
def test_barrier_executions_match_the_loop(starts: list[int], barriers: list[int], in_order: bool) -> None:
    from xprof.analysis.tables import _barrier_executions

    start = np.asarray(sorted(starts), dtype=float)
    tb = np.asarray(sorted(barriers) if in_order else barriers, dtype=float)
    own = np.zeros(len(start), dtype=bool)
    for t in tb:  # the loop it replaced
        k = int(np.searchsorted(start, t, side="left"))
        while k < len(start) and own[k]:
            k += 1
        if k < len(start):
            own[k] = True
    assert _barrier_executions(start, tb).tolist() == own.tolist()


def _assign_by_row(dynamo: list[bool], opt: list[int], work: list[bool], nograd: list[bool]) -> tuple[
        list[str], list[int]]:
    """xprof.analysis.steps.assign's phases and ordinals as the row-by-row walk gave them."""
    n = len(dynamo)
    phase, ordinal = ["empty"] * n, [-1] * n
    k, pending = -1, []
    for r in range(n):
        if dynamo[r]:
            phase[r] = "dynamo"
        elif opt[r] > 0:
            k += 1
            phase[r], ordinal[r] = "train", k
            for p in pending:
                phase[p], ordinal[p] = "train", k
            pending = []
        elif not work[r]:
            phase[r] = "empty"
        elif nograd[r]:
            phase[r] = "eval"
        elif k < 0:
            pending.append(r)
        else:
            phase[r], ordinal[r] = "train", k
    # Short no-grad passes before (nearly) every update (a teacher's forward) are the next
    # update's training barriers.
    n_opt = sum(1 for d, o in zip(dynamo, opt) if o > 0 and not d)
    evals = [r for r in range(n) if phase[r] == "eval"]
    passes = sum(1 for r in evals if r == 0 or phase[r - 1] != "eval")
    if evals and n_opt >= 3 and passes >= 0.8 * n_opt and len(evals) <= 2 * passes:
        for r in evals:
            before = sum(1 for q in range(r) if opt[q] > 0 and not dynamo[q]) - 1
            phase[r], ordinal[r] = "train", before + 1 if before + 1 < n_opt else max(before, 0)
    return phase, ordinal


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2), st.booleans(), st.booleans()), max_size=40))
def test_step_phases_match_the_row_by_row_walk(rows: list[tuple[bool, int, bool, bool]]) -> None:
    from xprof.analysis.steps import assign

    dynamo, opt, work, nograd = ([r[k] for r in rows] for k in range(4))
    if not any(opt):
        opt = [*opt[:-1], 1] if opt else opt
    steps = pd.DataFrame({"barrier": ["dynamo" if d else "mark_step" for d in dynamo],
                          "opt": pd.array(opt, dtype="int64"), "work": pd.array(work, dtype=bool),
                          "nograd": pd.array(nograd, dtype=bool)})
    assign(steps)
    phase, ordinal = _assign_by_row(dynamo, opt, work, nograd)
    assert steps["phase"].tolist() == phase
    assert steps["ordinal"].tolist() == ordinal
    last, user = 0, []
    for o in ordinal:
        last = o if o >= 0 else last
        user.append(last)
    assert steps["user_step"].tolist() == user


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 4), st.booleans()), max_size=40),
       st.dictionaries(st.integers(0, 5), st.lists(st.tuples(st.sampled_from(["x", "x#1", "y"]),
                                                             st.lists(st.integers(1, 4), min_size=1, max_size=2)),
                                                   max_size=3)))
def test_shape_series_per_signature_matches_step_by_step(rows: list[tuple[int, int, bool]],
                                                         sig_inputs: dict[int, list[tuple[str, list[int]]]]) -> None:
    from collections import Counter

    from xprof.analysis.findings import Series

    sigs = {k: tuple((n, tuple(shape), "f32", "batch") for n, shape in v) for k, v in sig_inputs.items()}
    steps = pd.DataFrame({"sig": pd.array([r[0] for r in rows], dtype="Int64"),
                          "ordinal": [r[1] for r in rows], "work": [r[2] for r in rows]})
    series = [(o, shape) for s, o, w in rows if w and o >= 1  # the step-by-step list it replaced
              for n, shape, _, _ in sigs.get(s, ()) if n.split("#")[0] == "x"]
    got = Series.of("x", steps, sigs)
    want_shapes: list[tuple[int, ...]] = []
    for _, shape in series:
        if shape not in want_shapes:
            want_shapes.append(shape)
    assert got.shapes() == want_shapes
    want_counts = Counter(s[0] for _, s in series)
    assert list(got.value_counts(0).items()) == list(want_counts.items())  # first-seen order too
    assert got.ordinals_where(lambda s: s[0] % 2 == 0) == [o for o, s in series if s[0] % 2 == 0]
    assert sorted(got.values(1)) == sorted(s[1] for _, s in series if len(s) > 1)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(-3, 5).flatmap(lambda a: st.integers(0, 30).map(lambda n: list(range(a, a + n)))),
                 st.lists(st.integers(-5, 60), max_size=30, unique=True).map(sorted),
                 st.lists(st.integers(-5, 60), max_size=30)),
       st.data())
def test_user_steps_answer_like_the_dict_they_replaced(index: list[int], data: st.DataObject) -> None:
    """The barrier -> training step lookup read from two columns (dense, with gaps, or a table
    built by hand: unordered, repeated) answers ``get``, ``in``, ``[]``, ``len`` and iteration
    as ``dict(zip(index, user))`` did, for integer, float and other keys."""
    from xprof.analysis.findings.common import UserSteps

    user = data.draw(st.lists(st.integers(-1, 9), min_size=len(index), max_size=len(index)))
    want = dict(zip(index, user))
    got = UserSteps(np.asarray(index, dtype=np.int64), np.asarray(user, dtype=np.int64))
    keys = data.draw(st.lists(st.one_of(st.integers(-8, 64), st.integers(-8, 64).map(float),
                                        st.floats(-8, 64), st.none(), st.just("3"),
                                        st.integers(-8, 64).map(np.int64)), max_size=20))
    for k in keys:
        assert got.get(k, -7) == want.get(k, -7), k
        assert got.get(k) == want.get(k), k
        assert (k in got) == (k in want), k
        if k in want:
            assert got[k] == want[k]
        else:
            with pytest.raises(KeyError):
                got[k]
    assert len(got) == len(want)
    assert dict(got.items()) == want


_maybe_nan = st.one_of(st.integers(0, 6).map(float), st.just(float("nan")))


@settings(max_examples=300, deadline=None)
@given(st.lists(_maybe_nan, max_size=40))
def test_second_seen_matches_the_groupby(values: list[float]) -> None:
    """A signature's second training step, found by two duplicated() passes, is where a
    groupby's cumcount is 1 (NaN, no signature, never counts)."""
    from xprof.analysis.causes import second_seen

    arr = np.asarray(values, dtype=np.float64)
    want = np.flatnonzero(pd.Series(arr).groupby(arr, dropna=True).cumcount().to_numpy() == 1)
    assert second_seen(arr).tolist() == want.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.one_of(st.floats(-1e6, 1e6), st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), 1e-300, 1e300])), st.sampled_from(["warmup", "input_shape", "sync"])),
    max_size=30))
def test_compiles_by_step_match_pandas_groupby(rows: list[tuple[int, float, str]]) -> None:
    """The compiles' time and first cause per step equal ``groupby("step")``'s sum (NaN
    skipped, compensated) and first, bit for bit."""
    from xprof.analysis import _by_step, _first, _kahan

    df = pd.DataFrame(rows, columns=["step", "ms", "cause"]).astype({"step": np.int64, "ms": np.float64})
    sums, firsts = df.groupby("step")["ms"].sum(), df.groupby("step")["cause"].first()
    got = _by_step(df["step"].tolist(), df["ms"].tolist(), _kahan, float)
    assert got.index.tolist() == sums.index.tolist()
    assert np.array_equal(got.to_numpy(), sums.to_numpy(dtype=np.float64), equal_nan=True)
    assert _by_step(df["step"].tolist(), df["cause"].tolist(), _first, object).tolist() == firsts.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-1, 8), max_size=40), st.booleans())
def test_training_steps_count_distinct_ordinals(ordinals: list[int], in_order: bool) -> None:
    """Training steps counted from the rises of ordinals in barrier order (or, out of order,
    as distinct values) are the distinct ordinals at or above 0."""
    from xprof.analysis.steps import training_steps

    ords = sorted(ordinals) if in_order else ordinals
    steps = pd.DataFrame({"ordinal": np.asarray(ords, dtype=np.int64)})
    assert training_steps(steps) == len({o for o in ords if o >= 0})


@given(st.lists(st.sampled_from(["train", "eval", "dynamo", "empty"]), max_size=40), st.booleans())
def test_phase_masks_match_the_pandas_comparison(phases: list[str], has_column: bool) -> None:
    """``phase_is`` (the object array compared) says what ``steps["phase"] == name`` says on
    the column as the analysis stores it; a table without phases has none of any."""
    from xprof.analysis.steps import PHASES, phase_is

    column = np.empty(len(phases), dtype=object)
    column[:] = phases
    steps = pd.DataFrame({"i": np.arange(len(phases))})
    if has_column:
        steps["phase"] = column
    for name in PHASES:
        want = (steps["phase"] == name).to_numpy(dtype=bool) if has_column else np.zeros(len(phases), dtype=bool)
        got = phase_is(steps, name)
        assert got.dtype == bool and np.array_equal(got, want)
