"""This thread's DuckDB connection and the threads it may use."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# -- DuckDB ---------------------------------------------------------------------------------------

_LOCAL = threading.local()


def thread_connection() -> Any:
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


@contextmanager
def one_reader(con: Any) -> Iterator[None]:
    """DuckDB on one thread while it reads JSON lines into a table: with more, DuckDB 2.0 gave
    rows of a file of many buffers out of file order (one row of a 26 MB file, at 2 and at 4
    threads), and the readers rely on file order. One file is one thread's work anyway."""
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        con.execute(f"SET threads = {_threads()}")


def _threads() -> int:
    wanted = os.environ.get("XPROF_THREADS")
    if wanted and wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    return max(1, min(4, os.cpu_count() or 1))
