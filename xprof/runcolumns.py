"""The run file read into columns: the bulk records (steps, host reads, compiles, samples)
go from JSON Lines into one numpy array per field, parsed by DuckDB's JSON reader.

A long run has a million step records and a pod has hundreds of rank files; one Python
object per record made reading them slow and large. Here the records a run has many of
are parsed in C++ (DuckDB, several threads) straight into typed columns, and only the few
records a run has a handful of (``site``, ``sig``, ``end``, ``error``, ``debug``,
``dynamo``) go through :mod:`xprof.runfile`'s typed decoders, so both readers apply the
same rules to them.

The fields read from each bulk record are listed once, in :data:`BULK` (the JSON key, the
column it becomes, its type and its default when absent): adding a field to a record is
one line there. :func:`columns_of` builds the same columns from the typed records of
:func:`xprof.runfile.load_run` (a ``Run`` made in a test, or read by the record reader),
so the analysis has one input, :class:`RunColumns`.

How lines are accounted for, as :func:`xprof.runfile.load_run` does: a first pass over the
bytes (numpy, no object per line) finds the lines that start like the recorder writes a
bulk record (``{"type":"step"`` ...); every other line is decoded in Python. DuckDB parses
the whole file; its rows of bulk types are the columns, and a bulk-looking line it could
not parse is a skipped line (or the cut-off tail). A file written some other way (a bulk
record with its keys in another order) is read by the record reader instead.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from xprof.runfile import (
    MAX_COUNT,
    MAX_LINE,
    MAX_NS,
    MAX_SECONDS,
    Compile,
    Run,
    RunFileError,
    Step,
    Sync,
    Undecodable,
    decode_line,
    file_record,
    gc_paused,
    is_fallback_counter,
    load_run,
    open_run,
)

# -- what is read from each bulk record ---------------------------------------------------

REQUIRED = object()
"""Default of a field a record cannot do without: a record lacking it is skipped and counted."""


class Field(NamedTuple):
    """One field of a bulk record (docs/run-format.md): its JSON ``key``, the ``column`` it
    becomes (the analysis table's name for it), its ``kind`` (``int``, ``float``, ``str``,
    ``bool``), the value when the key is absent (None: a missing value; :data:`REQUIRED`:
    the record is skipped) and the typed record's field it mirrors (``attr``)."""

    key: str
    column: str
    kind: str
    default: Any
    attr: str


STEP_FIELDS = (
    Field("i", "i", "int", REQUIRED, "i"),
    Field("t0", "t0", "float", 0.0, "t0"),
    Field("tb", "tb", "float", 0.0, "tb"),
    Field("t1", "t1", "float", 0.0, "t1"),
    Field("barrier", "barrier", "str", "sync", "barrier"),
    Field("bu", "barrier_uncached", "int", 0, "barrier_uncached"),
    Field("bc", "barrier_cached", "int", 0, "barrier_cached"),
    Field("sig", "sig", "int", None, "sig"),
    Field("o", "opt", "int", 0, "opt"),
    Field("ng", "nograd", "bool", False, "nograd"),
    Field("dz", "dynamo_graphs", "int", 0, "dynamo_graphs"),
    Field("site", "site", "int", None, "site"),
    Field("ev", "eval_mode", "bool", False, "eval_mode"),
    Field("bw", "backward", "int", 0, "backward"),
    Field("mg", "mid_graphs", "int", 0, "mid_graphs"),
    Field("gd", "grad_off", "bool", False, "grad_off"),
)
COUNTERS_KEY = "c"
"""A step's counter deltas (an object): one int column per counter name, 0 where absent."""

SYNC_FIELDS = (
    Field("i", "step", "int", 0, "i"),
    Field("site", "site", "int", -1, "site"),
    Field("t0", "t0", "float", 0.0, "t0"),
    Field("t1", "t1", "float", 0.0, "t1"),
    Field("u", "uncached", "int", 0, "uncached"),
    Field("c", "cached", "int", 0, "cached"),
    Field("x", "executions", "int", 0, "executions"),
    Field("deferred", "deferred", "bool", False, "deferred"),
    Field("thread", "thread", "str", None, "thread"),
)

COMPILE_FIELDS = (
    Field("i", "step", "int", REQUIRED, "i"),
    Field("t", "t", "float", 0.0, "t"),
    Field("ns", "ns", "float", 0.0, "ns"),
    Field("at", "at", "str", "barrier", "at"),
)

BULK: dict[str, tuple[Field, ...]] = {"step": STEP_FIELDS, "sync": SYNC_FIELDS, "compile": COMPILE_FIELDS}
"""Record type -> its fields, read into columns."""

SAMPLES: dict[str, str] = {"exec": "executions", "xfer": "transfers", "graph_sizes": "graph_sizes"}
"""Record types whose ``samples`` (``[[a, b], ...]``) become one (n, 2) float array each, under
the name of the typed ``Run`` list they mirror."""

