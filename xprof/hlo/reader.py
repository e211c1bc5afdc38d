"""Reading an XLA ``HloModuleProto`` (what ``torch_xla._XLAC._get_xla_tensors_hlo_proto``
returns) without protobuf: a small reader of the wire format and the few fields a graph diff
needs. Pure Python; imports no torch.

Field numbers are those of OpenXLA's ``xla/service/hlo.proto`` and ``xla/xla_data.proto``:

- ``HloModuleProto``: ``entry_computation_id`` 6, ``computations`` 3, ``stack_frame_index`` 17;
- ``HloComputationProto``: ``instructions`` 2, ``id`` 5;
- ``HloInstructionProto``: ``opcode`` 2, ``shape`` 3, ``metadata`` 7, ``literal`` 8,
  ``parameter_number`` 9, ``dimensions`` 14, ``slice_dimensions`` 17 (``start`` 1,
  ``limit`` 2, ``stride`` 3), ``id`` 35, ``operand_ids`` 36, ``called_computation_ids`` 38,
  ``comparison_direction`` 63;
- ``ShapeProto``: ``element_type`` 2, ``dimensions`` 3, ``tuple_shapes`` 4;
- ``OpMetadata``: ``op_type`` 1, ``stack_frame_id`` 15;
- ``LiteralProto``: ``shape`` 1, ``preds`` 2, ``s32s`` 4, ``s64s`` 5, ``u32s`` 6, ``u64s`` 7,
  ``f32s`` 8, ``f64s`` 9 (the 16-bit kinds as little-endian bytes: ``f16s`` 11, ``bf16s`` 13);
- ``StackFrameIndexProto``: ``file_names`` 1, ``function_names`` 2, ``file_locations`` 3
  (``file_name_id`` 1, ``function_name_id`` 2, ``line`` 3), ``stack_frames`` 4
  (``file_location_id`` 1, ``parent_frame_id`` 2); ids are 1-based, 0 is unset.

A field this reader does not know is skipped by its wire type, so a newer proto reads the
same. Malformed bytes raise :class:`HloError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

PRIMITIVE = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32",
             9: "u64", 10: "f16", 11: "f32", 12: "f64", 13: "tuple", 15: "c64", 16: "bf16",
             17: "token", 18: "c128"}
"""``xla.PrimitiveType`` numbers -> names (the common ones; others print as ``type<N>``)."""


class HloError(ValueError):
    """Bytes that are not a readable HloModuleProto."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    n = len(buf)
    while True:
        if pos >= n or shift > 63:
            raise HloError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of one message, in order: an int for
    varint and fixed-size fields, the bytes of a length-delimited one."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield num, wire, value
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            if pos + size > n:
                raise HloError("truncated field")
            yield num, wire, buf[pos:pos + size]
            pos += size
        elif wire == _I64:
            if pos + 8 > n:
                raise HloError("truncated field")
            yield num, wire, int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wire == _I32:
            if pos + 4 > n:
                raise HloError("truncated field")
            yield num, wire, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise HloError(f"wire type {wire} not supported")


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _ints(wire: int, value: int | bytes) -> list[int]:
    """A repeated int64 field: one value, or a packed run of them."""
    if wire == _LEN:
        assert isinstance(value, bytes)
        out, pos = [], 0
        while pos < len(value):
            v, pos = _varint(value, pos)
            out.append(_signed(v))
        return out
    assert isinstance(value, int)
    return [_signed(value)]


@dataclass(frozen=True)
class Shape:
    dtype: str
    dims: tuple[int, ...]
    tuple_of: tuple[Shape, ...] = ()

    def __str__(self) -> str:
        if self.tuple_of:
            return "(" + ", ".join(str(s) for s in self.tuple_of) + ")"
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]"


def _shape(buf: bytes) -> Shape:
    dtype, dims, parts = "?", [], []
    for num, wire, value in fields(buf):
        if num == 2 and wire == _VARINT:
            assert isinstance(value, int)
            dtype = PRIMITIVE.get(value, f"type{value}")
        elif num == 3:
            dims.extend(_ints(wire, value))
        elif num == 4 and isinstance(value, bytes):
            parts.append(_shape(value))
    return Shape(dtype, tuple(dims), tuple(parts))


def _floats(wire: int, value: int | bytes, fmt: str, size: int) -> list[float]:
    if wire == _LEN:
        assert isinstance(value, bytes)
        return [v for (v,) in struct.iter_unpack("<" + fmt, value[:len(value) - len(value) % size])]
    assert isinstance(value, int)
    return [struct.unpack("<" + fmt, value.to_bytes(size, "little"))[0]]


def _half(raw: bytes, bf16: bool) -> list[float]:
    out = []
    for k in range(0, len(raw) - 1, 2):
        b = raw[k:k + 2]
        out.append(struct.unpack("<f", b"\0\0" + b)[0] if bf16 else struct.unpack("<e", b)[0])
    return out


