"""Naming the tensors that feed a step, the way the user knows them.

A batch from a loader is flattened into named leaves: dict keys (``input_ids``), tuple
positions (``batch[0]``), namedtuple fields. A tensor moved to the device outside a
loader batch is named from the code that moved it: the key of the dict comprehension it
was moved in, or the variable it was assigned to (``x = torch.randn(8, 16).to(dev)``).
"""

from __future__ import annotations

import ast
import itertools
import linecache
import os
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from types import FrameType
from typing import Any

MAX_LEAVES = 64
MAX_DEPTH = 4


def dtype_name(dtype: Any) -> str:
    text = str(dtype)
    return text[6:] if text.startswith("torch.") else text


POSITION_NAMES = [f"batch[{i}]" for i in range(MAX_LEAVES)]


def all_tensors(values: Iterable[Any], tensor_type: type) -> bool:
    """Every one of ``values`` is a tensor (a C loop: no generator frame per batch)."""
    return all(map(isinstance, values, repeat(tensor_type)))


def flatten_batch(batch: Any, tensor_type: type) -> list[tuple[str, Any]]:
    """Named tensor leaves of a batch: ``[("input_ids", t), ("labels", t)]``."""
    # Fast paths for the usual batches (a flat dict, list or tuple of tensors): this runs
    # for every batch a loader yields.
    kind = type(batch)
    if kind is dict and len(batch) <= MAX_LEAVES:
        if all_tensors(batch.values(), tensor_type):
            return [(str(k), v) for k, v in batch.items()]
    elif (kind is list or kind is tuple) and len(batch) <= MAX_LEAVES:
        if all_tensors(batch, tensor_type):
            return list(zip(POSITION_NAMES, batch))
    elif isinstance(batch, tensor_type):
        return [("batch", batch)]
    out: list[tuple[str, Any]] = []

    def walk(obj: Any, name: str, depth: int) -> None:
        if len(out) >= MAX_LEAVES or depth > MAX_DEPTH:
            return
        if isinstance(obj, tensor_type):
            out.append((name, obj))
        elif isinstance(obj, Mapping):
            for key, value in obj.items():
                walk(value, str(key) if not name else f"{name}.{key}", depth + 1)
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
            for key, value in zip(obj._fields, obj):
                walk(value, str(key) if not name else f"{name}.{key}", depth + 1)
        elif isinstance(obj, (list, tuple)):
            base = name or "batch"
            for idx, value in enumerate(obj):
                walk(value, f"{base}[{idx}]", depth + 1)

    walk(batch, "", 0)
    if len(out) == 1 and out[0][0] == "":
        out[0] = ("batch", out[0][1])
    return out


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, (str, int)):
            base = _target_name(node.value) if isinstance(node.value, ast.expr) else None
            return str(key.value) if isinstance(key.value, str) else f"{base}[{key.value}]"
    return None


Slot = tuple[str, "str | None", int, int]
"""A tensor moved on a line with several: (name shown, variable it was in or None, first
and last column of the expression that moved it)."""

_LINE_NAMES: dict[tuple[str, int], str | tuple[Slot, ...]] = {}
"""A line's name, or, for a line that moves several tensors, each one's slot."""

_CALL_COLUMNS: dict[tuple[Any, int], tuple[int, int] | None] = {}
"""(code, instruction offset) -> the columns of the call running there, on its line."""


def name_from_line(filename: str, lineno: int, frame: FrameType | None = None, tensor: Any = None) -> str:
    """The variable a line assigns to, or ``file.py:LINE`` when there is no one name.

    A line that moves several tensors names each from ``frame`` (the frame running the
    move, holding ``tensor``): by the variable the moved tensor was in (``data, target =
    data.to(dev), target.to(dev)``), else by which of the line's moves is running, from
    the columns of the frame's current call (``x, y = torch.randn(n, 16).to(dev),
    torch.randn(n, 1).to(dev)``).
    """
    key = (filename, lineno)
    cached = _LINE_NAMES.get(key)
    if cached is None:
        cached = _LINE_NAMES[key] = _parse_line(filename, lineno)
    if isinstance(cached, str):
        return cached
    if frame is not None:
        local, glob = frame.f_locals, frame.f_globals
        for shown, moved, _, _ in cached:
            if moved is not None and (local[moved] if moved in local else glob.get(moved)) is tensor:
                return shown
        cols = _call_columns(frame)
        if cols is not None:
            for shown, _, start, end in cached:
                if start <= cols[0] and cols[1] <= end:
                    return shown
    return f"{os.path.basename(filename)}:{lineno}"


