"""A rank's digest: the pod view's share of one run file, in a small Parquet file beside it.

A pod of 1024 ranks of 100k steps is 100M step records and tens of GB of run files; each
rank's digest is made where the rank ran (at the exit of ``watch()``, by the child process
that prints the exit summary, or by ``xprof digest FILE...``), and the pod view reads the
digests of every rank in one DuckDB query. The format is in docs/run-format.md ("Digests"):
:mod:`~xprof.analysis.digest.schema` (names, columns, version, the key to the run file's
bytes), :mod:`~xprof.analysis.digest.write` and :mod:`~xprof.analysis.digest.read`.
"""

from __future__ import annotations

from xprof.analysis.digest.read import DigestRead, digest_state, read_digests, window_rows
from xprof.analysis.digest.schema import FORMAT, VERSION, DigestError, digest_path, source_key
from xprof.analysis.digest.write import digest_file, write_digest

__all__ = [
           "FORMAT",
           "VERSION",
           "DigestError",
           "DigestRead",
           "digest_file",
           "digest_path",
           "digest_state",
           "read_digests",
           "source_key",
           "window_rows",
           "write_digest",
]
