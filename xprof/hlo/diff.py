"""What changed between two graphs, and at which user line: the diff behind ``--explain``.

Each op of a graph gets a structural key: its opcode, shape, attributes, a constant's
values and its operands' keys (names and parameter numbers stripped), so two graphs that
compute the same thing have the same keys whatever torch_xla named their instructions. An
op of the new graph whose key the old graph lacks, while each of its operands has a key the
old graph has, is where a change *starts* (a *root*); the ops after it differ only because
it did. The roots are paired with the old graph's own roots (the same user line and opcode
first) and said in a few words: ``slice 20 -> 24``, ``the constant 1 became an input``,
``concatenate of 4 -> 8 tensors``, ``12 ops added``.

An op's line is the first user frame of its Python stack (torch_xla records the stack of
each IR node under ``_set_ir_debug(True)``); ops of a backward pass have no stack and are
counted apart. Pure Python; imports no torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from xprof.hlo.reader import Frame, Graph, Op, Shape

MAX_LINES = 3
"""User lines said per graph change, in graph order."""

_PASS_THROUGH = {"broadcast", "reshape", "convert", "copy", "bitcast", "transpose"}
"""Ops that carry a value unchanged in kind: an operand is said by what is under them."""

CHANGE_KINDS = ("bound", "constant", "grows", "added", "removed", "shape", "value", "ops")
"""What kind of change a line made: a slice bound (``bound``), a Python number that is a
constant in one graph and an input in the other (``constant``), a list stacked or
concatenated with more or fewer tensors (``grows``), ops added or removed (control flow),
a shape set from Python (``shape``), a constant's value (``value``), other ops (``ops``)."""


_PRIORITY = {kind: k for k, kind in enumerate(("bound", "constant", "grows", "added", "shape", "removed"))}
"""The order lines are said in: changes a Python value makes first; a constant's new value
(often a shape's size, the divisor of a mean) and other ops last."""


@dataclass
class LineChange:
    """The change that starts at one user line."""

    file: str
    line: int
    func: str
    what: str
    """In a few words: ``slice 20 -> 24``, ``the constant 1 became an input``."""
    kind: str
    """One of :data:`CHANGE_KINDS`."""
    op: str
    """The opcode of the first op that changed there."""
    ops: int = 1
    """Ops of the new graph that changed with their first user frame at this line."""
    code: str = ""

    def as_record(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "func": self.func, "what": self.what, "kind": self.kind,
                "op": self.op, "ops": self.ops, "code": self.code}


@dataclass
class GraphDiff:
    """What changed from an earlier graph to a new one."""

    lines: list[LineChange] = field(default_factory=list)
    """The user lines where changes start, in graph order (at most :data:`MAX_LINES`)."""
    more_lines: int = 0
    """User lines left out past :data:`MAX_LINES`."""
    backward: int = 0
    """Changed ops with no Python frame (a backward pass: autograd runs them from C++)."""
    library: int = 0
    """Changed ops whose frames are all in libraries (no user frame on the way)."""
    changed: int = 0
    """Ops of the new graph whose key the old graph lacks."""


def keys(graph: Graph) -> list[int]:
    """The structural key of each op (see the module's docstring), in op order."""
    out: list[int] = []
    for op in graph.ops:
        literal = _stable(op.literal) if op.opcode == "constant" else None
        out.append(hash((op.opcode, op.shape, op.attrs, literal, tuple(out[k] for k in op.operands))))
    return out


def _stable(literal: tuple[float | int | bool, ...] | None) -> tuple[object, ...] | None:
    """A constant's values as a key: NaN hashes by identity in Python, so it is said as text."""
    if literal is None:
        return None
    return tuple("nan" if isinstance(v, float) and v != v else v for v in literal)


def distance(a: list[int], b: list[int]) -> int:
    """Ops in one graph's keys and not the other's (the closest earlier graph has fewest)."""
    ca, cb = Counter(a), Counter(b)
    return sum(((ca - cb) + (cb - ca)).values())


