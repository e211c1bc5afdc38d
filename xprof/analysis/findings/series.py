"""An input's shapes over the steady steps, kept per signature: what the shape findings read."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.steps import phase_is
from xprof.diagnosis.signatures import Signature
from xprof.runfile import base_input_name


@dataclass
class Series:
    """(ordinal, shape) of input ``name`` for every steady step that ran a graph (each
    micro-batch's ``name#k`` too), kept per signature: a long run has a million steps and
    a few dozen signatures. The series is, step by step, each shape of the step's group."""

    ords: np.ndarray
    """Ordinal of each steady step whose signature holds the input, in step order."""
    which: np.ndarray
    """That step's group (an index into ``groups``)."""
    groups: list[list[tuple[int, ...]]]
    """The input's shapes in each signature, in input order."""
    rests: list[tuple[tuple[str, tuple[int, ...]], ...]] = field(default_factory=list)
    """The other inputs' (name, shape) in each signature: what else a graph depends on."""
    first: list[tuple[int, ...]] = field(default_factory=list)
    """The input's shapes in the first step (ordinal 0, left out of the series as a one-off
    graph), for counting the steps of a stage it began."""

    sizes0: dict[str, set[int]] | None = None
    """Each input's sizes along dim 0 over every steady signature, the ones without this
    input too (:meth:`other_free_size`); None: from ``rests``, which then hold every group."""

    @classmethod
    def of(cls, name: str, steps: pd.DataFrame, sigs: dict[int, Signature]) -> Series:
        """The series of input ``name`` (one question: :class:`SeriesIndex` answers many)."""
        return SeriesIndex(steps, sigs).series(name)

    def rows_shared(self) -> bool | None:
        """Whether the input's dim 0 is a batch's rows: another input had the same size there
        in every signature (``input_ids`` and ``labels``); False for a graph's node features
        beside its edge list, whose dim 0 no other input shares; None with no other input."""
        common: set[str] | None = None
        for shapes, rest in zip(self.groups, self.rests):
            others = [(n, s) for n, s in rest if s]
            if not shapes or not shapes[0] or not others:
                continue
            same = {n for n, s in others if s[0] == shapes[0][0]}
            common = same if common is None else common & same
        return None if common is None else bool(common)

    def rows_kept_beside(self) -> str | None:
        """Another input in every signature of this one whose dim 0 kept one size of more than
        two rows while this input's took three or more: a batch's rows change in every input
        that holds them, so this dim is a size of its own (a packed batch: a graph batch's node
        features, the six graphs' nodes together, beside its labels y [6] and offsets ptr [7]).
        Its name, or None. (Two rows or fewer stay out: an edge list's [2, E], a [1, L].)"""
        if len({shapes[0][0] for shapes in self.groups if shapes and shapes[0]}) < 3:
            return None
        kept: dict[str, set[int]] | None = None
        for rest in self.rests:
            here: dict[str, set[int]] = {}
            for n, shape in rest:
                if shape:
                    here.setdefault(n, set()).add(shape[0])
            kept = here if kept is None else {n: kept[n] | here[n] for n in kept.keys() & here.keys()}
        fixed = sorted(n for n, sizes in (kept or {}).items() if len(sizes) == 1 and min(sizes) > 2)
        return fixed[0] if fixed else None

    def other_free_size(self) -> str | None:
        """Another input whose dim 0 takes 3 or more sizes apart from this input's (in some
        signature the two differ): two sizes that change on their own each step are a
        structure's (a graph's nodes and its edges), not one batch's rows. Its name, or None."""
        mine = [shapes[0][0] if shapes and shapes[0] else None for shapes in self.groups]
        sizes: dict[str, set[int]] = {} if self.sizes0 is None else self.sizes0
        apart: set[str] = set()
        for own, rest in zip(mine, self.rests):
            for n, shape in rest:
                if shape:
                    if self.sizes0 is None:
                        sizes.setdefault(n, set()).add(shape[0])
                    if own is not None and shape[0] != own:
                        apart.add(n)
        free = sorted(n for n in apart if len(sizes[n]) >= 3)
        return free[0] if free else None

    def with_rest(self, dim: int) -> set[tuple[int, tuple[tuple[str, tuple[int, ...]], ...]]]:
        """Each distinct (size along ``dim``, everything else a graph depends on) that a
        step had: the graphs that padding this input's ``dim`` would still tell apart.

        Everything else is this input's other dims (``""``: a token budget's batch size) and
        the other inputs' shapes, where a size at index ``dim`` equal to this input's is
        padded with it (-1): an attention mask or a causal LM's labels are padded by the
        same collate call; a seq2seq batch's labels, padded to their own longest, are not.
        """
        out = set()
        for g, rest in zip(self.groups, self.rests):
            for s in g:
                if len(s) > dim:
                    n = s[dim]
                    key = (("", _padded_with(s, dim, n)),) + tuple((r, _padded_with(t, dim, n)) for r, t in rest)
                    out.add((n, key))
        return out

    def stages(self, dim: int) -> list[tuple[int, int]] | None:
        """(size, steps) of each run of one size along ``dim``, in step order, when every size
        came in one run of steps (a curriculum's stages: 16 for 8 steps, then 32, then 48);
        None when a size came back or there is one run."""
        per_group = [g[0][dim] if g and len(g[0]) > dim else None for g in self.groups]
        runs: list[list[Any]] = []
        for w in self.which.tolist():
            v = per_group[w]
            if runs and runs[-1][0] == v:
                runs[-1][1] += 1
            else:
                runs.append([v, 1])
        if len(runs) < 2 or None in {v for v, _ in runs} or len({v for v, _ in runs}) != len(runs):
            return None
        if self.first and len(self.first[0]) > dim and self.first[0][dim] == runs[0][0]:
            runs[0][1] += 1  # the first step began the first stage
        return [(int(v), int(n)) for v, n in runs]

    def shapes(self) -> list[tuple[int, ...]]:
        """Distinct shapes in order of first appearance."""
        return list(dict.fromkeys(shape for g in self.groups for shape in g))

    def _per_step(self, pick: Callable[[tuple[int, ...]], bool]) -> np.ndarray:
        """How many shapes of each step's group ``pick`` takes."""
        per_group = np.asarray([sum(1 for s in g if pick(s)) for g in self.groups], dtype=np.int64)
        return per_group[self.which] if len(per_group) else np.zeros(0, dtype=np.int64)

    def value_counts(self, dim: int) -> Counter[int]:
        """Counts of the shapes' size along ``dim`` over the series, in order of first appearance."""
        steps_in = np.bincount(self.which, minlength=len(self.groups))
        out: Counter[int] = Counter()
        for g, n in zip(self.groups, steps_in.tolist()):
            if n:
                for s in g:
                    if len(s) > dim:
                        out[s[dim]] += n
        return out

    def ordinals_where(self, pick: Callable[[tuple[int, ...]], bool]) -> list[int]:
        """The ordinal of every series entry whose shape ``pick`` takes, in series order."""
        return np.repeat(self.ords, self._per_step(pick)).tolist()

    def warm_values(self, dim: int, first_one_off: bool = False) -> list[int]:
        """The input's sizes along ``dim`` in the warm-up steps (0 and 1): graphs a loop pays
        for whatever it pads to. ``first_one_off``: step 0's graph is not the steady one (it
        made the optimizer's state), so only step 1's size is a steady graph paid for."""
        at_one = [s for k in np.flatnonzero(self.ords == 1).tolist() for s in self.groups[int(self.which[k])]]
        return [s[dim] for s in [*([] if first_one_off else self.first), *at_one] if len(s) > dim]

    def values(self, dim: int) -> list[int]:
        """Each series entry's size along ``dim`` (entries of lower rank left out), as counts allow:
        the order is not the series' (callers count them)."""
        counts = self.value_counts(dim)
        return np.repeat(np.asarray(list(counts), dtype=np.int64), list(counts.values())).tolist()



def _padded_with(shape: tuple[int, ...], dim: int, n: int) -> tuple[int, ...]:
    """``shape`` with its size at ``dim`` marked -1 when it is ``n`` (padded alike)."""
    return shape[:dim] + (-1,) + shape[dim + 1:] if len(shape) > dim and shape[dim] == n else shape



def still_varying(with_rest: set[tuple[int, tuple[tuple[str, tuple[int, ...]], ...]]]) -> list[str]:
    """What in ``with_rest``'s keys still changes once the padded dim is padded: ``""`` for
    the input's own other dims, else the other inputs' names (in name order)."""
    seen: dict[str, set[tuple[int, ...]]] = {}
    for _, key in with_rest:
        for name, shape in key:
            seen.setdefault(base_input_name(name), set()).add(shape)
    return sorted(n for n, v in seen.items() if len(v) > 1)


def _first_step_one_off(steps: pd.DataFrame) -> bool:
    """Step 0's barrier graph is not step 1's (another size: it made the optimizer's state),
    so a length first seen at step 0 compiles again at its next step."""
    train = phase_is(steps, "train") & steps["work"].to_numpy(dtype=bool)
    ordinal = steps["ordinal"].to_numpy()
    nodes = steps["graph_nodes"].to_numpy(dtype=np.float64, na_value=np.nan)
    first, second = (nodes[train & (ordinal == k)] for k in (0, 1))
    first, second = first[~np.isnan(first)], second[~np.isnan(second)]
    return bool(len(first) and len(second) and int(first[-1]) != int(second[-1]))


class SeriesIndex:
    """The run's steady steps and signatures indexed once, so that the series of each of
    many inputs costs what that input's own signatures and steps hold: a run with thousands
    of distinct input names (each in a few signatures) stays linear, where reading every
    signature and every step for each input was quadratic (issue 28).

    A series from here holds only the groups (signatures) that have the input, in order of
    first appearance: the others add nothing to it but their dim-0 sizes, kept run-wide in
    ``sizes0``. The signatures' inputs by name (:meth:`entries`) serve the shape findings too.
    """

    def __init__(self, steps: pd.DataFrame, sigs: dict[int, Signature]) -> None:
        self._steps = steps
        self._sigs = sigs
        self._entries: dict[str, list[tuple[int, str, Any, str, str]]] = {}
        for sig_id, inputs in sigs.items():
            for n, shape, dtype, src in inputs:
                self._entries.setdefault(base_input_name(n), []).append((sig_id, n, shape, dtype, src))
        sig_col = steps["sig"]
        work = steps["work"].to_numpy(dtype=bool) & sig_col.notna().to_numpy(dtype=bool)
        ordinal = steps["ordinal"].to_numpy()
        keep = work & (ordinal >= 1)
        sig = sig_col.to_numpy(dtype=np.int64, na_value=-1)
        self._ords = ordinal[keep]
        self._codes, uniques = pd.factorize(sig[keep])  # groups in order of first appearance
        self._group_of = {int(u): k for k, u in enumerate(uniques.tolist())}
        order = np.argsort(self._codes, kind="stable")
        bounds = np.searchsorted(self._codes[order], np.arange(len(uniques) + 1))
        self._steps_of = [order[bounds[k]:bounds[k + 1]] for k in range(len(uniques))]
        first_sig = sig[work & (ordinal == 0)]
        self._first_sig = int(first_sig[0]) if len(first_sig) else None
        self.sizes0: dict[str, set[int]] = {}
        for u in uniques.tolist():
            for n, shape, _, _ in sigs.get(int(u), ()):
                if shape:
                    self.sizes0.setdefault(n, set()).add(shape[0])

    @functools.cached_property
    def first_step_one_off(self) -> bool:
        """Step 0's barrier graph is not step 1's (see :meth:`Series.warm_values`): read once
        for the run, not once per input."""
        return _first_step_one_off(self._steps)

    def entries(self, name: str) -> list[tuple[int, str, Any, str, str]]:
        """(signature id, input name, shape, dtype, source) of each input of base name
        ``name`` (``x`` and its micro-batches ``x#2``...), in signature and input order."""
        return self._entries.get(name, [])

    def series(self, name: str) -> Series:
        """The series of input ``name`` over the steady steps (see :class:`Series`)."""
        shapes: dict[int, list[Any]] = {}
        for sig_id, _, shape, _, _ in self.entries(name):
            shapes.setdefault(sig_id, []).append(shape)
        mine = sorted(k for k in (self._group_of.get(sig_id) for sig_id in shapes) if k is not None)
        sig_of = {k: sig_id for sig_id, k in ((s, self._group_of.get(s)) for s in shapes) if k is not None}
        groups = [shapes[sig_of[k]] for k in mine]
        rests = [tuple(sorted((n, tuple(shape)) for n, shape, _, _ in self._sigs[sig_of[k]]
                              if base_input_name(n) != name)) for k in mine]
        at = (np.sort(np.concatenate([self._steps_of[k] for k in mine])) if mine
              else np.zeros(0, dtype=np.int64))
        which = np.searchsorted(np.asarray(mine, dtype=np.int64), self._codes[at])  # (mine is sorted)
        first = shapes.get(self._first_sig, []) if self._first_sig is not None else []
        return Series(self._ords[at], which, groups, rests, first, self.sizes0)