LITERAL_LIMIT = 8
"""Values of a constant kept at most (a graph's constants are mostly scalars)."""


def _literal(buf: bytes) -> tuple[float | int | bool, ...]:
    """The first values of a constant (enough to say "the constant 1")."""
    out: list[float | int | bool] = []
    for num, wire, value in fields(buf):
        if len(out) >= LITERAL_LIMIT:
            break
        if num == 2:
            out.extend(bool(v) for v in _ints(wire, value))
        elif num in (4, 5):
            out.extend(_ints(wire, value))
        elif num in (6, 7):
            out.extend(v & ((1 << 64) - 1) for v in _ints(wire, value))
        elif num == 8:
            out.extend(_floats(wire, value, "f", 4))
        elif num == 9:
            out.extend(_floats(wire, value, "d", 8))
        elif num in (11, 13) and isinstance(value, bytes):
            out.extend(_half(value, bf16=num == 13))
    return tuple(out[:LITERAL_LIMIT])


@dataclass(frozen=True)
class Frame:
    file: str
    func: str
    line: int


@dataclass
class Op:
    """One instruction of the entry computation, with what a diff compares."""

    opcode: str
    shape: Shape
    operands: tuple[int, ...]
    """Positions of the operands in :attr:`Graph.ops` (ids resolved)."""
    attrs: tuple[object, ...] = ()
    """The opcode's own attributes: slice bounds, dimensions, a comparison, a called
    computation's opcodes (a reduce's ``add``)."""
    literal: tuple[float | int | bool, ...] | None = None
    """A constant's first values."""
    op_type: str = ""
    """The framework op (``aten__slice``, ``xla__device_data``)."""
    frames: tuple[Frame, ...] = ()
    """Python frames, innermost first (set only under ``_set_ir_debug(True)``)."""


@dataclass
class Graph:
    """The entry computation of a module, in dependency order (operands first)."""

    ops: list[Op] = field(default_factory=list)

    @property
    def parameters(self) -> int:
        return sum(1 for o in self.ops if o.opcode == "parameter")


def _frame_index(buf: bytes) -> tuple[list[str], list[str], list[tuple[int, int, int]], list[tuple[int, int]]]:
    files: list[str] = []
    funcs: list[str] = []
    locs: list[tuple[int, int, int]] = []
    frames: list[tuple[int, int]] = []
    for num, _, value in fields(buf):
        if not isinstance(value, bytes):
            continue
        if num == 1:
            files.append(value.decode("utf-8", "replace"))
        elif num == 2:
            funcs.append(value.decode("utf-8", "replace"))
        elif num == 3:
            f = {n: v for n, _, v in fields(value) if isinstance(v, int)}
            locs.append((f.get(1, 0), f.get(2, 0), f.get(3, 0)))
        elif num == 4:
            f = {n: v for n, _, v in fields(value) if isinstance(v, int)}
            frames.append((f.get(1, 0), f.get(2, 0)))
    return files, funcs, locs, frames


MAX_FRAMES = 32
"""Frames kept per op, innermost first."""


class _Frames:
    """The module's stack-frame table: a frame id -> its chain of frames, innermost first."""

    def __init__(self, buf: bytes | None) -> None:
        self.files, self.funcs, self.locs, self.frames = _frame_index(buf) if buf else ([], [], [], [])
        self._cache: dict[int, tuple[Frame, ...]] = {}

    def _one(self, fid: int) -> tuple[Frame | None, int]:
        if not 0 < fid <= len(self.frames):
            return None, 0
        loc_id, parent = self.frames[fid - 1]
        if not 0 < loc_id <= len(self.locs):
            return None, parent
        file_id, func_id, line = self.locs[loc_id - 1]
        file = self.files[file_id - 1] if 0 < file_id <= len(self.files) else ""
        func = self.funcs[func_id - 1] if 0 < func_id <= len(self.funcs) else ""
        return Frame(file, func, line), parent

    def chain(self, fid: int) -> tuple[Frame, ...]:
        got = self._cache.get(fid)
        if got is not None:
            return got
        out: list[Frame] = []
        seen: set[int] = set()
        k = fid
        while k and k not in seen and len(out) < MAX_FRAMES:
            seen.add(k)
            frame, k = self._one(k)
            if frame is not None:
                out.append(frame)
        got = self._cache[fid] = tuple(out)
        return got


_Fields = dict[int, list[tuple[int, int | bytes]]]
"""A message's fields by number: each occurrence's wire type and value."""


def _instruction(buf: bytes) -> _Fields:
    out: _Fields = {}
    for num, wire, value in fields(buf):
        out.setdefault(num, []).append((wire, value))
    return out


def _text(parts: list[tuple[int, int | bytes]] | None) -> str:
    if not parts or not isinstance(parts[0][1], bytes):
        return ""
    return parts[0][1].decode("utf-8", "replace")


