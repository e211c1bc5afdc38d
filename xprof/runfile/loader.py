"""The tolerant loader: open a run file (regular files only, a header that says what it is),
read it line by line with bounded lines, and file every record it can decode; a bad line is
skipped and counted, only a bad header refuses the file.
"""

from __future__ import annotations

import gc
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from xprof.runfile.decoders import file_record
from xprof.runfile.records import FORMAT, VERSION, Run, RunFileError

_UNDECODED = (ValueError, RecursionError, MemoryError)
"""What the JSON decoder raises for a line it cannot take: bad JSON (``JSONDecodeError`` is a
``ValueError``), a number longer than Python's int limit (``ValueError``), nesting deeper
than its recursion limit, a value too large for memory."""


def _parse_header(path: str, first: str) -> dict[str, Any]:
    try:
        header = json.loads(first)
    except _UNDECODED:
        if first.lstrip().startswith("{") and not first.endswith("\n"):
            raise RunFileError(f"{path}: truncated run file (the header line is incomplete)")
        raise RunFileError(f"{path}: not an xprof run file (the first line is not JSON)")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RunFileError(f"{path}: not an xprof run file (no \"format\": \"{FORMAT}\" header)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunFileError(f"{path}: run file header has an invalid version {version!r}")
    if version > VERSION:
        writer = header.get("xprof_version", "a newer xprof")
        raise RunFileError(
            f"{path}: run file format version {version} (written by xprof {writer}) is newer "
            f"than this xprof reads (up to version {VERSION}); upgrade xprof"
        )
    return header


_SCANNER: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The JSON value scanner ``json.loads`` ends in (C): ``(value, end)`` or StopIteration."""


_UNDECODABLE = re.compile("[\udc80-\udcff]")
"""Bytes that are not UTF-8 come back from ``surrogateescape`` decoding as these."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while building many small objects.

    Every few hundred new dicts the collector runs, and its full passes walk every record
    loaded so far: on a 100k-step run that was a third of the load time. Records are
    plain acyclic JSON values, so nothing is left for the collector to find; any cycles
    made meanwhile are collected once it is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


MAX_LINE = 64 << 20
"""The longest record line read (64 MiB; the recorder's longest are a few KiB): a longer line
is skipped and counted, never held in memory whole (``/dev/zero`` has no newline at all)."""

MAX_HEADER = 1 << 20
"""The longest header line read: past it the file is not a run file."""


def special_file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words (None for a regular file)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe or FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def require_regular(p: str) -> None:
    """The one door every reader of a run file goes through (the loaders, the summary cache's
    hash): refuse, without opening it, anything but a regular file: opening a FIFO waits for a
    writer, a pipe (``<(cat run.json)``) can be read only once, and a device never ends."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file")
    except OSError as exc:
        raise RunFileError(f"{p}: cannot open ({exc.strerror or exc})")
    kind = special_file_kind(mode)
    if kind == "a directory":
        raise RunFileError(f"{p}: is a directory, not a run file")
    if kind is not None:
        raise RunFileError(f"{p}: {kind}, not a run file: xprof reads a run file more than once, "
                           "so it reads regular files only (save the stream to a file first)")


def open_run(path: str | os.PathLike[str]) -> tuple[IO[str], dict[str, Any]]:
    """Open a run file and read its header; :class:`RunFileError` (one line) on bad input.

    The file is returned positioned after the header line, opened with
    ``surrogateescape``: a byte that is not UTF-8 damages only its own line (that line is
    skipped like any unreadable one); only a header that is not UTF-8 refuses the file.
    Only a regular file is opened (see :func:`require_regular`).
    """
    p = str(path)
    require_regular(p)
    try:
        f = open(p, encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file")
    except PermissionError:
        raise RunFileError(f"{p}: permission denied")
    except OSError as exc:
        raise RunFileError(f"{p}: cannot open ({exc.strerror or exc})")
    try:
        first = f.readline(MAX_HEADER)
        if not first.strip():
            raise RunFileError(f"{p}: empty file, not an xprof run file")
        if len(first) >= MAX_HEADER and not first.endswith("\n"):
            raise RunFileError(f"{p}: not an xprof run file (its first line is longer than "
                               f"{MAX_HEADER >> 20} MiB)")
        if _UNDECODABLE.search(first):
            raise RunFileError(f"{p}: not an xprof run file (not UTF-8 text)")
        return f, _parse_header(p, first)
    except BaseException:
        f.close()
        raise


_TOO_LONG = "\x00too long"
"""What :func:`bounded_lines` gives for a line longer than :data:`MAX_LINE` (no JSON line
starts with a NUL, so it can only be skipped)."""


def bounded_lines(f: IO[str], limit: int | None = None) -> Iterator[str]:
    """The lines of ``f``, each read at most ``limit`` (:data:`MAX_LINE`) characters at a time:
    a longer line is read past in pieces and given as :data:`_TOO_LONG`."""
    limit = limit or MAX_LINE
    readline = f.readline
    while True:
        line = readline(limit)
        if not line:
            return
        if len(line) < limit or line[-1] == "\n":
            yield line
            continue
        while line and line[-1] != "\n":
            line = readline(limit)
        yield _TOO_LONG


class Undecodable(Exception):
    """A line the JSON decoder cannot take (see :func:`decode_line`)."""


def decode_line(line: str, scan: Callable[[str, int], tuple[Any, int]] = _SCANNER) -> Any:
    """The JSON value of one line, or :class:`Undecodable` (bad JSON, bytes that are not
    UTF-8, nesting deeper than the decoder goes, a number too long, a value too large).

    ``json.loads(line)`` is decode() -> raw_decode() -> scan_once(); calling the scanner
    directly saves two regex matches and three calls per line (a million lines in a long
    run); anything else goes through ``json.loads``, which accepts or rejects it exactly as
    it always did.
    """
    if not line.isascii() and _UNDECODABLE.search(line):
        raise Undecodable
    try:
        rec, end = scan(line, 0)
        if end != len(line) and (end != len(line) - 1 or line[end] != "\n"):
            raise ValueError  # more than the newline after the value: let loads() judge
        return rec
    except RecursionError:
        raise Undecodable
    except (StopIteration, ValueError):
        try:
            return json.loads(line)
        except _UNDECODED:
            raise Undecodable


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read and validate a run file; raise :class:`RunFileError` with one line on bad input.

    This is the record-by-record reader: every record becomes a typed record (``Step``,
    ``Sync``...). The analysis and the CLI read the bulk records into columns instead (the
    column reader, one layer up, decodes the few other records here, with the same rules).

    A file whose last line was cut off mid-write (the process was killed) loads with
    ``truncated_tail`` set and without an ``end`` record; unknown record types from a
    newer minor change, lines that are not JSON, lines with bytes that are not UTF-8 and
    records whose fields have the wrong type are skipped and counted in ``skipped_lines``,
    never fatal. Lines are parsed one at a time on purpose: parsing a batch as one JSON
    array can merge two damaged lines into one valid value and so hide them from the count.
    """
    f, header = open_run(path)
    run = Run(path=str(path), header=header)
    with f, gc_paused():
        pending: str | None = None
        scan = _SCANNER
        for line in bounded_lines(f):
            if pending is not None:
                # A bad line followed by more lines is corruption in the middle.
                run.skipped_lines += 1
                pending = None
            if not line.strip():
                continue
            try:
                rec = decode_line(line, scan)
            except Undecodable:
                pending = line
                continue
            if not file_record(run, rec):
                run.skipped_lines += 1
        if pending is not None:
            run.truncated_tail = True
    return run  # (steps in index order: a step index not after the last one is impossible)