_SQL = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN"}
_NUMPY = {"int": np.int64, "float": np.float64, "bool": np.bool_}


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


def _empty(fields: Sequence[Field]) -> dict[str, np.ndarray]:
    return {f.column: _typed([], f) for f in fields}


def _typed(values: Sequence[Any], f: Field) -> np.ndarray:
    """A column of ``values`` (None where missing) as :class:`RunColumns` holds it."""
    if f.kind == "str":
        return _shared_strings(values)
    if f.default is None or f.default is REQUIRED:
        mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        data: np.ndarray = np.fromiter((0 if v is None else v for v in values), dtype=_NUMPY[f.kind],
                                       count=len(values))
        return np.ma.MaskedArray(data, mask) if f.default is None else data
    return np.fromiter(values, dtype=_NUMPY[f.kind], count=len(values))


def _shared_strings(values: Sequence[Any]) -> np.ndarray:
    """An object array of ``values`` where equal strings are one object (a million steps
    name a handful of barrier kinds)."""
    interned: dict[Any, Any] = {}
    out = np.empty(len(values), dtype=object)
    out[:] = [interned.setdefault(v, v) for v in values]
    return out


def columns_of(run: Run) -> RunColumns:
    """``run.columns``, or the same columns built from its typed records (a ``Run`` from
    :func:`xprof.runfile.load_run` or made by hand)."""
    if run.columns is not None:
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
            column = _int_column([c.get(name, 0) for c in all_counts])
            if column.any():  # (a counter no step moved is no column, as DuckDB reads it)
                counters[name] = column
    syncs, n_syncs = _record_columns(run.syncs, SYNC_FIELDS)
    compiles, n_compiles = _record_columns(run.compiles, COMPILE_FIELDS)
    samples = {name: _pairs(getattr(run, name)) for name in SAMPLES.values()}
    return RunColumns(steps=steps, counters=counters, syncs=syncs, compiles=compiles,
                      samples={k: v for k, v in samples.items() if len(v)},
                      dropped=dropped + n_syncs + n_compiles)


def _int_column(values: list[Any]) -> np.ndarray:
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


def with_records(run: Run) -> Run:
    """``run`` with its typed record lists filled from its columns (for readers that walk
    records one by one, such as the Chrome trace). A run without columns is returned as is."""
    cols = run.columns
    if cols is None or run.steps or run.syncs or run.compiles:
        return run
    def rows(table: dict[str, np.ndarray], fields: Sequence[Field]) -> Iterator[dict[str, Any]]:
        lists = {f.attr: _py_list(table[f.column]) for f in fields}
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


def _py_list(arr: np.ndarray) -> list[Any]:
    if isinstance(arr, np.ma.MaskedArray):
        return [None if m else v for v, m in zip(arr.data.tolist(), np.ma.getmaskarray(arr).tolist())]
    return arr.tolist()


# -- reading a file into columns ----------------------------------------------------------------

_PREFIX = b'{"type":"'
_BULK_PREFIXES = tuple(_PREFIX + t.encode() + b'"' for t in (*BULK, *SAMPLES))
"""How the recorder starts every bulk record: ``{"type":"step"`` ..."""

