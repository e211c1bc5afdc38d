"""The writer: records appended to a run file as JSON Lines, one encoder for all of them
(the recorder inside the training process writes through :class:`RunWriter`).
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any

from xprof.runfile.records import FORMAT, VERSION

_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False).encode
"""One encoder for every record: ``json.dumps`` with options builds a new one per call."""


def encode_record(record: dict[str, Any]) -> str:
    """One record as the writer writes it (without the newline)."""
    return _ENCODE(record)


class EncodedRecord(dict):  # type: ignore[type-arg]
    """A record that carries its own encoded line (``line``, newline included), written as
    is: the recorder builds the lines of steady steps from parts it encoded once. It is
    still the record (a dict) for whoever reads the records as they are written."""

    __slots__ = ("line", "steady")

    line: str
    steady: dict[str, Any]
    """The fields it shares with every step written like it (the same object for each): a
    reader that saw one such step can tell the next one is the same kind without comparing."""


def _line(record: dict[str, Any]) -> str:
    if type(record) is EncodedRecord:
        return record.line
    return _ENCODE(record) + "\n"


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
        st = os.fstat(self._file.fileno())
        self._identity = (st.st_dev, st.st_ino)
        self._lock = threading.Lock()
        self.failed: BaseException | None = None
        full = {"format": FORMAT, "version": VERSION, **header}
        self.write(full, flush=True)

    def write(self, record: dict[str, Any], flush: bool = True) -> None:
        self._emit(_ENCODE(record) + "\n", flush)

    def write_many(self, records: list[dict[str, Any]], flush: bool = True) -> None:
        """Several records in one write call (the recorder's batched flushes)."""
        if records:
            self._emit("".join([_line(r) for r in records]), flush)

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

    def gone(self) -> bool:
        """The file is no longer at its path: it, or its folder, was removed or replaced
        (writes would still succeed, into a file nobody can open again)."""
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False
        return (st.st_dev, st.st_ino) != self._identity

    def forget_in_child(self) -> None:
        """In a process forked from the writer's: never write the parent's file. The file's
        descriptor is pointed at ``/dev/null`` (the copy of its buffer would otherwise be
        flushed into the parent's file when the child exits); nothing is flushed or closed,
        and the lock (maybe held by a thread the child does not have) is a new one."""
        f, self._file = self._file, None
        self._lock = threading.Lock()
        if f is None:
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, f.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass


def append_records(path: str | os.PathLike[str], records: list[dict[str, Any]]) -> None:
    """Append records to a finished run file (``xprof run`` adds torch_xla's debug entries
    after the ``end`` record), encoded like the writer's. Raises ``OSError``."""
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join([_ENCODE(r) + "\n" for r in records]))
