"""Small pattern helpers: periodicity of events, shape differences, bucketing what-ifs."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Sequence

Shape = tuple[int, ...]


def period(ordinals: Sequence[int]) -> int | None:
    """N when events happen every N steps (at least three events, gaps all equal)."""
    if len(ordinals) < 3:
        return None
    gaps = {b - a for a, b in zip(ordinals, ordinals[1:])}
    if len(gaps) == 1:
        gap = gaps.pop()
        return gap if gap > 1 else None
    return None


def describe_period(ordinals: Sequence[int]) -> str | None:
    n = period(ordinals)
    if n is not None:
        return f"every {n} steps"
    if len(ordinals) >= 3:
        gaps = Counter(b - a for a, b in zip(ordinals, ordinals[1:]))
        gap, count = gaps.most_common(1)[0]
        if gap > 1 and count >= 0.75 * (len(ordinals) - 1):
            return f"about every {gap} steps"
    return None


def shape_distance(a: Shape, b: Shape) -> int:
    """Number of differing dimensions (rank changes count as all dims differing)."""
    if len(a) != len(b):
        return max(len(a), len(b)) + 1
    return sum(1 for x, y in zip(a, b) if x != y)


def changed_dims(a: Shape, b: Shape) -> list[int]:
    if len(a) != len(b):
        return list(range(max(len(a), len(b))))
    return [d for d, (x, y) in enumerate(zip(a, b)) if x != y]


def bucket(value: int, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def bucketing_what_if(lengths: Sequence[int], compile_s_each: float, current_seconds: float,
                      with_rest: Collection[tuple[int, Hashable]] | None = None,
                      tokens: bool = True, rest_dim: int | None = None,
                      warm: Collection[int] = (), compiles_each: float = 1.0) -> list[dict[str, object]]:
    """Graphs and recompile seconds left by padding the varying dim to multiples or to the max.

    ``lengths`` are the per-step values of the dimension. ``graphs`` is the number of
    distinct shapes; ``compile_s_each`` what one more shape cost in the run (all the graphs
    it compiled); ``compile_seconds`` what the shapes after the first would cost at that
    rate, less those warm-up pays for anyway (``warm``: the values of the two warm-up steps;
    none given: the first length);
    ``padding_waste`` the extra elements computed, relative to what was used.

    ``with_rest``: each distinct (length, what else the graph depends on) a step had, when
    more than the length changes (a token budget's batch size, a seq2seq batch's labels
    padded on their own): ``graphs`` then counts what padding the length alone leaves,
    the rest as recorded, and one more graph costs ``current_seconds`` over the recorded
    graphs after the first. ``rest_dim``: the other inputs (``with_rest``'s keys, as
    ``(name, shape)`` pairs) are padded the same way along that dim too (labels padded to the
    same multiple, or each to its own largest size). ``tokens``: the strategies in a
    tokenizer's words (``pad_to_multiple_of=8``); else plain ones (``a multiple of 8``).
    ``compiles_each``: the compiles one more graph cost in the run (its step graph, and its
    reads' where they compile for the shape too): ``recompiles`` counts the compiles a row
    leaves after warm-up at that rate.
    """
    if not lengths:
        return []
    # Computed over the distinct lengths and their counts: the same integer sums as going
    # through every step, without a bucket() call per step and strategy.
    counts = Counter(lengths)
    used = float(sum(lengths))
    top_of = _rest_tops(with_rest, rest_dim) if with_rest and rest_dim is not None else {}

    def graphs_of(padded: dict[int, int], m: int | None = None, pad_rest: bool = False) -> int:
        if not with_rest:
            return len(set(padded.values()))
        return len({(padded.get(v, v), _rest_padded(rest, m, rest_dim, top_of) if pad_rest else rest)
                    for v, rest in with_rest})

    def warm_graphs(pad: Callable[[int], int]) -> int:
        """Graphs warm-up compiles anyway: those of the warm-up steps' values, padded alike
        (one when no values are given: the first length's)."""
        if not warm:
            return 1
        return max(len({pad(v) for v in warm} & {pad(v) for v in counts}), 1)

    recorded = graphs_of({v: v for v in counts})
    if with_rest:
        compile_s_each = current_seconds / max(recorded - warm_graphs(lambda v: v), 1)
    out: list[dict[str, object]] = [{
        "strategy": "as recorded",
        "graphs": recorded,
        "compile_seconds": round(current_seconds, 3),
        "saved_seconds": 0.0,
        "padding_waste": 0.0,
        "recompiles": round(max(recorded - warm_graphs(lambda v: v), 0) * compiles_each),
    }]
    for m in (8, 16, 32, 64):
        padded = {v: bucket(v, m) for v in counts}
        padded_sum = sum(padded[v] * n for v, n in counts.items())
        label = f"pad_to_multiple_of={m}" if tokens else f"a multiple of {m}"
        out.append(_row(label, graphs_of(padded, m, True), warm_graphs(functools.partial(bucket, multiple=m)),
                        compile_s_each, current_seconds, padded_sum / used - 1.0, compiles_each))
    top = max(lengths)
    label = f"padding='max_length' (max_length={top})" if tokens else f"the largest size ({top})"
    out.append(_row(label, graphs_of({v: top for v in counts}, None, True), 1,
                    compile_s_each, current_seconds, top * len(lengths) / used - 1.0, compiles_each))
    return out


def _rest_tops(with_rest: Collection[tuple[int, Hashable]], rest_dim: int) -> dict[str, int]:
    """Each other input's largest size along ``rest_dim`` (what padding it to its largest gives)."""
    top_of: dict[str, int] = {}
    for _, key in with_rest:
        for name, shape in key:  # type: ignore[attr-defined]
            if name and len(shape) > rest_dim and shape[rest_dim] >= 0:
                top_of[name] = max(top_of.get(name, 0), shape[rest_dim])
    return top_of


def _rest_padded(key: Hashable, m: int | None, rest_dim: int | None, top_of: dict[str, int]) -> Hashable:
    """The other inputs' shapes (``key``: (name, shape) pairs) padded along ``rest_dim`` to a
    multiple of ``m``, or (``m`` None) each to its largest size."""
    if rest_dim is None:
        return key
    out = []
    for name, shape in key:  # type: ignore[attr-defined]
        if name and len(shape) > rest_dim and shape[rest_dim] >= 0:
            v = bucket(shape[rest_dim], m) if m else top_of[name]
            shape = shape[:rest_dim] + (v,) + shape[rest_dim + 1:]
        out.append((name, shape))
    return tuple(out)


def _row(strategy: str, graphs: int, warm: int, each: float, current: float, waste: float,
         compiles_each: float) -> dict[str, object]:
    seconds = max(graphs - warm, 0) * each
    return {
        "strategy": strategy,
        "graphs": graphs,
        "compile_seconds": round(seconds, 3),
        "saved_seconds": round(max(current - seconds, 0.0), 3),
        "padding_waste": round(waste, 4),
        "recompiles": round(max(graphs - warm, 0) * compiles_each),
    }