_GLOB = re.compile(r"[*?\[\]{}]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CHUNK = 32 << 20


class _Scan(NamedTuple):
    bulk_lines: int
    """Lines that start like a bulk record."""
    other: list[bytes]
    """Every other line that is not blank, in file order (without its newline)."""
    last_is_bulk: bool
    """The file's last line starts like a bulk record."""
    last_line: bytes
    """The file's last line (without its newline)."""


def _scan(path: str, offset: int) -> _Scan:
    """Classify the lines after the header by their first bytes, without one object per line."""
    bulk = 0
    other: list[bytes] = []
    last = b""
    last_bulk = False
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        buf = bytearray(min(_CHUNK, max(size - offset, 0)) + (1 << 16))
        view = memoryview(buf)
        f.seek(offset)
        held = 0  # bytes of an unfinished line carried over from the last chunk
        while True:
            if held >= MAX_LINE:  # one line longer than any record: read past it
                held = _past_long_line(f, buf)
            elif held >= len(buf) - (1 << 16):  # one line longer than the buffer: grow it
                view.release()
                buf.extend(bytearray(len(buf)))
                view = memoryview(buf)
            got = f.readinto(view[held:])
            if not got:
                break
            filled = held + got
            cut = buf.rfind(b"\n", 0, filled)
            if cut < 0:
                held = filled
                continue
            n, found, last, last_bulk = _classify(buf, cut + 1)
            bulk += n
            other.extend(found)
            held = filled - cut - 1
            buf[:held] = buf[cut + 1:filled]
        if held:
            buf[held:held + 1] = b"\n"
            n, found, last, last_bulk = _classify(buf, held + 1)
            bulk += n
            other.extend(found)
    view.release()
    return _Scan(bulk, other, last_bulk, last)


def _past_long_line(f: Any, buf: bytearray) -> int:
    """Read past the rest of a line longer than :data:`MAX_LINE` and put in its place, at the
    start of ``buf``, a one-byte line that no reader takes (as :func:`xprof.runfile.load_run`
    skips it), then what followed it; returns how many bytes of ``buf`` are held."""
    while True:
        chunk = f.read(1 << 20)
        end = chunk.find(b"\n")
        if not chunk or end >= 0:
            break
    placed = b"\x00" if not chunk else b"\x00\n" + chunk[end + 1:]
    buf[:len(placed)] = placed
    return len(placed)


def _type_signature(name: bytes) -> tuple[int, int, int]:
    """What tells the record types apart at the start of a line: the first two letters of
    the type and where its closing quote is."""
    return name[0], name[1] if len(name) > 1 else 0, len(_PREFIX) + len(name)


_BULK_SIGNATURES = [_type_signature(t.encode()) for t in (*BULK, *SAMPLES)]
_OTHER_SIGNATURES = {_type_signature(t.encode()) for t in ("site", "sig", "error", "debug", "dynamo", "end", "spmd")}
assert not _OTHER_SIGNATURES & set(_BULK_SIGNATURES), "two record types start alike"


def _classify(buf: bytes | bytearray, size: int) -> tuple[int, list[bytes], bytes, bool]:
    """Bulk-looking lines in ``buf[:size]`` (whole lines), the other non-empty lines, and
    the last line with whether it looked like a bulk record.

    A line looks like a bulk record when it starts ``{"type":"`` and the type's first two
    letters and length are those of one (an unknown type that happens to look alike is
    counted as an unreadable bulk line, as the record reader counts unknown types). A line
    longer than :data:`MAX_LINE` is an unreadable other line, given as one NUL byte."""
    arr = np.frombuffer(buf, dtype=np.uint8, count=size)
    ends = np.flatnonzero(arr == 10)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts
    longest = max(sig[2] for sig in _BULK_SIGNATURES) + 1
    cand = np.flatnonzero(lengths > len(_PREFIX) + 2)
    at = starts[cand]
    ok = np.ones(len(cand), dtype=bool)
    for k, byte in enumerate(_PREFIX):
        ok &= arr[at + k] == byte
    cand, at = cand[ok], at[ok]
    is_bulk = np.zeros(len(ends), dtype=bool)
    if len(cand):
        room = np.minimum(lengths[cand], longest)
        first, second = arr[at + len(_PREFIX)], arr[at + len(_PREFIX) + 1]
        for c1, c2, quote in _BULK_SIGNATURES:
            m = (first == c1) & (second == c2) & (room > quote)
            m[m] &= arr[at[m] + quote] == ord('"')
            is_bulk[cand[m]] = True
    is_bulk &= lengths <= MAX_LINE
    others = np.flatnonzero(~is_bulk & (lengths > 0))
    found = [bytes(buf[starts[k]:ends[k]]) if lengths[k] <= MAX_LINE else b"\x00" for k in others.tolist()]
    last_k = len(ends) - 1
    last = bytes(buf[starts[last_k]:ends[last_k]]) if lengths[last_k] <= MAX_LINE else b"\x00"
    return int(is_bulk.sum()), found, last, bool(is_bulk[last_k])


SMALL_FILE = 1 << 20
"""Below this many bytes a file is read record by record (then turned into columns): DuckDB's
fixed cost per query is more than the record reader takes for a few thousand steps."""

BATCH_BYTES = 96 << 20
"""Files read by one DuckDB query at most (the files of a pod are read in batches this size)."""


def load_columns(path: str | os.PathLike[str], engine: str = "auto") -> Run:
    """Read a run file with its bulk records as columns (``Run.columns``; the typed lists of
    those records stay empty: :func:`with_records` fills them). The same checks and the same
    accounting of unreadable lines as :func:`xprof.runfile.load_run`; one line
    (:class:`RunFileError`) on a file that cannot be read.

    ``engine``: ``duckdb``, ``records`` (the record reader), or ``auto``: records below
    :data:`SMALL_FILE` bytes, else DuckDB.
    """
    got = load_many([path], engine)[0]
    if isinstance(got, RunFileError):
        raise got
    return got


def load_many(paths: Sequence[str | os.PathLike[str]], engine: str = "auto") -> list[Run | RunFileError]:
    """:func:`load_columns` of each path, the DuckDB ones in batches (one query for up to
    :data:`BATCH_BYTES` of files): a file that cannot be read is its :class:`RunFileError`,
    in its place, and the others are read."""
    out: list[Run | RunFileError | None] = [None] * len(paths)
    batch: list[_Pending] = []
    size = 0
    for k, path in enumerate(paths):
        try:
            got = _prepare(str(path), engine)
        except RunFileError as exc:
            out[k] = exc
            continue
        if isinstance(got, Run):
            out[k] = got
            continue
        got.position = k
        batch.append(got)
        size += got.size
        if size >= BATCH_BYTES:
            _read_batch(batch, out)
            batch, size = [], 0
    if batch:
        _read_batch(batch, out)
    return [r if r is not None else RunFileError("unread") for r in out]


@dataclass
class _Pending:
    """A file whose small records are read, waiting for DuckDB to read its bulk records."""

    run: Run
    scan: _Scan
    size: int
    position: int = 0


def _prepare(p: str, engine: str) -> Run | _Pending:
    """Check the header and read the small records (typed); a whole Run when the record
    reader takes the file."""
    f, header = open_run(p)
    f.close()
    size = _size(p)
    if engine == "records" or (engine == "auto" and size < SMALL_FILE) or "type" in header:
        # ("type" in the header: DuckDB would take the header for a record.)
        return _records_as_columns(p)
    try:
        with open(p, "rb") as b:
            offset = len(b.readline())
        scan = _scan(p, offset)
    except OSError as exc:
        raise RunFileError(f"{p}: cannot read ({exc.strerror or exc})")
    run = Run(path=p, header=header)
    with gc_paused():
        pending = False
        for raw in scan.other:
            if pending:
                run.skipped_lines += 1
                pending = False
            line = raw.decode("utf-8", errors="surrogateescape")
            if not line.strip():
                continue
            try:
                rec = decode_line(line)
            except Undecodable:
                pending = True
                continue
            if type(rec) is dict and rec.get("type") in _BULK_TYPES:
                return _records_as_columns(p)  # a bulk record not written the recorder's way
            if not file_record(run, rec):
                run.skipped_lines += 1
        if pending:
            # The last "other" line was unreadable: the cut-off tail when it is the file's
            # last line, else a damaged line in the middle.
            if not scan.last_is_bulk and scan.other and scan.other[-1] == scan.last_line:
                run.truncated_tail = True
            else:
                run.skipped_lines += 1
    return _Pending(run, scan, size)


def _read_batch(batch: list[_Pending], out: list[Run | RunFileError | None]) -> None:
    todo = [b for b in batch if b.scan.bulk_lines]
    reads = _read_bulk([b.run.path for b in todo]) if todo else []
    got = {id(b): r for b, r in zip(todo, reads)}
    for b in batch:
        read, seen = got.get(id(b), (_no_columns(), 0))
        run = b.run
        bad_bulk = b.scan.bulk_lines - seen
        if bad_bulk < 0 or not read.possible:
            # More bulk rows than lines, or impossible numbers: do not guess, read each record.
            out[b.position] = _records_as_columns(run.path)
            continue
        if bad_bulk and b.scan.last_is_bulk and _undecodable(b.scan.last_line):
            run.truncated_tail = True
            bad_bulk -= 1
        run.skipped_lines += bad_bulk + read.skipped
        run.columns = read.columns
        out[b.position] = run
    if sum(b.size for b in batch) >= BIG_FILE:
        _release()


_BULK_TYPES = frozenset((*BULK, *SAMPLES))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _undecodable(raw: bytes) -> bool:
    try:
        decode_line(raw.decode("utf-8", errors="surrogateescape"))
    except Undecodable:
        return True
    return False


def _records_as_columns(path: str) -> Run:
    """The record reader, its bulk records turned into columns (small files, and files not
    written the way the recorder writes them)."""
    run = load_run(path)
    cols = columns_of(run)
    skipped = run.skipped_lines + cols.dropped
    cols.dropped = 0
    return dataclasses.replace(run, steps=[], syncs=[], compiles=[], executions=[], transfers=[],
                               graph_sizes=[], columns=cols, skipped_lines=skipped)


def _no_columns() -> _Read:
    return _Read(RunColumns(steps=_empty(STEP_FIELDS), counters={}, syncs=_empty(SYNC_FIELDS),
                            compiles=_empty(COMPILE_FIELDS)), 0)


class _Read(NamedTuple):
    columns: RunColumns
    skipped: int
    """Bulk records DuckDB read but that lack a required field."""
    possible: bool = True
    """No impossible number among them (else the file is read record by record)."""


# -- DuckDB ---------------------------------------------------------------------------------------

_LOCAL = threading.local()


def _connection() -> Any:
    """This thread's DuckDB connection (in memory), made on first use."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        import duckdb

        con = duckdb.connect(":memory:", config={"threads": _threads(), "preserve_insertion_order": True})
        _LOCAL.con = con
    return con


def connected() -> bool:
    """This thread holds a DuckDB connection (a forked child would inherit it without its threads)."""
    return getattr(_LOCAL, "con", None) is not None


def _release() -> None:
    """Close this thread's connection: DuckDB keeps the memory of a big read until then."""
    con = getattr(_LOCAL, "con", None)
    _LOCAL.con = None
    if con is not None:
        con.close()


def close() -> None:
    """Close this thread's DuckDB connection, if it has one."""
    _release()


BIG_FILE = 64 << 20
"""After reading this many bytes the connection is closed, so the memory DuckDB held for them
goes back before the analysis needs its own (a million steps: ~300 MB)."""


def single_threaded() -> None:
    """DuckDB in this process on one thread from now on (a worker process among others)."""
    os.environ["XPROF_THREADS"] = "1"
    con = getattr(_LOCAL, "con", None)
    if con is not None:
        con.execute("SET threads = 1")


@contextmanager
def one_thread() -> Iterator[None]:
    """DuckDB on one thread while worker processes read beside this one."""
    before = os.environ.get("XPROF_THREADS")
    single_threaded()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("XPROF_THREADS", None)
        else:
            os.environ["XPROF_THREADS"] = before
        con = getattr(_LOCAL, "con", None)
        if con is not None:
            con.execute(f"SET threads = {_threads()}")


def _threads() -> int:
    wanted = os.environ.get("XPROF_THREADS")
    if wanted and wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    return max(1, min(4, os.cpu_count() or 1))


def _key_types() -> dict[str, str]:
    """The SQL type each JSON key is read as: its field's type, or JSON where two record
    types give one key different types (a step's ``c`` is an object, a read's a count)."""
    kinds: dict[str, set[str]] = {}
    for fields in BULK.values():
        for f in fields:
            kinds.setdefault(f.key, set()).add(_SQL[f.kind])
    kinds.setdefault(COUNTERS_KEY, set()).add("JSON")
    out = {k: (v.pop() if len(v) == 1 else "JSON") for k, v in kinds.items()}
    out["type"] = "VARCHAR"
    out["samples"] = "DOUBLE[][]"
    return out


_KEY_TYPES = _key_types()


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _sql_ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _select(f: Field, key_type: str) -> str:
    """The SQL expression of one field: cast from JSON where the key is shared, with its default."""
    col = _sql_ident(f.key)
    expr = col if key_type != "JSON" else f"TRY_CAST({col} AS {_SQL[f.kind]})"
    if f.default is not None and f.default is not REQUIRED:
        expr = f"COALESCE({expr}, {_sql_literal(f.default)})"
    return expr


def _sql_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return _sql_str(v)
    return repr(v)


_FILE = "xprof_f"
"""The column holding which file of the batch a row came from (its index)."""


def _read_bulk(paths: list[str]) -> list[_Read_and_seen]:
    """The bulk records of each file as columns, and how many rows of bulk types DuckDB read
    from it: one query over all of them."""
    con = _connection()
    with _readable_paths(paths) as sources:
        columns = "{" + ", ".join(f"{_sql_str(k)}: {_sql_str(t)}" for k, t in _KEY_TYPES.items()) + "}"
        types = ", ".join(_sql_str(t) for t in _BULK_TYPES)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE xprof_bulk AS SELECT list_position(?::VARCHAR[], filename) - 1 AS {_FILE}, "
            "* EXCLUDE (filename) FROM read_json(?, format='newline_delimited', "
            f"columns={columns}, ignore_errors=true, maximum_object_size=268435456, filename=true) "
            f"WHERE type IN ({types})", [sources, sources])
    n = len(paths)
    try:
        facts = _facts(con)
        seen, skipped = [0] * n, [0] * n
        for f, total, missing in zip(facts["files"], facts["rows"], facts["missing"]):
            seen[int(f)], skipped[int(f)] = int(total), int(missing)
        steps, counters = _split(*_query_steps(con, facts), n)
        syncs = _split(_query_table(con, "sync", SYNC_FIELDS), {}, n)[0]
        compiles = _split(_query_table(con, "compile", COMPILE_FIELDS), {}, n)[0]
        samples = _query_samples(con, n)
    finally:
        con.execute("DROP TABLE IF EXISTS xprof_bulk")
    out = []
    odd = set(facts["odd_counters"])
    for k in range(n):
        possible = k not in odd and _possible(steps[k], counters[k], syncs[k], compiles[k], samples[k])
        st, ctr = _sorted_steps(steps[k], counters[k])
        cols = RunColumns(steps=st, counters=ctr, syncs=syncs[k], compiles=compiles[k], samples=samples[k])
        out.append((_Read(cols, skipped[k], possible), seen[k]))
    return out


