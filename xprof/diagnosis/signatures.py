"""Input signatures: the shapes, dtypes and sources of a step's inputs, and which earlier
signature is nearest (what changed)."""

from __future__ import annotations

from operator import ne
from typing import NamedTuple

import numpy as np

from xprof.diagnosis.patterns import Shape, changed_dims, shape_distance

Signature = tuple[tuple[str, Shape, str, str], ...]
Shardings = dict[int, dict[str, str]]
"""SPMD runs: signature id -> input name -> its sharding spec (``""``: none)."""


def no_sharding(spec: str) -> str:
    """How a spec reads to a person: ``""`` (no annotation) is replicated by XLA."""
    return spec if spec else "no sharding (replicated)"


def closest(sig: Signature, previous: list[Signature], index: SigIndex | None = None) -> tuple[
        Signature | None, str | None, int | None, Shape | None, Shape | None]:
    """The earlier signature nearest to ``sig`` (the first of equals) and the input that
    differs most usefully. ``index``: the earlier signatures as compared, kept by the
    caller (a run's walk asks again with the same list, longer by a few, each time)."""
    if not previous:
        return None, None, None, None, None
    index = SigIndex() if index is None else index
    index.catch_up(previous)
    mine = _known(sig)
    names = [name for name, _, _, _ in sig]
    shapes = [shape for _, shape, _, _ in sig]
    dist = np.zeros(len(previous), dtype=np.int64)
    for layout, group in index.groups.items():
        if mine.layout is not None and layout == mine.layout:
            # same inputs and ranks: the distance is how many dims differ
            dist[group.positions[:group.n]] = (group.rows[:group.n] != mine.dims).sum(axis=1)
        else:
            for k in group.positions[:group.n].tolist():
                dist[k] = _sig_distance(names, shapes, len(previous[k]), index.entries[k].shapes)
    prev = previous[int(np.argmin(dist))]  # (argmin: the first of equals)
    prev_by_name = shape_map(prev)
    candidates = []
    for name, shape, _, src in sig:
        old = prev_by_name.get(name)
        if old is not None and old != shape:
            dims = changed_dims(old, shape)
            # Prefer loader batch names over ad-hoc .to() names, then the biggest change.
            rank = (0 if src in ("batch", "loader", "arg") else 1, -len(dims))
            candidates.append((rank, name, dims[0] if dims else None, old, shape))
    if not candidates:
        new_names = [name for name, _, _, _ in sig if name not in prev_by_name]
        return prev, (new_names[0] if new_names else None), None, None, None
    candidates.sort(key=lambda c: c[0])
    _, name, dim, old, new = candidates[0]
    return prev, name, dim, old, new


def shape_map(sig: Signature) -> dict[str, Shape]:
    """Input name -> shape (the last input of a name, where a signature repeats one)."""
    return {name: shape for name, shape, _, _ in sig}


class _Known(NamedTuple):
    """A signature as :func:`closest` compares it."""

    shapes: dict[str, Shape]
    """Input name -> shape (:func:`_shape_map`)."""
    layout: tuple[tuple[str, int], ...] | None
    """Each input's name and rank, when the names are distinct and every dim an int (else None)."""
    dims: np.ndarray
    """Every input's dims, one after the other (with a layout)."""


def _known(sig: Signature) -> _Known:
    shapes = shape_map(sig)
    layout = tuple((name, len(shape)) for name, shape, _, _ in sig)
    dims = [d for _, shape, _, _ in sig for d in shape]
    if len(shapes) == len(sig) and all(type(d) is int and _LO <= d <= _HI for d in dims):
        return _Known(shapes, layout, np.asarray(dims, dtype=np.int64))
    return _Known(shapes, None, np.zeros(0, dtype=np.int64))


_LO, _HI = -(1 << 63), (1 << 63) - 1


class _Group:
    """The earlier signatures of one layout: their positions and their dims, a row each
    (arrays grown by doubling; the first ``n`` rows are filled)."""

    def __init__(self, width: int) -> None:
        self.n = 0
        self.positions = np.zeros(8, dtype=np.int64)
        self.rows = np.zeros((8, width), dtype=np.int64)

    def add(self, position: int, dims: np.ndarray) -> None:
        n = self.n
        if n == len(self.positions):
            self.positions = np.concatenate([self.positions, np.zeros_like(self.positions)])
            self.rows = np.concatenate([self.rows, np.zeros_like(self.rows)])
        self.positions[n] = position
        if len(dims):
            self.rows[n] = dims
        self.n = n + 1


class SigIndex:
    """Earlier signatures as :func:`closest` compares them, grouped by layout (names and
    ranks) so the many alike ones are compared in one array operation: linear in the run's
    distinct signatures per question, not in their dims times a Python loop."""

    def __init__(self) -> None:
        self.entries: list[_Known] = []
        self.groups: dict[tuple[tuple[str, int], ...] | None, _Group] = {}

    def catch_up(self, previous: list[Signature]) -> None:
        """Take in the signatures appended to ``previous`` since the last call."""
        for k in range(len(self.entries), len(previous)):
            entry = _known(previous[k])
            self.entries.append(entry)
            group = self.groups.get(entry.layout)
            if group is None:
                group = self.groups[entry.layout] = _Group(len(entry.dims))
            group.add(k, entry.dims)


def _sig_distance(names: list[str], shapes: list[Shape], other_len: int, other: dict[str, Shape]) -> int:
    """How far a signature (its input ``names`` and ``shapes``) is from another (its length and
    input name -> shape): 10 for each input the other lacks or length apart, else
    :func:`~xprof.diagnosis.patterns.shape_distance` of the two shapes."""
    d = 10 * abs(len(names) - other_len)
    for name, shape in zip(names, shapes):
        was = other.get(name)
        if was is None:
            d += 10
        elif was != shape:  # (equal shapes are 0 apart)
            d += sum(map(ne, shape, was)) if len(shape) == len(was) else shape_distance(shape, was)
    return d


def fmt_shape(shape: Shape | None) -> str:
    return "?" if shape is None else "[" + ", ".join(str(s) for s in shape) + "]"
