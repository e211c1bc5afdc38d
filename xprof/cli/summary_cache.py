"""Summaries already made, kept by what they were made from, so that asking again costs a
file hash and not the analysis (whose pandas import alone is most of a cold start).

An entry's key is the run file's bytes (SHA-256), the output asked for (``text``, ``json``,
``brief``) with what shapes it (the console's width and colours), and the code that made it
(xprof's version and its modules' sizes and mtimes, so an edited checkout misses). An entry
holds the exact output. Anything unusual (an unreadable cache folder, a full disk, a run file
over :data:`MAX_RUN_BYTES`) means no cache, never an error; ``XPROF_NO_CACHE=1`` turns it
off and ``XPROF_CACHE_DIR`` moves it (default ``$XDG_CACHE_HOME/xprof``, else
``~/.cache/xprof``). At most :data:`KEEP` entries are kept, the oldest removed first.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from xprof._version import __version__

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
    """The entry name of ``variant`` of the summary of the run file ``run`` (None: no cache)."""
    try:
        if folder() is None or os.path.getsize(run) > MAX_RUN_BYTES:
            return None
        h = hashlib.sha256()
        with open(run, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    h.update(f"|{variant}|{code_fingerprint()}".encode())
    return h.hexdigest()


def get(name: str | None) -> str | None:
    """The output kept under ``name``, if any."""
    where = folder()
    if name is None or where is None:
        return None
    try:
        return (where / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def put(name: str | None, text: str) -> None:
    """Keep ``text`` under ``name`` (written whole, then renamed into place), and drop the
    oldest entries past :data:`KEEP`."""
    where = folder()
    if name is None or where is None:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{name}.{os.getpid()}"
        tmp.write_text(text, encoding="utf-8")
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