def _counts(table: dict[str, np.ndarray], fields: Sequence[Field]) -> bool:
    """Every count of the table's rows is one (ids such as ``sig`` and ``site`` aside)."""
    return all(((table[f.column] >= 0) & (table[f.column] <= MAX_COUNT)).all()
               for f in fields if f.kind == "int" and f.key not in ("sig", "site"))


def _ordered(*times: np.ndarray) -> bool:
    """Times in seconds, each after the one before (NaN is never)."""
    ok = (times[0] >= 0) & (times[-1] < MAX_SECONDS)
    for a, b in zip(times, times[1:]):
        ok &= a <= b
    return bool(ok.all())


def _possible(steps: dict[str, np.ndarray], counters: dict[str, np.ndarray], syncs: dict[str, np.ndarray],
              compiles: dict[str, np.ndarray], samples: dict[str, np.ndarray]) -> bool:
    """No number the record reader calls impossible (:class:`xprof.runfile.Impossible`), steps in
    file order: such a file is read record by record, which skips and counts each one."""
    i = steps["i"]
    return (_counts(steps, STEP_FIELDS) and _ordered(steps["t0"], steps["tb"], steps["t1"])
            and not (np.diff(i) <= 0).any()
            and all(((c >= 0) & (c <= MAX_COUNT)).all() for c in counters.values())
            and _counts(syncs, SYNC_FIELDS) and _ordered(syncs["t0"], syncs["t1"])
            and _counts(compiles, COMPILE_FIELDS) and _ordered(compiles["t"])
            and bool(((compiles["ns"] >= 0) & (compiles["ns"] <= MAX_NS)).all())
            and all(_ordered(p[:, 0]) and bool(((p[:, 1] >= 0) & (p[:, 1] <= MAX_NS)).all()) for p in samples.values()))


