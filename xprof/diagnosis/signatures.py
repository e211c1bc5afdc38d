"""Input signatures: the shapes, dtypes and sources of a step's inputs, and which earlier
signature is nearest (what changed)."""

from __future__ import annotations

from operator import ne
from typing import NamedTuple

import numpy as np

from xprof.diagnosis.patterns import Shape, changed_dims, shape_distance
from xprof.runfile import base_input_name

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
    prev = previous[index.nearest(sig)]
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


_FEW = 256
"""Up to this many earlier signatures, :meth:`SigIndex.nearest` measures the distance to each:
fewer array operations than narrowing them down first."""


class SigIndex:
    """Earlier signatures as :func:`closest` and the shape rules compare them, indexed as they
    come: by layout (names and ranks), so the many alike ones are compared in one array
    operation; by input name and rank, so that a signature's distance to every earlier one
    is a few array operations even when each has names of its own (thousands of distinct
    input names, issue 28); by the set of base names (:meth:`same_bases`); and by one
    (name, shape) of each (:meth:`within`)."""

    def __init__(self) -> None:
        self.few = _FEW
        """Up to this many earlier signatures, :meth:`nearest` is the argmin of :meth:`distances`."""
        self.entries: list[_Known] = []
        self.groups: dict[tuple[tuple[str, int], ...] | None, _Group] = {}
        self._len_of: list[int] = []
        """Each earlier signature's number of inputs."""
        self._lens = _Group(1)
        """Each earlier signature's number of inputs, as an array (row k: signature k)."""
        self._by_len: dict[int, list[int]] = {}
        """Number of inputs -> the earlier signatures with that many, in order."""
        self._by_name: dict[str, dict[int, _Group]] = {}
        """Input name -> rank -> the earlier signatures with that input, and its dims there."""
        self._plain = True
        """Every dim of every earlier signature an int64 (else distances are counted one by one)."""
        self.counts: list[dict[str, int]] = []
        """Each earlier signature's inputs per base name (micro-batches ``x#2`` count as ``x``)."""
        self.base_shapes: list[set[tuple[str, Shape]]] = []
        """Each earlier signature's (base name, shape)."""
        self._by_bases: dict[frozenset[str], list[int]] = {}
        self.items: list[dict[str, Shape]] = []
        """Each earlier signature's input name -> shape (the last of a name)."""
        self._seen_items: dict[tuple[str, Shape], int] = {}
        self._by_item: dict[tuple[str, Shape], list[int]] = {}
        """(name, shape) -> the earlier signatures it stands for: each has one, its rarest when it came."""
        self._with_item: dict[tuple[str, Shape], list[int]] = {}
        """(name, shape) -> every earlier signature with that input of that shape (the last of a name), in order."""

    def catch_up(self, previous: list[Signature]) -> None:
        """Take in the signatures appended to ``previous`` since the last call."""
        for k in range(len(self.entries), len(previous)):
            sig = previous[k]
            entry = _known(sig)
            self.entries.append(entry)
            group = self.groups.get(entry.layout)
            if group is None:
                group = self.groups[entry.layout] = _Group(len(entry.dims))
            group.add(k, entry.dims)
            self._add_by_name(k, sig, entry)
            counts: dict[str, int] = {}
            for n, _, _, _ in sig:
                b = base_input_name(n)
                counts[b] = counts.get(b, 0) + 1
            self.counts.append(counts)
            self.base_shapes.append({(base_input_name(n), tuple(shape)) for n, shape, _, _ in sig})
            self._by_bases.setdefault(frozenset(counts), []).append(k)
            self._add_items(k, sig)

    def _add_by_name(self, k: int, sig: Signature, entry: _Known) -> None:
        self._len_of.append(len(sig))
        self._lens.add(k, np.asarray([len(sig)], dtype=np.int64))
        self._by_len.setdefault(len(sig), []).append(k)
        if not self._plain:
            return
        for name, shape in entry.shapes.items():
            if not _int_dims(shape):
                self._plain = False
                return
            by_rank = self._by_name.setdefault(name, {})
            group = by_rank.get(len(shape))
            if group is None:
                group = by_rank[len(shape)] = _Group(len(shape))
            group.add(k, np.asarray(shape, dtype=np.int64))

    def _add_items(self, k: int, sig: Signature) -> None:
        items = {n: tuple(shape) for n, shape, _, _ in sig}
        self.items.append(items)
        if not items:
            return
        rarest = min(items.items(), key=lambda item: self._seen_items.get(item, 0))  # (the first of equals)
        self._by_item.setdefault(rarest, []).append(k)
        for item in items.items():
            self._seen_items[item] = self._seen_items.get(item, 0) + 1
            self._with_item.setdefault(item, []).append(k)

    def same_bases(self, bases: frozenset[str]) -> list[int]:
        """The earlier signatures (positions, in order) whose base names are exactly ``bases``."""
        return self._by_bases.get(bases, [])

    def within(self, items: dict[str, Shape]) -> list[int]:
        """The earlier signatures (positions, in order) that may have no input outside
        ``items`` (name -> shape): every one that has none is among them."""
        found: set[int] = set()
        for item in items.items():
            found.update(self._by_item.get(item, ()))
        return sorted(found)

    def nearest(self, sig: Signature) -> int:
        """The position of the earlier signature nearest to ``sig``, the first of equals: the
        argmin of :meth:`distances`, found from the signatures that share an input name with
        ``sig`` and, for the others (whose distance depends on their length alone), the first
        of each length; so a run of thousands of signatures with names of their own does not
        compare each with every earlier one."""
        names = [name for name, _, _, _ in sig]
        shapes = [shape for _, shape, _, _ in sig]
        n = len(self.entries)
        if n <= self.few or not (self._plain and all(_int_dims(shape) for shape in shapes)):
            return int(np.argmin(self.distances(sig)))  # (argmin: the first of equals)
        sizes = {name: sum(g.n for g in self._by_name.get(name, {}).values()) for name in names}
        if sum(sizes.values()) * 4 > n:
            # Most earlier signatures share a name with it (a ``labels`` in every one): those
            # names, if few, are compared by shape below; else one pass over all, in arrays.
            found = self._nearest_with_common(names, shapes, sizes)
            return int(np.argmin(self.distances(sig))) if found is None else found
        positions, cuts = [], []
        for name, shape in zip(names, shapes):
            for rank, group in self._by_name.get(name, {}).items():
                at = group.positions[:group.n]
                if rank == len(shape):
                    apart = (group.rows[:group.n] != np.asarray(shape, dtype=np.int64)).sum(axis=1)
                    cuts.append(10 - apart)
                else:
                    cuts.append(np.full(len(at), 10 - shape_distance(shape, (0,) * rank), dtype=np.int64))
                positions.append(at)
        size = len(names)
        best = (1 << 62, 1 << 62)  # (distance, position)
        shared: set[int] = set()
        if positions:
            pos, inverse = np.unique(np.concatenate(positions), return_inverse=True)
            cut = np.bincount(inverse, weights=np.concatenate(cuts)).astype(np.int64)
            shared = {int(p) for p in pos}
            lens = self._lens.rows[pos, 0]
            dist = 10 * np.abs(size - lens) + 10 * size - cut
            top = int(np.argmin(dist))  # (pos is sorted: the first of equals)
            best = (int(dist[top]), int(pos[top]))
        for length, ks in self._by_len.items():
            d = 10 * abs(size - length) + 10 * size
            if d > best[0]:
                continue
            first = next((p for p in ks if p not in shared), None)
            if first is not None and (d, first) < best:
                best = (d, first)
        return best[1]

    def _nearest_with_common(self, names: list[str], shapes: list[Shape],
                             sizes: dict[str, int]) -> int | None:
        """:meth:`nearest` where some of ``sig``'s names are in many earlier signatures (its
        common names), or None where this cannot tell it without a pass over all. The
        signatures that share a rare name are compared exactly; any other of length ``L``
        is at least ``10 |s - L| + 10 s - 10 c`` away (``c`` common names, each taking at most
        10 off), exactly that where every common name has the same shape (the first of
        those, by the index of (name, shape)), and more otherwise (other dims or rank
        always take less off)."""
        n = len(self.entries)
        if len(set(names)) != len(names):
            return None
        limit = max(64, n // 64)
        common = [i for i, name in enumerate(names) if sizes[name] > limit]
        rare = [i for i, name in enumerate(names) if 0 < sizes[name] <= limit]
        if not common or len(common) > 4 or sum(sizes[names[i]] for i in rare) * 4 > n:
            return None
        size = len(names)
        best = (1 << 62, 1 << 62)  # (distance, position)
        shared: set[int] = set()
        if rare:
            parts, cuts = [], []
            for i in rare:
                shape = shapes[i]
                for rank, group in self._by_name[names[i]].items():
                    parts.append(group.positions[:group.n])
                    cuts.append(_contrib(group, shape, rank, None))
            pos, inverse = np.unique(np.concatenate(parts), return_inverse=True)
            cut = np.bincount(inverse, weights=np.concatenate(cuts), minlength=len(pos)).astype(np.int64)
            for i in common:
                shape = shapes[i]
                for rank, group in self._by_name[names[i]].items():
                    at = group.positions[:group.n]
                    idx = np.minimum(np.searchsorted(at, pos), group.n - 1)
                    has = at[idx] == pos
                    cut[has] += _contrib(group, shape, rank, idx[has])
            shared = {int(p) for p in pos}
            dist = 10 * np.abs(size - self._lens.rows[pos, 0]) + 10 * size - cut
            top = int(np.argmin(dist))  # (pos is sorted: the first of equals)
            best = (int(dist[top]), int(pos[top]))
        # The others, by length: the first whose common inputs all have the same shapes.
        floor = {length: 10 * abs(size - length) + 10 * size - 10 * len(common) for length in self._by_len}
        wanted = {length for length, d in floor.items() if d <= best[0]}
        first: dict[int, int] = {}
        if wanted:
            lead = min(common, key=lambda i: len(self._with_item.get((names[i], tuple(shapes[i])), ())))
            items = [(names[i], tuple(shapes[i])) for i in common if i != lead]
            scanned = 0
            for k in self._with_item.get((names[lead], tuple(shapes[lead])), ()):
                scanned += 1
                if scanned > 4 * limit + len(shared):
                    return None
                length = self._len_of[k]
                if length in wanted and length not in first and k not in shared:
                    mine = self.items[k]
                    if all(mine.get(name) == shape for name, shape in items):
                        first[length] = k
                        if len(first) == len(wanted):
                            break
        for length in wanted:
            if length in first:
                best = min(best, (floor[length], first[length]))
        for length in wanted:
            # (none with the same shapes: the others are more than the floor away)
            if length not in first and floor[length] < best[0]:
                return None
        return best[1]

    def distances(self, sig: Signature) -> np.ndarray:
        """How far ``sig`` is from each earlier signature (:func:`_sig_distance`), in order."""
        n = len(self.entries)
        names = [name for name, _, _, _ in sig]
        shapes = [shape for _, shape, _, _ in sig]
        if not (self._plain and all(_int_dims(shape) for shape in shapes)):
            return self._distances_one_by_one(sig, names, shapes)
        lens = self._lens.rows[:n, 0]
        # Each input of ``sig`` costs 10 where the other lacks its name, else the dims apart.
        dist = 10 * np.abs(len(names) - lens) + 10 * len(names)
        for name, shape in zip(names, shapes):
            for rank, group in self._by_name.get(name, {}).items():
                at = group.positions[:group.n]
                if rank == len(shape):
                    apart = (group.rows[:group.n] != np.asarray(shape, dtype=np.int64)).sum(axis=1)
                    dist[at] -= 10 - apart
                else:
                    dist[at] -= 10 - shape_distance(shape, (0,) * rank)
        return dist

    def _distances_one_by_one(self, sig: Signature, names: list[str], shapes: list[Shape]) -> np.ndarray:
        """:meth:`distances` where some dim is not an int64 (an older file's symbolic size)."""
        mine = _known(sig)
        dist = np.zeros(len(self.entries), dtype=np.int64)
        for layout, group in self.groups.items():
            if mine.layout is not None and layout == mine.layout:
                # same inputs and ranks: the distance is how many dims differ
                dist[group.positions[:group.n]] = (group.rows[:group.n] != mine.dims).sum(axis=1)
            else:
                for k in group.positions[:group.n].tolist():
                    dist[k] = _sig_distance(names, shapes, self._len_of[k], self.entries[k].shapes)
        return dist


def _contrib(group: _Group, shape: Shape, rank: int, rows: np.ndarray | None) -> np.ndarray:
    """What an input of ``shape`` takes off the distance to each earlier signature of
    ``group`` (its name at ``rank``; ``rows``: those rows only): 10 less the dims apart."""
    m = group.n if rows is None else len(rows)
    if rank == len(shape):
        got = group.rows[:group.n] if rows is None else group.rows[rows]
        return 10 - (got != np.asarray(shape, dtype=np.int64)).sum(axis=1)
    return np.full(m, 10 - shape_distance(shape, (0,) * rank), dtype=np.int64)


def _int_dims(shape: Shape) -> bool:
    """Every dim of ``shape`` an int that fits an int64."""
    return all(type(d) is int and _LO <= d <= _HI for d in shape)


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
