"""Reading run files into columns: one file (:func:`load_columns`) or many
(:func:`load_many`, a pod's files in batches), by DuckDB or by the record reader for small
files and files written some other way.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

from xprof.runcolumns.columns import ColumnRun, columns_of, no_columns
from xprof.runcolumns.connection import BIG_FILE
from xprof.runcolumns.connection import close as close_connection
from xprof.runcolumns.fields import BULK_TYPES
from xprof.runcolumns.queries import read_bulk
from xprof.runcolumns.scan import Scan, scan_lines
from xprof.runfile import Run, RunFileError, Undecodable, decode_line, file_record, gc_paused, load_run, open_run

SMALL_FILE = 1 << 20
"""Below this many bytes a file is read record by record (then turned into columns): DuckDB's
fixed cost per query is more than the record reader takes for a few thousand steps."""

BATCH_BYTES = 96 << 20
"""Files read by one DuckDB query at most (the files of a pod are read in batches this size)."""


def load_columns(path: str | os.PathLike[str], engine: str = "auto") -> ColumnRun:
    """Read a run file with its bulk records as columns, beside a ``Run`` of the other records
    (:class:`ColumnRun`; :func:`with_records` makes the typed ``Run``). The same checks and the same
    accounting of unreadable lines as :func:`xprof.runfile.load_run`; one line
    (:class:`RunFileError`) on a file that cannot be read.

    ``engine``: ``duckdb``, ``records`` (the record reader), or ``auto``: records below
    :data:`SMALL_FILE` bytes, else DuckDB.
    """
    got = load_many([path], engine)[0]
    if isinstance(got, RunFileError):
        raise got
    return got


def load_many(paths: Sequence[str | os.PathLike[str]], engine: str = "auto") -> list[ColumnRun | RunFileError]:
    """:func:`load_columns` of each path, the DuckDB ones in batches (one query for up to
    :data:`BATCH_BYTES` of files): a file that cannot be read is its :class:`RunFileError`,
    in its place, and the others are read."""
    out: list[ColumnRun | RunFileError | None] = [None] * len(paths)
    batch: list[_Pending] = []
    size = 0
    for k, path in enumerate(paths):
        try:
            got = _prepare(str(path), engine)
        except RunFileError as exc:
            out[k] = exc
            continue
        if isinstance(got, ColumnRun):
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
    scan: Scan
    size: int
    position: int = 0


def _prepare(p: str, engine: str) -> ColumnRun | _Pending:
    """Check the header and read the small records (typed); the whole run when the record
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
        scan = scan_lines(p, offset)
        scan = scan._replace(longest=max(scan.longest, offset))  # (DuckDB reads the header line too)
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
            if type(rec) is dict and rec.get("type") in BULK_TYPES:
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


def _read_batch(batch: list[_Pending], out: list[ColumnRun | RunFileError | None]) -> None:
    todo = [b for b in batch if b.scan.bulk_lines]
    big = sum(b.size for b in batch) >= BIG_FILE
    reads = read_bulk([b.run.path for b in todo], max(b.scan.longest for b in todo), release=big) if todo else []
    got = {id(b): r for b, r in zip(todo, reads)}
    for b in batch:
        read, seen = got.get(id(b), (no_columns(), 0))
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
        out[b.position] = ColumnRun(run, read.columns)
    if big:
        close_connection()


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


def _records_as_columns(path: str) -> ColumnRun:
    """The record reader, its bulk records turned into columns (small files, and files not
    written the way the recorder writes them)."""
    run = load_run(path)
    cols = columns_of(run)
    skipped = run.skipped_lines + cols.dropped
    cols.dropped = 0
    return ColumnRun(dataclasses.replace(run, steps=[], syncs=[], compiles=[], executions=[], transfers=[],
                                         graph_sizes=[], skipped_lines=skipped), cols)