def user_frame(frames: tuple[Frame, ...], is_user: Callable[[str], bool]) -> Frame | None:
    """The innermost frame in the user's code."""
    for f in frames:
        if is_user(f.file):
            return f
    return None


def _number(v: float | int | bool) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _origin(graph: Graph, k: int) -> Op:
    """What an operand is under the ops that only carry it (a broadcast constant)."""
    op = graph.ops[k]
    for _ in range(8):
        if op.opcode not in _PASS_THROUGH or len(op.operands) != 1:
            break
        op = graph.ops[op.operands[0]]
    return op


def _said(op: Op) -> str:
    if op.opcode == "parameter":
        return "an input"
    if op.opcode == "constant" and op.literal:
        return f"the constant {_number(op.literal[0])}" if len(op.literal) == 1 else "a constant"
    return f"a {op.opcode}"


def _constant_change(was: Op, now: Op) -> str | None:
    """A Python number that is an input in one graph and a constant in the other."""
    kinds = {was.opcode, now.opcode}
    if kinds != {"parameter", "constant"}:
        return None
    if now.opcode == "parameter":
        return f"{_said(was)} became an input"
    return f"an input became {_said(now)}"


def _slice_change(was: Op, now: Op) -> str | None:
    a = dict(x for x in was.attrs if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str))
    b = dict(x for x in now.attrs if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str))
    sa, sb = a.get("slice"), b.get("slice")
    if not isinstance(sa, tuple) or not isinstance(sb, tuple) or len(sa) != len(sb):
        return None
    for (s0, l0, st0), (s1, l1, st1) in zip(sa, sb):
        if s0 != s1 and l1 - s1 == l0 - s0:
            return f"slice start {s0} -> {s1}"
        if (s0, l0, st0) != (s1, l1, st1):
            if s0 == s1 and st0 == st1:
                return f"slice {l0 - s0} -> {l1 - s1}"
            return f"slice [{s0}:{l0}:{st0}] -> [{s1}:{l1}:{st1}]"
    return None


def _bound(was: Shape, now: Shape) -> str:
    """A slice that one graph has and the other does not (a slice to the full length is no
    op): the length it cut to, from or to the full one."""
    for a, b in zip(was.dims, now.dims):
        if a != b:
            return f"slice {a} -> {b}"
    return f"slice {was} -> {now}"


def describe(old: Graph, was: Op | None, new: Graph, now: Op | None) -> tuple[str, str]:
    """(what changed, its kind) from ``was`` (old graph) to ``now`` (new graph)."""
    if was is None and now is not None:
        if now.opcode == "slice" and now.operands:
            return _bound(new.ops[now.operands[0]].shape, now.shape), "bound"
        return f"{now.opcode} added", "added"
    if now is None and was is not None:
        if was.opcode == "slice" and was.operands:
            return _bound(was.shape, old.ops[was.operands[0]].shape), "bound"
        return f"{was.opcode} removed", "removed"
    assert was is not None and now is not None
    const = _constant_change(was, now)
    if const is not None:
        return const, "constant"
    if was.opcode != now.opcode:
        return f"{was.opcode} became {now.opcode}", "ops"
    if was.opcode == "slice":
        said = _slice_change(was, now)
        if said is not None:
            return said, "bound"
    if was.opcode == "constant" and was.literal != now.literal:
        return f"the constant {_number((was.literal or (0,))[0])} -> {_number((now.literal or (0,))[0])}", "value"
    if len(was.operands) != len(now.operands):
        kind = "grows" if was.opcode in ("concatenate", "tuple") else "ops"
        return f"{was.opcode} of {len(was.operands)} -> {len(now.operands)} tensors", kind
    for ka, kb in zip(was.operands, now.operands):
        oa, ob = _origin(old, ka), _origin(new, kb)
        const = _constant_change(oa, ob)
        if const is not None:
            return const, "constant"
        if oa.opcode == ob.opcode == "constant" and oa.literal != ob.literal and oa.literal and ob.literal:
            return f"the constant {_number(oa.literal[0])} -> {_number(ob.literal[0])}", "value"
    if was.shape != now.shape:
        kind = "bound" if was.opcode in ("slice", "dynamic-slice") else "shape"
        return f"{was.opcode} {was.shape} -> {now.shape}", kind
    if was.attrs != now.attrs:
        return f"{was.opcode} attributes changed", "ops"
    return f"{was.opcode} changed", "ops"


