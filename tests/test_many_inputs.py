"""Runs with many distinct input names give what the straightforward computation gave.

Issue 28: a summary was quadratic in a run's distinct input names, because each shape
finding read every signature and every step, and each new signature was compared with
every earlier one in a Python loop. The indexes that replaced those loops
(``SigIndex``, ``SeriesIndex``) are checked here against the loops, on generated
signatures (hypothesis) and on a whole small run of the benchmark's kind
(``benchmarks/summary_scale.py``); that nothing is quadratic any more is the benchmark's
to show, not a timed test's. No torch needed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xprof.analysis import analyze
from xprof.analysis.findings import series as series_module
from xprof.analysis.findings.series import Series, SeriesIndex
from xprof.diagnosis.evidence import added_inputs, micro_batch_change
from xprof.diagnosis.signatures import SigIndex, Signature, _sig_distance, closest, shape_map
from xprof.runcolumns import load_columns
from xprof.runfile import base_input_name

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"

_names = st.sampled_from(["x", "x#1", "x#2", "y", "labels", "mask"])
_shape = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)
_sig = st.lists(st.tuples(_names, _shape, st.sampled_from(["int64", "float32"]), st.just("batch")),
                min_size=0, max_size=4).map(tuple)


def _distances_by_loop(sig: Signature, previous: list[Signature]) -> list[int]:
    """Each earlier signature's distance, one ``_sig_distance`` at a time."""
    names = [n for n, _, _, _ in sig]
    shapes = [s for _, s, _, _ in sig]
    return [_sig_distance(names, shapes, len(p), shape_map(p)) for p in previous]


@settings(max_examples=300, deadline=None)
@given(st.lists(_sig, min_size=1, max_size=12), _sig)
def test_signature_index_matches_the_loops(previous: list[Signature], sig: Signature) -> None:
    index = SigIndex()
    index.catch_up(previous)
    by_loop = _distances_by_loop(sig, previous)
    assert index.distances(sig).tolist() == by_loop
    assert index.nearest(sig) == by_loop.index(min(by_loop))  # (the first of equals)
    index.few = 0  # (the narrowing a long run's thousands of signatures take, on these few)
    assert index.nearest(sig) == by_loop.index(min(by_loop))
    index.few = SigIndex().few  # (the default again)
    assert closest(sig, previous, index) == closest(sig, previous, SigIndex())
    assert micro_batch_change(sig, previous, index) == micro_batch_change(sig, previous)
    assert added_inputs(sig, previous, index) == added_inputs(sig, previous)


def test_signature_index_with_a_dim_that_is_no_int() -> None:
    """An older file's symbolic size: counted one by one, the same distances."""
    previous: list[Signature] = [(("x", (2, "s0"), "f32", "batch"),), (("x", (2, 3), "f32", "batch"),)]
    index = SigIndex()
    index.catch_up(previous)
    sig: Signature = (("x", (2, 4), "f32", "batch"),)
    assert index.distances(sig).tolist() == _distances_by_loop(sig, previous)


def _series_by_loop(name: str, steps: pd.DataFrame, sigs: dict[int, Signature]) -> Series:
    """The series as it was built before the index: every signature read for each input."""
    shape_of = {sig_id: [shape for n, shape, _, _ in inputs if base_input_name(n) == name]
                for sig_id, inputs in sigs.items()}
    rest_of = {sig_id: tuple(sorted((n, tuple(shape)) for n, shape, _, _ in inputs if base_input_name(n) != name))
               for sig_id, inputs in sigs.items()}
    sig_col = steps["sig"]
    keep = (steps["work"].to_numpy(dtype=bool) & sig_col.notna().to_numpy(dtype=bool)
            & (steps["ordinal"].to_numpy() >= 1))
    sig = sig_col.to_numpy(dtype=np.int64, na_value=-1)[keep]
    ords = steps["ordinal"].to_numpy()[keep]
    codes, uniques = pd.factorize(sig)
    groups = [shape_of.get(int(u), []) for u in uniques]
    rests = [rest_of.get(int(u), ()) for u in uniques]
    has = np.asarray([len(g) > 0 for g in groups], dtype=bool)[codes] if len(groups) else np.zeros(0, bool)
    at_first = (steps["work"].to_numpy(dtype=bool) & sig_col.notna().to_numpy(dtype=bool)
                & (steps["ordinal"].to_numpy() == 0))
    first_sig = sig_col.to_numpy(dtype=np.int64, na_value=-1)[at_first]
    first = shape_of.get(int(first_sig[0]), []) if len(first_sig) else []
    return Series(ords[has], codes[has], groups, rests, first)


def _answers(s: Series) -> list[Any]:
    """Everything a shape finding asks of a series."""
    out: list[Any] = [s.shapes(), s.rows_shared(), s.other_free_size(), s.ords.tolist()]
    for dim in range(3):
        out += [s.with_rest(dim), s.stages(dim), list(s.value_counts(dim).items()), s.warm_values(dim),
                sorted(s.values(dim)), s.ordinals_where(lambda sh, d=dim: len(sh) > d and sh[d] % 2 == 0)]
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 4), st.booleans()), max_size=40),
       st.dictionaries(st.integers(0, 5), _sig, max_size=6))
def test_series_index_matches_every_signature_read(rows: list[tuple[int, int, bool]],
                                                   sigs: dict[int, Signature]) -> None:
    steps = pd.DataFrame({"sig": pd.array([r[0] for r in rows], dtype="Int64"),
                          "ordinal": [r[1] for r in rows], "work": [r[2] for r in rows]})
    index = SeriesIndex(steps, sigs)
    for name in ("x", "y", "labels", "mask", "absent"):
        assert _answers(index.series(name)) == _answers(_series_by_loop(name, steps, sigs)), name


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("summary_scale", BENCH / "summary_scale.py")
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(BENCH))
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def _findings(path: str) -> list[dict[str, Any]]:
    return [dataclasses.asdict(f) for f in analyze(load_columns(path)).findings]


@pytest.mark.parametrize("kind", ["inputs", "sites"])
def test_a_run_of_many_inputs_or_sites_gives_the_findings_of_the_loops(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench()
    path = os.fspath(tmp_path / f"{kind}.json")
    (bench.write_inputs if kind == "inputs" else bench.write_sites)(path, 40)
    fast = _findings(path)
    assert len(fast) >= 39  # (the first input is warm-up's)
    # The same run with every index answering as the loops it replaced.
    monkeypatch.setattr(SigIndex, "distances",
                        lambda self, sig: self._distances_one_by_one(sig, [n for n, _, _, _ in sig],
                                                                     [s for _, s, _, _ in sig]))
    monkeypatch.setattr(SigIndex, "nearest", lambda self, sig: int(self.distances(sig).argmin()))
    monkeypatch.setattr(SigIndex, "same_bases", lambda self, bases: list(range(len(self.entries))))
    monkeypatch.setattr(SigIndex, "within", lambda self, items: list(range(len(self.entries))))
    monkeypatch.setattr(series_module.SeriesIndex, "series",
                        lambda self, name: _series_by_loop(name, self._steps, self._sigs))
    assert _findings(path) == fast
