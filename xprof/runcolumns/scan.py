"""The first pass over a file's bytes (numpy, no object per line): which lines start like
the recorder writes a bulk record, and every other line, decoded later in Python.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from xprof.runcolumns.fields import BULK, SAMPLES
from xprof.runfile import MAX_LINE

_PREFIX = b'{"type":"'
_BULK_PREFIXES = tuple(_PREFIX + t.encode() + b'"' for t in (*BULK, *SAMPLES))
"""How the recorder starts every bulk record: ``{"type":"step"`` ..."""

_CHUNK = 1 << 20
"""Bytes read and classified at a time. Larger buffers (and the mask numpy makes of each) are
fresh memory from the kernel at every file, a page fault each 4 KiB: at 32 MiB, 1274 faults
for a 2.6 MB file, 4.8 ms where the scan's own work is 1.7 ms (issue 38). A line longer than
this grows the buffer."""


class Scan(NamedTuple):
    bulk_lines: int
    """Lines that start like a bulk record."""
    other: list[bytes]
    """Every other line that is not blank, in file order (without its newline)."""
    last_is_bulk: bool
    """The file's last line starts like a bulk record."""
    last_line: bytes
    """The file's last line (without its newline)."""
    longest: int
    """Bytes in the longest line (more than :data:`MAX_LINE` where one is longer than that)."""


def scan_lines(path: str, offset: int) -> Scan:
    """Classify the lines after the header by their first bytes, without one object per line."""
    bulk = 0
    other: list[bytes] = []
    last = b""
    last_bulk = False
    longest = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        buf = bytearray(min(_CHUNK, max(size - offset, 0)) + (1 << 16))
        view = memoryview(buf)
        f.seek(offset)
        held = 0  # bytes of an unfinished line carried over from the last chunk
        while True:
            if held >= MAX_LINE:  # one line longer than any record: read past it
                held = _past_long_line(f, buf)
                longest = MAX_LINE + 1
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
            n, found, last, last_bulk, most = _classify(buf, cut + 1)
            longest = max(longest, most)
            bulk += n
            other.extend(found)
            held = filled - cut - 1
            buf[:held] = buf[cut + 1:filled]
        if held:
            buf[held:held + 1] = b"\n"
            n, found, last, last_bulk, most = _classify(buf, held + 1)
            longest = max(longest, most)
            bulk += n
            other.extend(found)
    view.release()
    return Scan(bulk, other, last_bulk, last, longest)


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


def _classify(buf: bytes | bytearray, size: int) -> tuple[int, list[bytes], bytes, bool, int]:
    """Bulk-looking lines in ``buf[:size]`` (whole lines), the other non-empty lines, the
    last line with whether it looked like a bulk record, and the bytes in the longest line.

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
    return int(is_bulk.sum()), found, last, bool(is_bulk[last_k]), int(lengths.max())
