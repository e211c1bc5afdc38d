"""The columns themselves (:class:`RunColumns`), a run read with them (:class:`ColumnRun`),
and the same columns built from typed records (:func:`columns_of`) or turned back into them
(:func:`with_records`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from xprof.runcolumns.fields import COMPILE_FIELDS, NUMPY_TYPES, REQUIRED, SAMPLES, STEP_FIELDS, SYNC_FIELDS, Field
from xprof.runfile import Compile, Run, Step, Sync, gc_paused, is_fallback_counter

# -- the columns ------------------------------------------------------------------------------


@dataclass
class RunColumns:
    """The bulk records of a run as columns, in the orders :func:`xprof.runfile.load_run`
    gives: steps sorted by index (stable), host reads, compiles and samples in file order.

    ``steps``, ``syncs`` and ``compiles`` map each :class:`Field`'s column name to a numpy
    array (``str`` fields as object arrays sharing one string per distinct value; fields
    whose default is None as masked arrays). ``counters`` maps each counter name a step
    recorded to an int64 array, 0 where the step did not move it.
    """

    steps: dict[str, np.ndarray]
    counters: dict[str, np.ndarray]
    syncs: dict[str, np.ndarray]
    compiles: dict[str, np.ndarray]
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    dropped: int = 0
    """Typed records left out because an int field did not fit in 64 bits (counted with the
    run's unreadable lines)."""

    @property
    def n_steps(self) -> int:
        return len(self.steps["i"])

    def sample(self, name: str) -> np.ndarray:
        """``executions``, ``transfers`` or ``graph_sizes`` as an (n, 2) float array."""
        return self.samples.get(name, _NO_SAMPLES)

    def counter(self, name: str) -> np.ndarray:
        """One counter's per-step deltas (zeros when no step moved it)."""
        got = self.counters.get(name)
        return got if got is not None else np.zeros(self.n_steps, dtype=np.int64)

    def fallback_counters(self) -> dict[str, np.ndarray]:
        """The CPU-fallback counters (``aten::*`` ops without an XLA lowering)."""
        return {k: v for k, v in self.counters.items() if is_fallback_counter(k)}


_NO_SAMPLES = np.zeros((0, 2), dtype=np.float64)
_NO_SAMPLES.flags.writeable = False


@dataclass
class ColumnRun:
    """A run file read with its bulk records as columns (:func:`xprof.runcolumns.load_columns`):
    the columns beside a :class:`~xprof.runfile.Run` that holds the header and the few records
    a run has a handful of (sites, inputs, errors, debug, end...). That ``run``'s lists of bulk
    records (steps, syncs, compiles, samples) are empty: they are ``columns``
    (:func:`with_records` makes the whole typed ``Run``)."""

    run: Run
    columns: RunColumns


def _empty(fields: Sequence[Field]) -> dict[str, np.ndarray]:
    return {f.column: _typed([], f) for f in fields}


def _typed(values: Sequence[Any], f: Field) -> np.ndarray:
    """A column of ``values`` (None where missing) as :class:`RunColumns` holds it."""
    if f.kind == "str":
        return shared_strings(values)
    if f.default is None or f.default is REQUIRED:
        mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        data: np.ndarray = np.fromiter((0 if v is None else v for v in values), dtype=NUMPY_TYPES[f.kind],
                                       count=len(values))
        return np.ma.MaskedArray(data, mask) if f.default is None else data
    return np.fromiter(values, dtype=NUMPY_TYPES[f.kind], count=len(values))


def shared_strings(values: Sequence[Any]) -> np.ndarray:
    """An object array of ``values`` where equal strings are one object (a million steps
    name a handful of barrier kinds)."""
    interned: dict[Any, Any] = {}
    out = np.empty(len(values), dtype=object)
    out[:] = [interned.setdefault(v, v) for v in values]
    return out


def columns_of(run: Run | ColumnRun) -> RunColumns:
    """The columns of a :class:`ColumnRun`, or the same columns built from the typed records
    of a ``Run`` (from :func:`xprof.runfile.load_run` or made by hand)."""
    if isinstance(run, ColumnRun):
        return run.columns
    with gc_paused():
        return _from_records(run)


def _record_columns(records: Sequence[NamedTuple], fields: Sequence[Field]) -> tuple[dict[str, np.ndarray], int]:
    """Columns of typed records, and how many were dropped: a record whose int field does not
    fit in 64 bits is dropped (the reader took it; no column holds it)."""
    if not records:
        return _empty(fields), 0
    names = type(records[0])._fields
    ints = [names.index(f.attr) for f in fields if f.kind == "int" and f.attr in names]
    try:
        return _convert(records, fields, names), 0
    except OverflowError:
        kept = [r for r in records if all(r[k] is None or _LO <= r[k] <= _HI for k in ints)]
        return (_convert(kept, fields, names) if kept else _empty(fields)), len(records) - len(kept)


_LO, _HI = -(1 << 63), (1 << 63) - 1


def _convert(records: Sequence[NamedTuple], fields: Sequence[Field], names: Sequence[str]) -> dict[str, np.ndarray]:
    cols = list(zip(*records))
    out = {}
    for f in fields:
        if f.attr in names:
            values: Sequence[Any] = cols[names.index(f.attr)]
        else:
            values = [None if f.default is REQUIRED else f.default] * len(records)
        out[f.column] = _typed(values, f)
    return out


def _from_records(run: Run) -> RunColumns:
    steps, dropped = _record_columns(run.steps, STEP_FIELDS)
    kept_steps = run.steps if not dropped else [s for s in run.steps if _LO <= s.i <= _HI
                                                 and all(v is None or _LO <= v <= _HI for v in (s.sig, s.site))]
    counters: dict[str, np.ndarray] = {}
    if kept_steps:
        all_counts = [s.counters for s in kept_steps]
        names: dict[str, None] = {}
        for c in all_counts:
            names.update(dict.fromkeys(c))
        for name in names:
            column = int_column([c.get(name, 0) for c in all_counts])
            if column.any():  # (a counter no step moved is no column, as DuckDB reads it)
                counters[name] = column
    syncs, n_syncs = _record_columns(run.syncs, SYNC_FIELDS)
    compiles, n_compiles = _record_columns(run.compiles, COMPILE_FIELDS)
    samples = {name: _pairs(getattr(run, name)) for name in SAMPLES.values()}
    return RunColumns(steps=steps, counters=counters, syncs=syncs, compiles=compiles,
                      samples={k: v for k, v in samples.items() if len(v)},
                      dropped=dropped + n_syncs + n_compiles)


def int_column(values: list[Any]) -> np.ndarray:
    """Counter deltas as int64: a list of Python ints converts in one numpy call; a value
    ``int()`` cannot take, or one beyond 64 bits, counts as 0 (as DuckDB reads it)."""
    try:
        arr = np.asarray(values)
    except ValueError:  # (a list among the values)
        return np.asarray([_count_or_zero(v) for v in values], dtype=np.int64)
    if arr.dtype.kind in "ib":
        return arr.astype(np.int64)
    return np.asarray([_count_or_zero(v) for v in values], dtype=np.int64)


def _count_or_zero(v: Any) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if _LO <= n <= _HI else 0


def _pairs(values: Sequence[tuple[float, float]]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1, 2) if len(values) else _NO_SAMPLES


def with_records(read: Run | ColumnRun) -> Run:
    """The typed ``Run`` of ``read``: a :class:`ColumnRun`'s run with its record lists filled
    from its columns (for readers that walk records one by one, such as the Chrome trace). A
    ``Run`` is returned as is."""
    if not isinstance(read, ColumnRun):
        return read
    run, cols = read.run, read.columns
    def rows(table: dict[str, np.ndarray], fields: Sequence[Field]) -> Iterator[dict[str, Any]]:
        lists = {f.attr: py_list(table[f.column]) for f in fields}
        for k in range(len(table[fields[0].column])):
            yield {a: v[k] for a, v in lists.items()}

    counter_lists = {name: arr.tolist() for name, arr in cols.counters.items()}
    steps = []
    for k, r in enumerate(rows(cols.steps, STEP_FIELDS)):
        counts = {name: v[k] for name, v in counter_lists.items() if v[k]}
        steps.append(Step(counters=counts, **r))
    syncs = [Sync(**r) for r in rows(cols.syncs, SYNC_FIELDS)]
    compiles = [Compile(**r) for r in rows(cols.compiles, COMPILE_FIELDS)]
    def pairs(name: str) -> list[tuple[float, float]]:
        return [(a, b) for a, b in cols.sample(name).tolist()]

    return dataclasses.replace(run, steps=steps, syncs=syncs, compiles=compiles, executions=pairs("executions"),
                               transfers=pairs("transfers"), graph_sizes=pairs("graph_sizes"))


def py_list(arr: np.ndarray) -> list[Any]:
    if isinstance(arr, np.ma.MaskedArray):
        return [None if m else v for v, m in zip(arr.data.tolist(), np.ma.getmaskarray(arr).tolist())]
    return arr.tolist()


def no_columns() -> ColumnsRead:
    return ColumnsRead(RunColumns(steps=_empty(STEP_FIELDS), counters={}, syncs=_empty(SYNC_FIELDS),
                            compiles=_empty(COMPILE_FIELDS)), 0)


class ColumnsRead(NamedTuple):
    columns: RunColumns
    skipped: int
    """Bulk records DuckDB read but that lack a required field."""
    possible: bool = True
    """No impossible number among them (else the file is read record by record)."""
