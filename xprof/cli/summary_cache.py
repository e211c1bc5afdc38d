"""Summaries already made, kept by what they were made from, so that asking again costs a
file hash and not the analysis (whose pandas import alone is most of a cold start).

The run file goes through the readers' own door first (:func:`xprof.runfile.require_regular`):
only a regular file is hashed, so ``/dev/zero`` or a FIFO is refused by the loader in the same
second it would be without a cache. An entry's key is everything the output is made from: the
run file's bytes (SHA-256), the path as given and the working directory (the output names the
file), the output asked for (``text``, ``json``, ``brief``) with what shapes it (the console's
width and colours), and the code that made it (xprof's version and its modules' sizes and
mtimes, so an edited checkout misses). An entry holds the exact output; a test checks it equals
an uncached run byte for byte over every sample and corpus run. Anything unusual (an unreadable
cache folder, a full disk, a run file over :data:`MAX_RUN_BYTES`) means no cache, never an
error; ``XPROF_NO_CACHE=1`` turns it off and ``XPROF_CACHE_DIR`` moves it (default
``$XDG_CACHE_HOME/xprof``, else ``~/.cache/xprof``). At most :data:`KEEP` entries are kept,
the oldest removed first.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from xprof._version import __version__
from xprof.runfile import RunFileError, require_regular

KEEP = 64
"""Entries kept; past it the least recently written go."""
MAX_RUN_BYTES = 64 << 20
"""Larger run files are not hashed for the cache (their analysis dwarfs a start-up)."""


def folder() -> Path | None:
    """Where entries live, or None when the cache is off."""
    if os.environ.get("XPROF_NO_CACHE", "") not in ("", "0"):
        return None
    base = os.environ.get("XPROF_CACHE_DIR")
    if base:
        return Path(base) / "summary"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "xprof" / "summary"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """xprof's version and the size and mtime of each of its modules."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(__version__.encode())
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def key(run: str, variant: str) -> str | None:
    """The entry name of ``variant`` of the summary of the run file ``run`` as given, from the
    working directory (None: no cache, or not a regular file: the loader then says why)."""
    try:
        if folder() is None:
            return None
        require_regular(run)
        fd = os.open(run, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, RunFileError):
        return None
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RUN_BYTES:
                return None  # (swapped for something else since the check)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            cwd = os.getcwd()
    except OSError:
        return None
    given = os.fsencode(run)
    h.update(b"|%d|%s|%s|" % (len(given), given, os.fsencode(cwd)))
    h.update(f"{variant}|{code_fingerprint()}".encode())
    return h.hexdigest()


def get(name: str | None) -> str | None:
    """The output kept under ``name``, if any."""
    where = folder()
    if name is None or where is None:
        return None
    try:
        fd = os.open(where / name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None  # (an entry is only ever a file xprof wrote)
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def put(name: str | None, text: str) -> None:
    """Keep ``text`` under ``name`` (written whole, then renamed into place), and drop the
    oldest entries past :data:`KEEP`."""
    where = folder()
    if name is None or where is None:
        return
    try:
        data = text.encode("utf-8")  # (read back as bytes: no newline translation either way)
    except UnicodeError:
        return  # (a name that is not UTF-8 made it through the output's own escaping: not kept)
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{name}.{os.getpid()}"
        tmp.write_bytes(data)
        os.replace(tmp, where / name)
        entries = sorted((p for p in where.iterdir() if not p.name.startswith(".")), key=lambda p: p.stat().st_mtime)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        return


def through(run: str, variant: str, make: Callable[[], str]) -> str:
    """``variant`` of the summary of ``run``: the kept one, else ``make()``'s, then kept."""
    name = key(run, variant)
    text = get(name)
    if text is None:
        text = make()
        put(name, text)
    return text