def _call_columns(frame: FrameType) -> tuple[int, int] | None:
    """Columns of the call ``frame`` is in, when it starts and ends on the frame's line."""
    code, at = frame.f_code, frame.f_lasti
    key = (code, at)
    if key in _CALL_COLUMNS:
        return _CALL_COLUMNS[key]
    cols = None
    try:
        pos = next(itertools.islice(code.co_positions(), at // 2, None), None)
    except (AttributeError, ValueError):  # no positions (python -X no_debug_ranges)
        pos = None
    if pos is not None and pos[0] == pos[1] == frame.f_lineno and pos[2] is not None and pos[3] is not None:
        cols = (pos[2], pos[3])
    _CALL_COLUMNS[key] = cols
    return cols


def _parse_line(filename: str, lineno: int) -> str | tuple[Slot, ...]:
    raw = linecache.getline(filename, lineno)
    text = raw.strip()
    if text:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = None
        if tree is not None and len(tree.body) > 1:
            # Several statements on the line (x = a.to(dev); y = b.to(dev)): each one's moves
            # by its own target, told apart by the columns of the running call.
            indent = len(raw) - len(raw.lstrip())
            each = [slot for stmt in tree.body for slot in _statement_slots(stmt, indent)]
            if len(each) == 1:
                return each[0][0]
            if each:
                return tuple(each)
        elif tree is not None and tree.body:
            indent = len(raw) - len(raw.lstrip())
            stmt = tree.body[0]
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                slots = _moved_slots(stmt.targets[0], stmt.value, indent)
                if slots:
                    return slots
                name = _target_name(stmt.targets[0])
                if name is not None and (_is_move(stmt.value) or not _moved_inside(stmt.value, indent)):
                    return name  # x = batch.to(dev), x = torch.randn(8, 16).to(dev)
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
                name = _target_name(stmt.target)
                if name is not None and (_is_move(stmt.value) or not _moved_inside(stmt.value, indent)):
                    return name
            # Moved inside a larger expression (loss = step(ids.to(dev), mask.to(dev)),
            # model(x.to(dev))): each by the variable it was in, not by what the line assigns.
            inside = _moved_inside(stmt, indent)
            if len(inside) == 1:
                return inside[0][0]
            if inside:
                return tuple(inside)
    return f"{os.path.basename(filename)}:{lineno}"


def _statement_slots(stmt: ast.stmt, indent: int) -> list[Slot]:
    """The slots of one statement of a line holding several: a tuple assignment's by
    position, an assignment's target when its value is the move, else each moved variable
    (as for a statement alone on its line)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        slots = list(_moved_slots(stmt.targets[0], stmt.value, indent))
        if slots:
            return slots
        name = _target_name(stmt.targets[0])
        if name is not None and _is_move(stmt.value):  # x = a.to(dev): the target is the tensor
            receiver = stmt.value.func.value  # type: ignore[attr-defined]
            return [(name, receiver.id if isinstance(receiver, ast.Name) else None, *_span(stmt.value, indent))]
        return _moved_inside(stmt.value, indent)  # loss = model(b.to(dev)): b, never loss
    return _moved_inside(stmt, indent)


_MOVES = frozenset({"to", "cuda"})


def _is_move(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MOVES)


def _span(node: ast.expr, indent: int) -> tuple[int, int]:
    end = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return node.col_offset + indent, end + indent


def _moved_inside(node: ast.AST | None, indent: int) -> list[Slot]:
    """The slot of each named tensor moved by a ``.to(...)`` call in ``node``:
    ``ids.to(dev)`` -> ``("ids", "ids", ...)``, ``batch.x.to(dev)`` -> ``("x", None, ...)``.
    A moved call result is named by its first argument when that is a variable
    (``torch.tensor(state).to(dev)`` -> ``state``), else it has none (``torch.randn(4)``)."""
    if node is None:
        return []
    out: list[Slot] = []
    for n in ast.walk(node):
        if _is_move(n):
            receiver = n.func.value  # type: ignore[attr-defined]
            name = _target_name(receiver)
            if name is None and isinstance(receiver, ast.Call) and receiver.args and isinstance(
                    receiver.args[0], ast.Name):
                # torch.tensor(state).to(dev), torch.from_numpy(obs).to(dev): the data's name
                name = receiver.args[0].id  # (that variable holds no tensor: looked up by column)
            if name is not None:
                out.append((name, receiver.id if isinstance(receiver, ast.Name) else None,
                            *_span(n, indent)))  # type: ignore[arg-type]
    return out


def _moved_slots(target: ast.expr, value: ast.expr | None, indent: int) -> tuple[Slot, ...]:
    """The slot of each named target of a tuple assignment, by position: ``x, y = a.to(d),
    torch.randn(4).to(d)`` -> x in a (or columns 7-14), y in columns 16-36."""
    if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)):
        return ()
    slots: list[Slot] = []
    for t, v in zip(target.elts, value.elts):
        name = _target_name(t)
        if name is not None and isinstance(v, ast.Call):
            moved = (v.func.value.id if isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name)
                     else None)
            slots.append((name, moved, *_span(v, indent)))
    return tuple(slots)


_UNPACKED: dict[tuple[str, int, int], tuple[str, ...] | None] = {}
"""(file, line, leaves) -> the names a batch of that many leaves is unpacked into there."""


def names_from_unpacking(filename: str, lineno: int, n: int) -> tuple[str, ...] | None:
    """The names a loader's batch of ``n`` tensors is unpacked into on a line: ``for x, y in
    loader:``, ``for i, (x, y) in enumerate(loader):``, ``(xu,) = next(it)``, ``for tok in
    loader:`` (a batch that is one tensor); None when the
    line unpacks no one tuple of ``n`` plain names (two loaders zipped with batches of one
    size: which is which is not on the line)."""
    key = (filename, lineno, n)
    if key in _UNPACKED:
        return _UNPACKED[key]
    found: tuple[str, ...] | None = None
    text = linecache.getline(filename, lineno).strip()
    target: ast.expr | None = None
    if text.startswith(("for ", "async for ")) and text.endswith(":"):
        try:
            stmt = ast.parse(text + " pass").body[0]
        except (SyntaxError, IndexError):
            stmt = None
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            target = stmt.target
    elif text:
        try:
            body = ast.parse(text).body
        except SyntaxError:
            body = []
        if len(body) == 1 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1:
            target = body[0].targets[0]
    if isinstance(target, ast.Name) and n == 1:
        found = (target.id,)  # for tok in loader: (a batch that is one tensor)
    elif target is not None:
        tuples = [t for t in ast.walk(target) if isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) == n
                  and all(isinstance(e, ast.Name) for e in t.elts)]
        if len(tuples) == 1:
            found = tuple(e.id for e in tuples[0].elts)  # type: ignore[attr-defined]
    _UNPACKED[key] = found
    return found


def name_from_comprehension(frame: FrameType) -> str | None:
    """In ``{k: v.to(dev) for k, v in batch.items()}``, the key being moved."""
    if frame.f_code.co_name != "<dictcomp>":
        return None
    for name, value in frame.f_locals.items():
        if name != ".0" and isinstance(value, str):
            return value
    return None


FIELD_LOCALS = ("key", "k", "field", "attr")
"""The loop variables a library's container walks its fields with (PyG's ``BaseStorage.apply``:
``for key, value in self.items()``)."""


def container_field(caller: FrameType, kind: Callable[[str], int], limit: int = 8) -> str | None:
    """The field a container's own ``.to`` is moving (``data.to(dev)`` on a PyG ``Batch``
    calls ``Tensor.to`` on each of ``x``, ``edge_index``, ``batch``...): a string loop variable
    of the library frames between the move and the user's line, innermost first. ``None``
    when there is none: the tensors then share the line's name, as one input moved again."""
    f: FrameType | None = caller
    for _ in range(limit):
        if f is None or kind(f.f_code.co_filename) == 0:
            return None
        local = f.f_locals
        for name in FIELD_LOCALS:
            value = local.get(name)
            if isinstance(value, str) and value:
                return value
        f = f.f_back
    return None
