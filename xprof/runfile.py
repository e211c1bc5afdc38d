"""The run file: the one thing the recorder and the analysis share.

A run file is JSON Lines. Its first line is a header object that says what the file
is (``"format": "xprof-run"``) and which version of the format wrote it; every other
line is one record with a ``"type"`` key. The recorder appends records as the run goes
and flushes them, so a process that is killed still leaves a readable file; a complete
run ends with an ``end`` record. ``docs/run-format.md`` documents every record.

This module imports nothing heavy: it is used inside the training process (writing)
and on a laptop without torch (reading).
"""

from __future__ import annotations

import gc
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import IO, Any

FORMAT = "xprof-run"
VERSION = 1
"""The newest run-file version this build writes and reads."""


_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False).encode
"""One encoder for every record: ``json.dumps`` with options builds a new one per call."""


class RunFileError(Exception):
    """A run file that cannot be read; the message is one line meant for a person."""


@dataclass
class Run:
    """A loaded run file, grouped by record type, in file order."""

    path: str
    header: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    syncs: list[dict[str, Any]] = field(default_factory=list)
    sites: dict[int, dict[str, Any]] = field(default_factory=dict)
    signatures: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    compiles: list[dict[str, Any]] = field(default_factory=list)
    executions: list[tuple[float, float]] = field(default_factory=list)
    graph_sizes: list[tuple[float, float]] = field(default_factory=list)
    transfers: list[tuple[float, float]] = field(default_factory=list)
    """``(end_unix_s, duration_ns)`` TransferFromDeviceTime samples, from ``xfer`` records."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    debug: list[dict[str, Any]] = field(default_factory=list)
    dynamo: list[dict[str, Any]] = field(default_factory=list)
    """``dynamo`` records: torch._dynamo's failed guards (why torch.compile recompiled)."""
    end: dict[str, Any] | None = None
    skipped_lines: int = 0
    truncated_tail: bool = False

    @property
    def complete(self) -> bool:
        """True when the recorder wrote its ``end`` record (the process did not die)."""
        return self.end is not None

    @property
    def name(self) -> str:
        return str(self.header.get("name") or Path(self.path).stem)

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.header.get("meta")
        return meta if isinstance(meta, dict) else {}


class RunWriter:
    """Appends records to a run file, one JSON object a line, flushed as it goes.

    Thread-safe: hooks may fire on a data-loading thread. Write errors (a full disk, a
    removed folder) are raised to the caller once and then the writer goes quiet, so the
    recorder can log the failure and let training carry on.
    """

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any]) -> None:
        self.path = str(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        self._file: IO[str] | None = open(self.path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self.failed: BaseException | None = None
        full = {"format": FORMAT, "version": VERSION, **header}
        self.write(full, flush=True)

    def write(self, record: dict[str, Any], flush: bool = True) -> None:
        self._emit(_ENCODE(record) + "\n", flush)

    def write_many(self, records: list[dict[str, Any]], flush: bool = True) -> None:
        """Several records in one write call (the recorder's batched flushes)."""
        if records:
            self._emit("".join([_ENCODE(r) + "\n" for r in records]), flush)

    def flush(self) -> None:
        self._emit("", True)

    def _emit(self, text: str, flush: bool) -> None:
        with self._lock:
            f = self._file
            if f is None:
                return
            try:
                if text:
                    f.write(text)
                if flush:
                    f.flush()
            except BaseException as exc:
                self.failed = exc
                self._file = None
                try:
                    f.close()
                except OSError:
                    pass
                raise

    def close(self) -> None:
        with self._lock:
            f, self._file = self._file, None
        if f is not None:
            f.close()


def _parse_header(path: str, first: str) -> dict[str, Any]:
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
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


def _num_pairs(value: Any) -> list[tuple[float, float]]:
    """``[[a, b], ...]`` as float pairs; items that are not two numbers are dropped."""
    if not isinstance(value, list):
        return []
    # Fast path: every item a list of two floats (what the recorder writes), checked at C
    # speed. Anything else (ints, bools, odd items) goes through the item-by-item check.
    if (set(map(type, value)) <= {list} and set(map(len, value)) <= {2}
            and set(map(type, chain.from_iterable(value))) <= {float}):
        return list(map(tuple, value))
    out: list[tuple[float, float]] = []
    for item in value:
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item)
        ):
            out.append((float(item[0]), float(item[1])))
    return out


def _add_step(run: Run, rec: dict[str, Any]) -> bool:
    if not isinstance(rec.get("i"), int):
        return False
    run.steps.append(rec)
    return True


def _add_sync(run: Run, rec: dict[str, Any]) -> bool:
    run.syncs.append(rec)
    return True