def _repeated_ints(parts: list[tuple[int, int | bytes]] | None) -> list[int]:
    out: list[int] = []
    for wire, value in parts or ():
        out.extend(_ints(wire, value))
    return out


def _metadata(buf: bytes) -> tuple[str, int]:
    op_type, frame = "", 0
    for num, _, value in fields(buf):
        if num == 1 and isinstance(value, bytes):
            op_type = value.decode("utf-8", "replace")
        elif num == 15 and isinstance(value, int):
            frame = value
    return op_type, frame


def _slices(parts: list[tuple[int, int | bytes]] | None) -> tuple[tuple[int, int, int], ...]:
    out = []
    for _, value in parts or ():
        if isinstance(value, bytes):
            f = {n: _signed(v) for n, _, v in fields(value) if isinstance(v, int)}
            out.append((f.get(1, 0), f.get(2, 0), f.get(3, 1) or 1))
    return tuple(out)


def read_module(data: bytes) -> Graph:
    """The entry computation of a serialized ``HloModuleProto``, its ops in order, each with
    its Python frames where the module has a stack-frame table."""
    if not isinstance(data, (bytes, bytearray)):
        raise HloError("not bytes")
    data = bytes(data)
    if not data:
        return Graph()  # (torch_xla's answer for tensors with nothing pending: already on the device)
    entry_id, parts = _id_and_parts(data, 6)
    if not parts.get(3):
        raise HloError("no computation")
    bodies, entry = _computations(parts[3], entry_id)
    table = _Frames(parts[17][-1] if 17 in parts else None)
    graph = Graph()
    position: dict[int, int] = {}
    for num, _, value in fields(entry):
        if num == 2 and isinstance(value, bytes):
            graph.ops.append(_op(_instruction(value), bodies, position, table, len(graph.ops)))
    return graph


def _id_and_parts(buf: bytes, id_field: int) -> tuple[int | None, dict[int, list[bytes]]]:
    """A message's id (the varint field ``id_field``) and its length-delimited fields by
    number, in order."""
    ident: int | None = None
    parts: dict[int, list[bytes]] = {}
    for num, wire, value in fields(buf):
        if num == id_field and wire == _VARINT:
            assert isinstance(value, int)
            ident = _signed(value)
        elif isinstance(value, bytes):
            parts.setdefault(num, []).append(value)
    return ident, parts


def _computations(comps: list[bytes], entry_id: int | None) -> tuple[dict[int, tuple[str, ...]], bytes]:
    """Each computation's id -> the opcodes of its instructions (a reduce's add, a sort's
    compare), and the entry computation."""
    bodies: dict[int, tuple[str, ...]] = {}
    entry: bytes | None = None
    for comp in comps:
        cid, parts = _id_and_parts(comp, 5)
        if cid is not None:
            bodies[cid] = tuple(_text(_instruction(i).get(2)) for i in parts.get(2, ()))
        if cid == entry_id or (entry_id is None and comp is comps[-1]):
            entry = comp
    # (callees come before their callers: without its id, the entry is last)
    return bodies, comps[-1] if entry is None else entry


def _op(ins: _Fields, bodies: dict[int, tuple[str, ...]], position: dict[int, int], table: _Frames, index: int) -> Op:
    """The op of one instruction (its operands by position among the ops before it; its
    own id noted in ``position`` as ``index``)."""
    shape_parts = ins.get(3)
    shape = _shape(shape_parts[0][1]) if shape_parts and isinstance(shape_parts[0][1], bytes) else Shape("?", ())
    op_type, fid = "", 0
    meta = ins.get(7)
    if meta and isinstance(meta[0][1], bytes):
        op_type, fid = _metadata(meta[0][1])
    lit = ins.get(8)
    literal = _literal(lit[0][1]) if lit and isinstance(lit[0][1], bytes) else None
    ids = _repeated_ints(ins.get(35))
    operands = tuple(position[i] for i in _repeated_ints(ins.get(36)) if i in position)
    if ids:
        position[ids[0]] = index
    return Op(_text(ins.get(2)), shape, operands, _attributes(ins, bodies), literal, op_type,
              table.chain(fid) if fid else ())


_ATTRIBUTES = ((17, "slice"), (14, "dims"), (63, "cmp"), (34, "gather"), (20, "dyn_slice"), (13, "index"))
"""The instruction fields an op's key holds, by field number: slice bounds, dimensions, a
comparison's direction, gather and dynamic-slice sizes, a tuple index."""


def _attributes(ins: _Fields, bodies: dict[int, tuple[str, ...]]) -> tuple[object, ...]:
    attrs: list[object] = []
    for num, name in _ATTRIBUTES:
        if num in ins:
            parts = ins.get(num)
            value = _slices(parts) if num == 17 else _text(parts) if num == 63 else tuple(_repeated_ints(parts))
            attrs.append((name, value))
    called = _repeated_ints(ins.get(38))
    if called:
        attrs.append(("calls", tuple(bodies.get(c, ()) for c in called)))
    return tuple(attrs)
