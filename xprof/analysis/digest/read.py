"""Reading the digests of a pod: one DuckDB query over every digest (``read_parquet`` of the
list) gives each rank's row and findings (:func:`read_digests`); a second one, only when the
ranks reached different steps, gives their numbers over the steps they all reached
(:func:`window_rows`).

A digest is used only when it is whole, of this format, not newer than this reader, and
made from the bytes its run file has now (:func:`~xprof.analysis.digest.schema.source_key`);
otherwise the rank is read from its run file, with a note that says why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xprof.analysis.digest.schema import (
    COMPILE,
    FINDING,
    FORMAT,
    RANK,
    STEP,
    SUMMARY,
    SYNC,
    VERSION,
    DigestError,
    digest_path,
    source_key,
)
from xprof.analysis.model import Finding
from xprof.analysis.ranks import RankRun
from xprof.runfile import rank_of_path

_FINDING_FIELDS = {f.name for f in dataclasses.fields(Finding)}
_RANK_COLUMNS = ["kind", "text", "format", "version", "xprof", "src_size", "src_hash", "rank", "world_size", "name",
                 "steps", "compiles", "recompiles", "compile_s", "syncs", "sync_wait_s", "step_ms_median",
                 "complete"]


@dataclass
class DigestRead:
    """What the digests gave: each rank read from one (by position), the positions to read from
    their run files, and a note for each digest that was there but not used."""

    ranks: dict[int, RankRun] = field(default_factory=dict)
    fallback: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    writers: dict[int, str] = field(default_factory=dict)
    """The xprof version that wrote each digest used (by position)."""


def _connect() -> Any:
    import duckdb

    threads = os.environ.get("XPROF_THREADS")
    n = int(threads) if threads and threads.isdigit() and int(threads) > 0 else max(1, min(4, os.cpu_count() or 1))
    return duckdb.connect(":memory:", config={"threads": n, "preserve_insertion_order": True})


def _quote(paths: Sequence[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def _rows(con: Any, digests: Sequence[str], upto_kind: int) -> list[tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in _RANK_COLUMNS)
    return list(con.execute(f"SELECT filename, {cols} FROM read_parquet({_quote(digests)}, filename=true) "
                            f"WHERE kind <= {upto_kind}").fetchall())


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return re.sub(r"^[A-Za-z ]*Error: ", "", first)


def _query(digests: list[str], upto_kind: int) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """The rows of every digest (one query), and why each digest that could not be read
    was not (then each is read alone, to tell the bad ones from the others)."""
    import duckdb

    if not digests:
        return [], {}
    con = _connect()
    try:
        try:
            return _rows(con, digests, upto_kind), {}
        except duckdb.Error:
            pass
        rows: list[tuple[Any, ...]] = []
        bad: dict[str, str] = {}
        for d in digests:
            try:
                rows.extend(_rows(con, [d], upto_kind))
            except duckdb.Error as exc:
                bad[d] = f"not a digest xprof can read ({_one_line(exc)})"
        return rows, bad
    finally:
        con.close()


def _finding(text: str) -> Finding:
    doc = json.loads(text)
    return Finding(**{k: v for k, v in doc.items() if k in _FINDING_FIELDS})


def _empty() -> np.ndarray:
    return np.zeros(0)


def _rank_run(pos: int, path: str, digest: str, head: dict[str, Any], found: list[tuple[Any, ...]],
              summaries: bool) -> RankRun:
    rank = head["rank"] if head["rank"] is not None else rank_of_path(path, pos)
    complete = bool(head["complete"])
    median = head["step_ms_median"]
    row = {"rank": rank, "name": head["name"], "steps": int(head["steps"]), "compiles": int(head["compiles"]),
           "recompiles": int(head["recompiles"]), "compile_s": float(head["compile_s"]),
           "syncs": int(head["syncs"]), "sync_wait_s": float(head["sync_wait_s"]),
           "step_ms_median": None if median is None else float(median),
           "status": "ok" if complete else "incomplete", "path": path}
    findings = [_finding(r[2]) for r in found if r[1] == FINDING]
    summary: dict[str, Any] = {}
    if summaries:
        summary = next((json.loads(r[2]) for r in found if r[1] == SUMMARY), {})
    world = head["world_size"]
    return RankRun(rank=rank, path=path, name=head["name"], row=row, findings=findings, summary=summary,
                   complete=complete, world_size=int(world) if world is not None else None,
                   recompile_steps=_empty(), compile_steps=_empty(), compile_ms=_empty(), sync_steps=_empty(),
                   sync_ms=_empty(), steady_steps=_empty(), steady_ms=_empty(), digest=digest,
                   windows=window_rows)


def _why_not(digest: str, head: dict[str, Any] | None, heads: int, key: tuple[int, str]) -> str | None:
    """Why a digest whose rows were read cannot stand for its run file (None: it can)."""
    if head is None or heads != 1 or head["format"] != FORMAT or not isinstance(head["version"], int):
        return "not an xprof digest"
    if head["version"] > VERSION:
        return (f"digest format version {head['version']} (written by xprof {head['xprof']}) is newer than this "
                f"xprof reads (up to version {VERSION})")
    if (head["src_size"], head["src_hash"]) != key:
        return "made from other bytes than the run file has now (an older state of it, or another file)"
    return None


def read_digests(items: Sequence[tuple[int, str]], summaries: bool = False) -> DigestRead:
    """The ranks of ``items`` (position, run file) that have a usable digest, read by one
    query; the others are to be read from their run files."""
    out = DigestRead()
    keys: dict[str, tuple[int, str, tuple[int, str]]] = {}
    for pos, path in items:
        d = digest_path(path)
        if not os.path.isfile(d):
            out.fallback.append((pos, path))
            continue
        try:
            keys[d] = (pos, path, source_key(path))
        except OSError:
            out.fallback.append((pos, path))  # (the run file's own reader says why)
    rows, bad = _query(list(keys), SUMMARY if summaries else FINDING)
    by_digest: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_digest.setdefault(r[0], []).append(r)
    for d, (pos, path, key) in keys.items():
        found = by_digest.get(d, [])
        heads = [r for r in found if r[1] == RANK]
        head = dict(zip(_RANK_COLUMNS, heads[0][1:])) if heads else None
        why = bad.get(d) or _why_not(d, head, len(heads), key)
        if why is None and head is not None:
            try:
                out.ranks[pos] = _rank_run(pos, path, d, head, found, summaries)
                out.writers[pos] = str(head["xprof"])
                continue
            except (ValueError, TypeError) as exc:
                why = f"not a digest xprof can read ({_one_line(exc)})"
        out.notes.append(f"{d}: {why}; read {os.path.basename(path)} instead")
        out.fallback.append((pos, path))
    out.fallback.sort()
    return out


def window_rows(digests: Sequence[str], upto: int) -> dict[str, dict[str, Any]]:
    """Each digest's compiles, recompiles, compile seconds, host reads, their wait and median
    steady step over steps ``0 .. upto - 1`` (what :func:`xprof.analysis.ranks.judged` computes
    from a rank's arrays: the same numbers, summed in the same order)."""
    if not digests:
        return {}
    con = _connect()
    try:
        src = f"read_parquet({_quote(digests)}, filename=true, file_row_number=true)"
        sums = con.execute(
            f"SELECT filename, kind, list(ms ORDER BY file_row_number), count(*) FILTER (WHERE flag) "
            f"FROM {src} WHERE kind IN ({COMPILE}, {SYNC}) AND step < {int(upto)} GROUP BY ALL").fetchall()
        medians = con.execute(
            f"SELECT filename, quantile_disc(ms, 0.5), -quantile_disc(-ms, 0.5) "
            f"FROM {src} WHERE kind = {STEP} AND flag AND step < {int(upto)} GROUP BY ALL").fetchall()
    except Exception as exc:  # a digest changed under us since it was checked
        raise DigestError(f"digests: cannot read ({_one_line(exc)})") from None
    finally:
        con.close()
    out: dict[str, dict[str, Any]] = {d: {"compiles": 0, "recompiles": 0, "compile_s": 0.0, "syncs": 0,
                                          "sync_wait_s": 0.0, "step_ms_median": None} for d in digests}
    for name, kind, ms, flagged in sums:
        seconds = round(float(np.asarray(ms, dtype=float).sum()) / 1e3, 6)
        if kind == COMPILE:
            out[name].update(compiles=len(ms), recompiles=int(flagged), compile_s=seconds)
        else:
            out[name].update(syncs=len(ms), sync_wait_s=seconds)
    for name, lo, hi in medians:
        out[name]["step_ms_median"] = float(np.median([lo, hi]))
    return out


def digest_state(run_path: str) -> tuple[str, str]:
    """The state of ``run_path``'s digest and the line that says it: ``none`` (no digest),
    ``fresh`` (usable, and written by this xprof), ``newer`` (a newer format: left as it is),
    ``stale`` (other bytes, or another xprof's findings) or ``bad`` (to be made again)."""
    from xprof._version import __version__

    d = digest_path(run_path)
    if not os.path.isfile(d):
        return "none", f"{d}: no digest"
    got = read_digests([(0, run_path)])
    if got.ranks:
        if got.writers[0] != __version__:
            return "stale", f"{d}: written by xprof {got.writers[0]}, this is {__version__}"
        return "fresh", f"{d}: up to date"
    why = got.notes[0].split("; read ")[0] if got.notes else f"{d}: its run file cannot be read"
    return ("newer" if "is newer than this xprof reads" in why else
            "stale" if "other bytes" in why else "bad"), why