def _add_site(run: Run, rec: dict[str, Any]) -> bool:
    if not isinstance(rec.get("id"), int):
        return False
    run.sites[rec["id"]] = rec
    return True


def _add_sig(run: Run, rec: dict[str, Any]) -> bool:
    inputs = rec.get("inputs")
    if not isinstance(rec.get("id"), int) or not isinstance(inputs, list):
        return False
    run.signatures[rec["id"]] = [i for i in inputs if isinstance(i, dict)]
    return True


def _add_compile(run: Run, rec: dict[str, Any]) -> bool:
    run.compiles.append(rec)
    return True


def _add_exec(run: Run, rec: dict[str, Any]) -> bool:
    run.executions.extend(_num_pairs(rec.get("samples")))
    return True


def _add_xfer(run: Run, rec: dict[str, Any]) -> bool:
    run.transfers.extend(_num_pairs(rec.get("samples")))
    return True


def _add_graph_sizes(run: Run, rec: dict[str, Any]) -> bool:
    run.graph_sizes.extend(_num_pairs(rec.get("samples")))
    return True


def _add_error(run: Run, rec: dict[str, Any]) -> bool:
    run.errors.append(rec)
    return True


def _add_dynamo(run: Run, rec: dict[str, Any]) -> bool:
    failures = rec.get("guard_failures")
    if not isinstance(failures, list):
        return False
    run.dynamo.extend(f for f in failures if isinstance(f, dict))
    return True


def _add_debug(run: Run, rec: dict[str, Any]) -> bool:
    run.debug.append(rec)
    return True


def _add_end(run: Run, rec: dict[str, Any]) -> bool:
    run.end = rec
    return True


_ADDERS: dict[str, Callable[[Run, dict[str, Any]], bool]] = {
    "step": _add_step, "sync": _add_sync, "site": _add_site, "sig": _add_sig,
    "compile": _add_compile, "exec": _add_exec, "xfer": _add_xfer,
    "graph_sizes": _add_graph_sizes, "error": _add_error, "debug": _add_debug, "dynamo": _add_dynamo, "end": _add_end,
}
"""Record type -> the function that files it (a dict lookup per line, not an if-chain)."""


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


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read and validate a run file; raise :class:`RunFileError` with one line on bad input.

    A file whose last line was cut off mid-write (the process was killed) loads with
    ``truncated_tail`` set and without an ``end`` record; unknown record types from a
    newer minor change, lines that are not JSON and lines with bytes that are not UTF-8
    are skipped and counted in ``skipped_lines``, never fatal. Lines are parsed one at a
    time on purpose: parsing a batch as one JSON array can merge two damaged lines into
    one valid value and so hide them from the count.
    """
    p = str(path)
    if os.path.isdir(p):
        raise RunFileError(f"{p}: is a directory, not a run file")
    try:
        # surrogateescape: a byte that is not UTF-8 damages only its own line (that line is
        # skipped like any unreadable one); only a header that is not UTF-8 refuses the file.
        f = open(p, encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file")
    except PermissionError:
        raise RunFileError(f"{p}: permission denied")
    except OSError as exc:
        raise RunFileError(f"{p}: cannot open ({exc.strerror or exc})")
    with f, gc_paused():
        first = f.readline()
        if not first.strip():
            raise RunFileError(f"{p}: empty file, not an xprof run file")
        if _UNDECODABLE.search(first):
            raise RunFileError(f"{p}: not an xprof run file (not UTF-8 text)")
        header = _parse_header(p, first)
        run = Run(path=p, header=header)
        pending: str | None = None
        # json.loads(line) is decode() -> raw_decode() -> scan_once(); calling the scanner
        # directly saves two regex matches and three calls per line (a million lines in a
        # long run).
        scan = _SCANNER
        adders = _ADDERS
        for line in f:
            if pending is not None:
                # A bad line followed by more lines is corruption in the middle.
                run.skipped_lines += 1
                pending = None
            if not line.strip():
                continue
            if not line.isascii() and _UNDECODABLE.search(line):
                # A byte that is not UTF-8: this line is unreadable, like one cut JSON.
                pending = line
                continue
            try:
                rec, end = scan(line, 0)
                if end != len(line) and (end != len(line) - 1 or line[end] != "\n"):
                    raise ValueError  # more than the newline after the value: let loads() judge
            except (StopIteration, ValueError):
                # Not a JSON value starting at the first character, or text after it: the
                # full parser accepts or rejects it exactly as json.loads always did.
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    pending = line
                    continue
            if type(rec) is dict:
                kind = rec.get("type")
                add = adders.get(kind) if type(kind) is str else None
                if add is not None and add(run, rec):
                    continue
            run.skipped_lines += 1
        if pending is not None:
            run.truncated_tail = True
    run.steps.sort(key=lambda s: s["i"])
    return run
