"""What a digest is: its name beside the run file, its columns, its version and the key that
ties it to the bytes of the run file it was made from.

A digest is one Parquet file (written and read by DuckDB) holding one rank's share of the
pod view: the rank row, its findings and summary, its signatures and read sites, and one
row per compile, host read and step. Every row has a ``kind``; the rows are written in
order of kind, the few first, so a reader that wants only the rank rows and findings of
1024 digests skips the row groups of their steps (Parquet's statistics on ``kind``).
"""

from __future__ import annotations

import hashlib
import os

FORMAT = "xprof-digest"
VERSION = 1
"""Bumped when an older reader would misread a digest (docs/run-format.md, "Digests")."""

SUFFIX = ".digest.parquet"
ROW_GROUP_SIZE = 16384

# Kinds of row, in the order they are written.
RANK, FINDING, SUMMARY, SIG, SITE, COMPILE, SYNC, STEP = range(8)

COLUMNS: dict[str, str] = {
    "kind": "TINYINT",
    "step": "BIGINT",
    # compile, sync: the training step; step: its ordinal (-1: an empty barrier); sig, site: the id
    "ms": "DOUBLE",
    "flag": "BOOLEAN",
    # compile: a recompile (after warm-up); step: a steady-state step
    "n": "BIGINT",
    # step: the training step of the barrier
    "text": "VARCHAR",
    # finding, summary, sig, site: the object as JSON
    # The rank row's own columns (NULL on the other rows).
    "format": "VARCHAR",
    "version": "INTEGER",
    "xprof": "VARCHAR",
    "src_size": "BIGINT",
    "src_hash": "VARCHAR",
    "rank": "INTEGER",
    # the rank the run file's header names (NULL: none; the reader takes the file name's)
    "world_size": "INTEGER",
    "name": "VARCHAR",
    "steps": "BIGINT",
    "compiles": "BIGINT",
    "recompiles": "BIGINT",
    "compile_s": "DOUBLE",
    "syncs": "BIGINT",
    "sync_wait_s": "DOUBLE",
    "step_ms_median": "DOUBLE",
    "complete": "BOOLEAN",
}

KEY_BYTES = 1 << 14
"""The key hashes this many bytes at each end of the run file (and its size)."""


class DigestError(Exception):
    """A digest that cannot be used, with the one line that says why."""


def digest_path(run_path: str) -> str:
    """Where the digest of ``run_path`` lives: beside it, ``run.rank3.json.digest.parquet``."""
    return str(run_path) + SUFFIX


def source_key(run_path: str) -> tuple[int, str]:
    """(size, hash of the size and of the first and last :data:`KEY_BYTES`) of a run file: a
    digest made from other bytes (an older state of a file still being written, a file
    written again) has another key. Reads 32 KiB whatever the file's size. ``OSError``
    when it cannot be read."""
    with open(run_path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h = hashlib.blake2b(str(size).encode(), digest_size=16)
        h.update(f.read(KEY_BYTES))
        if size > KEY_BYTES:
            f.seek(max(KEY_BYTES, size - KEY_BYTES))
            h.update(f.read(KEY_BYTES))
    return size, h.hexdigest()
