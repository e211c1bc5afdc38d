"""Writing a rank's digest from its analysis (:func:`write_digest`), or from a run file
(:func:`digest_file`, what ``xprof digest`` and the exit of ``watch()`` call).

The digest holds :func:`xprof.analysis.ranks.rank_run` of the analysis, so the pod view
read from digests is made of the same numbers as the one read from run files.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pandas as pd

from xprof._version import __version__
from xprof.analysis.digest.schema import (
    COLUMNS,
    COMPILE,
    FINDING,
    FORMAT,
    RANK,
    ROW_GROUP_SIZE,
    SIG,
    SITE,
    STEP,
    SUMMARY,
    SYNC,
    VERSION,
    DigestError,
    digest_path,
    source_key,
)
from xprof.analysis.model import Analysis
from xprof.analysis.ranks import RankRun, rank_run, recompile_mask, steady_mask


def _rank_row(analysis: Analysis, r: RankRun, key: tuple[int, str]) -> dict[str, Any]:
    row = r.row
    return {"kind": RANK, "format": FORMAT, "version": VERSION, "xprof": __version__, "src_size": key[0],
            "src_hash": key[1], "rank": analysis.run.rank, "world_size": r.world_size, "name": r.name,
            "steps": row["steps"], "compiles": row["compiles"], "recompiles": row["recompiles"],
            "compile_s": row["compile_s"], "syncs": row["syncs"], "sync_wait_s": row["sync_wait_s"],
            "step_ms_median": row["step_ms_median"], "complete": r.complete}


def _json(value: Any) -> str:
    return json.dumps(value, default=str, separators=(",", ":"))


def _parts(a: Analysis, key: tuple[int, str]) -> list[pd.DataFrame]:
    """The rows of the digest, one frame per kind, in the order they are written."""
    r = rank_run(a, 0, summary=True)
    steps = a.steps
    sigs = [{"kind": SIG, "step": k, "text": _json([list(i) for i in inputs])}
            for k, inputs in sorted(a.run.signatures.items())]
    sites = [{"kind": SITE, "step": k, "text": _json(s._asdict())} for k, s in sorted(a.run.sites.items())]
    return [
        pd.DataFrame([_rank_row(a, r, key)]),
        pd.DataFrame({"kind": FINDING, "ms": [f.seconds * 1e3 for f in r.findings],
                      "text": [_json(f.to_json()) for f in r.findings]}),
        pd.DataFrame([{"kind": SUMMARY, "text": _json(r.summary)}]),
        pd.DataFrame(sigs, columns=["kind", "step", "text"]),
        pd.DataFrame(sites, columns=["kind", "step", "text"]),
        pd.DataFrame({"kind": COMPILE, "step": r.compile_steps, "ms": r.compile_ms, "flag": recompile_mask(a)}),
        pd.DataFrame({"kind": SYNC, "step": r.sync_steps, "ms": r.sync_ms}),
        pd.DataFrame({"kind": STEP, "step": steps["ordinal"].to_numpy(dtype=np.int64),
                      "ms": steps["step_ms"].to_numpy(dtype=float), "flag": steady_mask(a),
                      "n": steps["user_step"].to_numpy(dtype=np.int64)}),
    ]


def _select(name: str, frame: pd.DataFrame) -> str:
    cols = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' if c in frame.columns else f'CAST(NULL AS {t}) AS "{c}"'
                     for c, t in COLUMNS.items())
    return f"SELECT {cols} FROM {name}"


def write_digest(analysis: Analysis, run_path: str, key: tuple[int, str] | None = None) -> str:
    """Write the digest of ``analysis`` (of the run file ``run_path``, whose bytes had ``key``
    when it was read: :func:`source_key`) beside the run file; its path. Written to a
    temporary name first, so a reader never sees half a digest. :class:`DigestError` with
    one line when it cannot be written."""
    import duckdb

    target = digest_path(run_path)
    try:
        key = key or source_key(run_path)
    except OSError as exc:
        raise DigestError(f"{run_path}: cannot read ({exc.strerror or exc})") from None
    parts = _parts(analysis, key)
    tmp = f"{target}.{os.getpid()}.tmp"
    con = duckdb.connect(":memory:", config={"threads": 1, "preserve_insertion_order": True})
    try:
        names = []
        for k, frame in enumerate(parts):
            con.register(f"part{k}", frame)
            names.append(_select(f"part{k}", frame))
        query = " UNION ALL ".join(f"({q})" for q in names)
        escaped = tmp.replace("'", "''")
        con.execute(f"COPY ({query}) TO '{escaped}' (FORMAT parquet, COMPRESSION zstd, "
                    f"ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
        os.replace(tmp, target)
    except (duckdb.Error, OSError) as exc:
        _remove(tmp)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        raise DigestError(f"{target}: cannot write the digest ({why})") from None
    finally:
        con.close()
    return target


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def digest_file(run_path: str) -> str:
    """Read and analyse ``run_path`` and write its digest beside it; the digest's path.
    ``RunFileError`` for a run file that cannot be read, :class:`DigestError` for a
    digest that cannot be written."""
    from xprof.analysis import analyze
    from xprof.runcolumns import load_columns

    try:
        key = source_key(run_path)
    except OSError as exc:
        raise DigestError(f"{run_path}: cannot read ({exc.strerror or exc})") from None
    return write_digest(analyze(load_columns(run_path)), run_path, key)