def _roots(graph: Graph, mine: list[int], theirs: set[int]) -> list[int]:
    """Ops whose key ``theirs`` lacks while every operand's key it has."""
    return [k for k, op in enumerate(graph.ops)
            if mine[k] not in theirs and all(mine[j] in theirs for j in op.operands)]


Where = tuple[str, int]


def _where(op: Op, is_user: Callable[[str], bool]) -> Where | None:
    f = user_frame(op.frames, is_user)
    return (f.file, f.line) if f is not None else None


def _func(op: Op, is_user: Callable[[str], bool]) -> str:
    f = user_frame(op.frames, is_user)
    return f.func if f is not None else ""


def diff(old: Graph, new: Graph, is_user: Callable[[str], bool],
         old_keys: list[int] | None = None, new_keys: list[int] | None = None) -> GraphDiff:
    """Where ``new`` starts to differ from ``old``, by user line (see the module)."""
    ka = old_keys if old_keys is not None else keys(old)
    kb = new_keys if new_keys is not None else keys(new)
    sa, sb = set(ka), set(kb)
    out = GraphDiff()
    # Every changed op of the new graph counts at its line (or as backward/library).
    per_line: Counter[Where] = Counter()
    for k, op in enumerate(new.ops):
        if kb[k] in sa or op.opcode in ("tuple", "parameter"):
            continue
        out.changed += 1
        where = _where(op, is_user)
        if where is not None:
            per_line[where] += 1
        elif op.frames:
            out.library += 1
        else:
            out.backward += 1
    # The old graph's roots by line, to pair with the new graph's.
    removed: dict[tuple[Where | None, str], list[Op]] = {}
    for k in _roots(old, ka, sb):
        op = old.ops[k]
        if op.opcode == "tuple":
            continue
        removed.setdefault((_where(op, is_user), op.opcode), []).append(op)
    by_line: dict[Where, LineChange] = {}
    for k in _roots(new, kb, sa):
        op = new.ops[k]
        where = _where(op, is_user)
        if where is None or op.opcode == "tuple" or where in by_line:
            continue
        pair = removed.get((where, op.opcode))
        was = pair.pop(0) if pair else None
        if was is None and op.opcode in ("parameter", "constant"):
            other = "constant" if op.opcode == "parameter" else "parameter"
            pair = removed.get((where, other))
            was = pair.pop(0) if pair else None
        what, kind = describe(old, was, new, op)
        if kind == "added":
            n = per_line.get(where, 1)
            what = f"{n} ops added" if n > 1 else what
        by_line[where] = LineChange(where[0], where[1], _func(op, is_user), what, kind, op.opcode,
                                    per_line.get(where, 1))
    # Lines only the old graph had: ops removed there (said when nothing was added: ops
    # added upstream leave the old graph's ops that used the old values behind as roots too).
    pure = all(c.kind in ("bound", "removed") for c in by_line.values())
    for (where, opcode), ops in removed.items():
        if where is None or where in by_line or not ops or not (pure or opcode == "slice"):
            continue
        if opcode == "slice":
            by_line[where] = LineChange(where[0], where[1], _func(ops[0], is_user),
                                        describe(old, ops[0], new, None)[0], "bound", opcode, len(ops))
            continue
        n = sum(1 for k, op in enumerate(old.ops) if ka[k] not in sb and _where(op, is_user) == where)
        by_line[where] = LineChange(where[0], where[1], _func(ops[0], is_user),
                                    f"{n} ops removed" if n > 1
                                    else f"{opcode} removed", "removed", opcode, n)
    # The changes a person acts on first (a slice bound, a Python number), then graph order.
    lines = sorted(by_line.values(), key=lambda c: _PRIORITY.get(c.kind, len(_PRIORITY)))
    out.lines = lines[:MAX_LINES]
    out.more_lines = max(0, len(lines) - MAX_LINES)
    return out