_Read_and_seen = tuple[_Read, int]


class _readable_paths:
    """The paths as DuckDB should read them: links with plain names when a path holds
    characters DuckDB would take for a glob pattern, or a name that is not UTF-8 (a
    ``\\udce9`` DuckDB cannot take)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> list[str]:
        if not any(_GLOB.search(p) or _SURROGATE.search(p) for p in self.paths):
            return list(self.paths)
        self.tmp = tempfile.TemporaryDirectory(prefix="xprof-")
        out = []
        for k, p in enumerate(self.paths):
            link = os.path.join(self.tmp.name, f"run{k}.json")
            os.symlink(os.path.abspath(p), link)
            out.append(link)
        return out

    def __exit__(self, *exc: object) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


def _split(table: dict[str, np.ndarray], counters: dict[str, np.ndarray],
           n: int) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """One query's rows cut into each file's (rows come file by file, in file order)."""
    f = np.asarray(table.pop(_FILE), dtype=np.int64)
    if len(f) > 1 and (np.diff(f) < 0).any():
        order = np.argsort(f, kind="stable")
        f = f[order]
        table = {k: v[order] for k, v in table.items()}
        counters = {k: v[order] for k, v in counters.items()}
    edges = np.searchsorted(f, np.arange(n + 1), side="left")
    if n == 1:
        return [table], [counters]
    return ([{k: v[edges[j]:edges[j + 1]] for k, v in table.items()} for j in range(n)],
            [{k: v[edges[j]:edges[j + 1]] for k, v in counters.items()} for j in range(n)])


def _sorted_steps(steps: dict[str, np.ndarray],
                  counters: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Steps by index (stable), as the record reader sorts them; counters a step never moved
    in this file are left out."""
    counters = {k: v for k, v in counters.items() if v.any()}
    order = steps["i"]
    if len(order) > 1 and (np.diff(order) < 0).any():
        perm = np.argsort(order, kind="stable")
        steps = {k: v[perm] for k, v in steps.items()}
        counters = {k: v[perm] for k, v in counters.items()}
    return steps, counters


