"""Reading the rank files of a pod: from their digests first (one DuckDB query over all of
them, :mod:`xprof.analysis.digest`), then the ranks without a usable digest from their run
files, in worker processes where that helps, each rank reduced to a
:class:`~xprof.analysis.ranks.RankRun` as soon as it is analysed.

A pod of 256 ranks of 10k steps is 2.6 million step records. Each worker reads a few
files at a time (one DuckDB query per batch, :func:`xprof.runcolumns.load_many`),
analyses them one by one and sends back only what the view needs (the table row, the
findings, the summary), so memory is bounded by one batch, not by the pod. A file that
cannot be read (or analysed) is named with the reason; the others go on.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from xprof.analysis.model import Analysis
from xprof.analysis.ranks import RankRun, RanksView, pod_view, rank_run
from xprof.runcolumns import one_thread
from xprof.runfile import rank_of_path

Unreadable = tuple[str, int, str]
"""(path, rank from its name, why) of a file that could not be read."""

PARALLEL_FROM_BYTES = 24 << 20
"""Below this many bytes of rank files, worker processes cost more than they save."""
CHUNK_BYTES = 16 << 20
"""Rank files read at a time (one DuckDB query) at most: the batches shrink towards the end
(:func:`_chunks`), so the processes finish together."""


@dataclass
class Pod:
    """The rank files of a multi-process run, read: each rank's :class:`RankRun`, in the order
    given, and the files that could not be read."""

    ranks: list[RankRun] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    first: Analysis | None = None
    """The whole analysis of the first file (the rank shown in full when none stands out)."""
    notes: list[str] = field(default_factory=list)
    """One line for each digest that was there but not used."""

    def analysis_of(self, path: str | None) -> Analysis | None:
        """The whole analysis of ``path`` when it was kept (else read it again)."""
        return self.first if self.first is not None and path == self.first.run.path else None

    def view(self) -> RanksView:
        return pod_view(self.ranks, self.unreadable, self.notes)


def _read(items: Sequence[tuple[int, str]], summaries: bool = True,
          first: list[Analysis] | None = None) -> list[tuple[int, RankRun | Unreadable]]:
    """Read and analyse some rank files (in a worker, or here; ``first``: keep the analysis of
    position 0 there)."""
    from xprof.analysis import analyze
    from xprof.runcolumns import load_many
    from xprof.runfile import RunFileError

    out: list[tuple[int, RankRun | Unreadable]] = []
    runs = load_many([p for _, p in items])
    for (pos, path), run in zip(items, runs):
        if isinstance(run, RunFileError):
            out.append((pos, (path, rank_of_path(path, pos), str(run))))
            continue
        try:
            analysis = analyze(run)
            if first is not None and pos == 0:
                first.append(analysis)
            out.append((pos, rank_run(analysis, pos, summaries)))
        except Exception as exc:  # one rank xprof cannot analyse must not hide the others
            if os.environ.get("XPROF_DEBUG"):
                raise
            out.append((pos, (path, rank_of_path(path, pos),
                              f"{path}: xprof could not analyse it ({type(exc).__name__}: {exc})")))
    return out


def _chunks(items: Sequence[tuple[int, str]], processes: int = 1) -> list[list[tuple[int, str]]]:
    """Batches of files in order, up to :data:`CHUNK_BYTES` each; smaller towards the end (a
    batch is at most the bytes left over twice the processes), so that no process is left
    with a whole batch to read while the others have nothing more to take."""
    sizes = [_size(p) for _, p in items]
    left = sum(sizes)
    out: list[list[tuple[int, str]]] = []
    size = limit = 0
    for (pos, p), s in zip(items, sizes):
        if not out or size >= limit:
            out.append([])
            size = 0
            limit = CHUNK_BYTES if processes <= 1 else min(CHUNK_BYTES, left // (2 * processes))
        out[-1].append((pos, p))
        size += s
        left -= s
    return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def workers_for(paths: Sequence[str]) -> int:
    """How many worker processes to read ``paths`` with (1: read them here)."""
    wanted = os.environ.get("XPROF_WORKERS")
    if wanted and wanted.isdigit():
        return max(1, int(wanted))
    if len(paths) < 4 or sum(_size(p) for p in paths) < PARALLEL_FROM_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 8, len(paths)))  # (this process is one of them)


def _init_worker() -> None:
    from xprof.runcolumns import single_threaded

    single_threaded()  # one DuckDB thread per process: the processes are the parallelism


def _context() -> Any:
    """Fork where it is safe (Linux, and this process has no DuckDB connection, whose threads a
    child would not have): the workers start at once with everything imported. Else a fork
    server that has imported the analysis once, else spawn."""
    from xprof.runcolumns import connected

    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods and not connected():  # (macOS: not fork-safe)
        import duckdb  # noqa: F401  (imported once here, not in each child: the import starts no thread)

        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["xprof.analysis", "xprof.analysis.ranks", "xprof.runcolumns"])
        return ctx
    return multiprocessing.get_context("spawn")


def load_pod(paths: Sequence[str], progress: Callable[[int, int], None] | None = None,
             workers: int | None = None, summaries: bool = True, digests: bool = True) -> Pod:
    """Read every rank: from its digest where it has a usable one (``digests``), else from its
    run file, analysed; ``progress(done, total)`` after each batch; ``summaries``: keep each
    rank's ``xprof-summary`` object (for ``--json``).

    With ``workers`` > 1, ``workers - 1`` processes and this one take batches from one queue:
    a worker that finishes is handed the next batch at once, and this process starts at once
    while the others start."""
    from xprof.analysis.digest import DigestRead, read_digests

    total = len(paths)
    items = list(enumerate(paths))
    digested = read_digests(items, summaries) if digests else DigestRead(fallback=items)
    rest = digested.fallback
    n = workers if workers is not None else workers_for([p for _, p in rest])
    pending = deque(_chunks(rest, n))
    found: dict[int, RankRun | Unreadable] = dict(digested.ranks)
    lock = threading.Lock()
    if found and progress is not None:
        progress(len(found), total)

    def keep(results: list[tuple[int, RankRun | Unreadable]]) -> None:
        with lock:
            for pos, got in results:
                found[pos] = got
            done = len(found)
        if progress is not None:
            progress(done, total)

    def take() -> list[tuple[int, str]] | None:
        try:
            return pending.popleft()  # (atomic: this process and the pool's thread both take)
        except IndexError:
            return None

    first: list[Analysis] = []
    if n <= 1:
        while (chunk := take()) is not None:
            keep(_read(chunk, summaries, first))
    else:
        futures: list[Future[list[tuple[int, RankRun | Unreadable]]]] = []
        with ProcessPoolExecutor(max_workers=n - 1, mp_context=_context(), initializer=_init_worker) as pool, \
                one_thread():

            def hand_out(done: Future[Any] | None = None) -> None:
                """Give a worker the next batch (called again when one finishes)."""
                if done is not None and not done.cancelled() and done.exception() is None:
                    keep(done.result())
                chunk = take()
                if chunk is not None:
                    fut = pool.submit(_read, chunk, summaries)
                    futures.append(fut)
                    fut.add_done_callback(hand_out)

            mine = take()  # the first batch is this process's: the first rank is often the one shown
            for _ in range(n - 1):
                hand_out()
            while mine is not None:
                keep(_read(mine, summaries, first))  # this process works too
                mine = take()
            while not all(f.done() for f in list(futures)):
                wait(list(futures))
            for fut in list(futures):
                fut.result()  # a worker's error is raised here
    pod = Pod(first=first[0] if first else None, notes=digested.notes)
    for pos in range(total):
        got = found[pos]
        if isinstance(got, RankRun):
            pod.ranks.append(got)
        else:
            pod.unreadable.append(got)
    return pod