def _fetch(con: Any, fields: Sequence[Field], where: str, extra: Sequence[str] = (),
           source: str = "xprof_bulk", strings: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """Rows of one record type (with the file each came from), each field with its default
    (missing values flagged).

    ``strings``: the distinct values of string fields, which then come as an index into them,
    so a million steps do not make a million Python strings."""
    parts = [_FILE]
    coded = strings or {}
    for f in fields:
        expr = _select(f, _KEY_TYPES[f.key])
        if f.kind == "str" and f.column in coded:
            listed = "[" + ", ".join(_sql_str(v) for v in coded[f.column] if v is not None) + "]::VARCHAR[]"
            parts.append(f"COALESCE(list_position({listed}, {expr}), 0) AS {_sql_ident(f.column)}")
        elif f.kind == "str":
            parts.append(f"{expr} AS {_sql_ident(f.column)}")
        elif f.default is None:
            parts.append(f"COALESCE({expr}, 0) AS {_sql_ident(f.column)}")
            parts.append(f"({expr}) IS NULL AS {_sql_ident(f.column + ':missing')}")
        else:
            parts.append(f"{expr} AS {_sql_ident(f.column)}")
    parts.extend(extra)
    got = dict(con.execute(f"SELECT {', '.join(parts)} FROM {source} WHERE {where}").fetchnumpy())
    for column, found in coded.items():
        known = [v for v in found if v is not None]
        table = np.empty(len(known) + 1, dtype=object)
        table[:] = [None, *known]
        got[column] = table[np.asarray(got[column], dtype=np.int64)]
    return got


def _required(fields: Sequence[Field], record: str) -> tuple[str, str]:
    """WHERE clauses for the rows of ``record`` with every required field, and without."""
    need = [f"({_select(f, _KEY_TYPES[f.key])}) IS NOT NULL" for f in fields if f.default is REQUIRED]
    ok = " AND ".join([f"type = {_sql_str(record)}", *need])
    bad = f"type = {_sql_str(record)} AND NOT ({' AND '.join(need)})" if need else "FALSE"
    return ok, bad


def _finish(raw: dict[str, Any], fields: Sequence[Field]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {_FILE: np.asarray(raw[_FILE])}
    for f in fields:
        v = raw[f.column]
        if f.kind == "str" and v.dtype == object and not isinstance(v, np.ma.MaskedArray):
            out[f.column] = v if len(v) > 1000 else _shared_strings(v.tolist())
        elif f.kind == "str":
            out[f.column] = _shared_strings(_py_list(v) if isinstance(v, np.ma.MaskedArray) else v.tolist())
        elif f.default is None:
            out[f.column] = np.ma.MaskedArray(np.asarray(v, dtype=_NUMPY[f.kind]),
                                              np.asarray(raw[f.column + ":missing"], dtype=bool))
        else:
            out[f.column] = np.asarray(v, dtype=_NUMPY[f.kind])
    return out


def _query_table(con: Any, record: str, fields: Sequence[Field]) -> dict[str, np.ndarray]:
    return _finish(_fetch(con, fields, _required(fields, record)[0]), fields)


_COUNTERS = f"CASE WHEN json_type({_sql_ident(COUNTERS_KEY)}) = 'OBJECT' THEN {_sql_ident(COUNTERS_KEY)} END"
"""A step's counters object (NULL where ``c`` is something else)."""
_SAMPLE_ROWS = (f"FROM xprof_bulk WHERE type IN ({', '.join(_sql_str(t) for t in SAMPLES)}) "
                "AND samples IS NOT NULL")


def _facts(con: Any) -> dict[str, Any]:
    """What the other queries need to know first, in one round trip: rows and rows without a
    required field per file, the counter names and the distinct strings of the step fields."""
    ok_step = _required(STEP_FIELDS, "step")[0]
    missing = " + ".join(f"count(*) FILTER (WHERE {_required(fields, record)[1]})"
                         for record, fields in BULK.items())
    strings = [f for f in STEP_FIELDS if f.kind == "str"]
    parts = [
        f"(SELECT list(f ORDER BY f) FROM (SELECT {_FILE} AS f FROM xprof_bulk GROUP BY {_FILE}))",
        f"(SELECT list(n ORDER BY f) FROM (SELECT {_FILE} AS f, count(*) AS n FROM xprof_bulk GROUP BY {_FILE}))",
        f"(SELECT list(m ORDER BY f) FROM (SELECT {_FILE} AS f, {missing} AS m FROM xprof_bulk GROUP BY {_FILE}))",
        # (over each distinct counters object: steps repeat a handful, and parsing is the cost)
        f"(SELECT list(DISTINCT k) FROM (SELECT unnest(json_keys({_COUNTERS})) AS k FROM "
        f"(SELECT DISTINCT {_sql_ident(COUNTERS_KEY)} FROM xprof_bulk WHERE {ok_step})))",
        *(f"(SELECT list(DISTINCT {_select(f, _KEY_TYPES[f.key])}) FROM xprof_bulk WHERE {ok_step})" for f in strings),
        f"(SELECT CASE WHEN count(*) <= {CODED_COUNTERS} THEN list(o) END FROM (SELECT DISTINCT "
        f"{_sql_ident(COUNTERS_KEY)}::VARCHAR AS o FROM xprof_bulk WHERE {ok_step} AND {_sql_ident(COUNTERS_KEY)} "
        "IS NOT NULL))",
        # (files with a counter value that is not a count DuckDB reads as one: NaN, a fraction, past 64 bits)
        f"(SELECT list(DISTINCT f) FROM (SELECT DISTINCT {_FILE} AS f, {_sql_ident(COUNTERS_KEY)}::VARCHAR AS o "
        f"FROM xprof_bulk WHERE {ok_step}) WHERE regexp_matches(o, {_sql_str(_ODD_COUNT)}))",
    ]
    got = con.execute("SELECT " + ", ".join(parts)).fetchone()
    files, rows, miss, names = (v or [] for v in got[:4])
    return {"files": files, "rows": rows, "missing": miss, "counters": sorted(names),
            "strings": {f.column: list(v or []) for f, v in zip(strings, got[4:4 + len(strings)])},
            "counter_objects": got[-2], "odd_counters": got[-1] or []}


_ODD_COUNT = r":\s*(-|N|I|[0-9]*\.|[0-9]+[eE]|[0-9]{14})"
"""A counter value in a step's ``c`` that DuckDB would read as 0 or round, where the record
reader sees an impossible count (a false match only costs reading that file record by record)."""


CODED_COUNTERS = 64
"""Up to this many distinct counters objects (steps repeat a handful), each is parsed once and
the steps point at theirs; more, and every step's object is parsed."""


def _query_steps(con: Any, facts: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    ok = _required(STEP_FIELDS, "step")[0]
    names = facts["counters"]
    objects = facts.get("counter_objects")
    if names and objects is not None:
        return _query_steps_coded(con, facts, names, objects)
    extra = [f"struct_extract(xprof_c, {_sql_str(n)}) AS {_sql_ident('counter:' + n)}" for n in names]
    source = "xprof_bulk"
    if names:
        struct = "{" + ", ".join(f'{_json_str(n)}: "BIGINT"' for n in names) + "}"
        source = f"(SELECT *, json_transform({_COUNTERS}, {_sql_str(struct)}) AS xprof_c FROM xprof_bulk)"
    raw = _fetch(con, STEP_FIELDS, ok, extra, source, strings=facts["strings"])
    counters: dict[str, np.ndarray] = {}
    for n in names:
        v = raw.pop("counter:" + n)
        counters[n] = np.asarray(np.ma.filled(v, 0) if isinstance(v, np.ma.MaskedArray) else v, dtype=np.int64)
    return _finish(raw, STEP_FIELDS), counters


def _query_steps_coded(con: Any, facts: dict[str, Any], names: list[str],
                       objects: list[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The steps with each one's counters object as an index into the distinct ``objects``
    (0: none), and the counters of each object parsed once: as :func:`_query_steps` reads them."""
    ok = _required(STEP_FIELDS, "step")[0]
    listed = "[" + ", ".join(_sql_str(o) for o in objects) + "]::VARCHAR[]"
    code = f"COALESCE(list_position({listed}, {_sql_ident(COUNTERS_KEY)}::VARCHAR), 0) AS xprof_code"
    raw = _fetch(con, STEP_FIELDS, ok, [code], strings=facts["strings"])
    which = np.asarray(np.ma.filled(raw.pop("xprof_code"), 0), dtype=np.int64)
    struct = "{" + ", ".join(f'{_json_str(n)}: "BIGINT"' for n in names) + "}"
    parsed = f"json_transform(CASE WHEN json_type(o) = 'OBJECT' THEN o END, {_sql_str(struct)})"
    values = ", ".join(f"struct_extract({parsed}, {_sql_str(n)}) AS {_sql_ident('counter:' + n)}" for n in names)
    got = con.execute(f"SELECT {values} FROM (SELECT unnest(?::JSON[]) AS o, unnest(range(?)) AS k) ORDER BY k",
                      [objects, len(objects)]).fetchnumpy()
    counters: dict[str, np.ndarray] = {}
    for n in names:
        v = got["counter:" + n]
        per_object = np.zeros(len(objects) + 1, dtype=np.int64)
        per_object[1:] = np.asarray(np.ma.filled(v, 0) if isinstance(v, np.ma.MaskedArray) else v, dtype=np.int64)
        counters[n] = per_object[which]
    return _finish(raw, STEP_FIELDS), counters


def _json_str(s: str) -> str:
    import json

    return json.dumps(s)


def _query_samples(con: Any, n: int) -> list[dict[str, np.ndarray]]:
    """Every ``samples`` pair of the sample records, by file and record type (pairs that are
    not two numbers are dropped, as the record reader drops them): one query, one row a pair."""
    kinds = list(SAMPLES)
    code = "CASE type " + " ".join(f"WHEN {_sql_str(t)} THEN {k}" for k, t in enumerate(kinds)) + " END"
    got = con.execute(f"SELECT f, k, s[1] AS a, s[2] AS b, len(s) = 2 AND s[1] IS NOT NULL AND s[2] IS NOT NULL "
                      f"AS good FROM (SELECT {_FILE} AS f, {code} AS k, unnest(samples) AS s {_SAMPLE_ROWS})"
                      ).fetchnumpy()
    good = np.asarray(np.ma.filled(got["good"], False), dtype=bool)
    f, k = np.asarray(got["f"])[good], np.asarray(got["k"])[good]
    pairs = np.column_stack([np.asarray(np.ma.getdata(got["a"]), dtype=np.float64)[good],
                             np.asarray(np.ma.getdata(got["b"]), dtype=np.float64)[good]])
    out: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
    if not len(pairs):
        return out
    for j in range(n):
        mine = f == j
        for m, record in enumerate(kinds):
            got_pairs = pairs[mine & (k == m)]
            if len(got_pairs):
                out[j][SAMPLES[record]] = got_pairs
    return out


__all__ = ["BULK", "SAMPLES", "Field", "RunColumns", "columns_of", "load_columns", "load_many", "with_records"]
