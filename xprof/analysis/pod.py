"""Reading the rank files of a pod: in worker processes where that helps, each rank reduced
to a :class:`~xprof.analysis.ranks.RankRun` as soon as it is analysed.

A pod of 256 ranks of 10k steps is 2.6 million step records. Each worker reads a few
files at a time (one DuckDB query per batch, :func:`xprof.runcolumns.load_many`),
analyses them one by one and sends back only what the view needs (the table row, the
findings, the summary), so memory is bounded by one batch, not by the pod. A file that
cannot be read (or analysed) is named with the reason; the others go on.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from xprof.analysis.ranks import RankRun, RanksView, pod_view, rank_of_path, rank_run
from xprof.runcolumns import one_thread

Unreadable = tuple[str, int, str]
"""(path, rank from its name, why) of a file that could not be read."""

PARALLEL_FROM_BYTES = 24 << 20
"""Below this many bytes of rank files, worker processes cost more than they save."""
CHUNK_BYTES = 8 << 20
"""Rank files read at a time (one DuckDB query): small enough that the processes finish together."""


@dataclass
class Pod:
    """The rank files of a multi-process run, read: each rank's :class:`RankRun`, in the order
    given, and the files that could not be read."""

    ranks: list[RankRun] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)

    def view(self) -> RanksView:
        return pod_view(self.ranks, self.unreadable)


def _read(items: Sequence[tuple[int, str]]) -> list[tuple[int, RankRun | Unreadable]]:
    """Read and analyse some rank files (in a worker, or here)."""
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
            out.append((pos, rank_run(analyze(run), pos)))
        except Exception as exc:  # one rank xprof cannot analyse must not hide the others
            if os.environ.get("XPROF_DEBUG"):
                raise
            out.append((pos, (path, rank_of_path(path, pos),
                              f"{path}: xprof could not analyse it ({type(exc).__name__}: {exc})")))
    return out


def _chunks(paths: Sequence[str]) -> list[list[tuple[int, str]]]:
    out: list[list[tuple[int, str]]] = []
    size = 0
    for pos, p in enumerate(paths):
        if not out or size >= CHUNK_BYTES:
            out.append([])
            size = 0
        out[-1].append((pos, p))
        size += _size(p)
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
    """Fork where it is safe (this process has no DuckDB connection, whose threads a child
    would not have): the workers start at once with everything imported. Else a fork server
    that has imported the analysis once, else spawn."""
    from xprof.runcolumns import connected

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and not connected():
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["xprof.analysis", "xprof.analysis.ranks", "xprof.runcolumns"])
        return ctx
    return multiprocessing.get_context("spawn")


def load_pod(paths: Sequence[str], progress: Callable[[int, int], None] | None = None,
             workers: int | None = None) -> Pod:
    """Read and analyse every rank file; ``progress(done, total)`` after each batch.

    With ``workers`` > 1 this process reads batches too: it starts at once while the others
    start, and takes the next batch whenever it is free."""
    total = len(paths)
    n = workers if workers is not None else workers_for(paths)
    pending = deque(_chunks(paths))
    found: dict[int, RankRun | Unreadable] = {}
    done = 0

    def keep(results: list[tuple[int, RankRun | Unreadable]]) -> None:
        nonlocal done
        for pos, got in results:
            found[pos] = got
        done += len(results)
        if progress is not None:
            progress(done, total)

    if n <= 1:
        while pending:
            keep(_read(pending.popleft()))
    else:
        ctx = _context()
        with ProcessPoolExecutor(max_workers=n - 1, mp_context=ctx, initializer=_init_worker) as pool, one_thread():
            running: set[Future[list[tuple[int, RankRun | Unreadable]]]] = set()
            while pending or running:
                for fut in [f for f in running if f.done()]:
                    running.discard(fut)
                    keep(fut.result())
                while pending and len(running) < n - 1:
                    running.add(pool.submit(_read, pending.popleft()))
                if pending:
                    keep(_read(pending.popleft()))  # this process works too
                elif running:
                    wait(running, return_when=FIRST_COMPLETED)
    pod = Pod()
    for pos in range(total):
        got = found[pos]
        if isinstance(got, RankRun):
            pod.ranks.append(got)
        else:
            pod.unreadable.append(got)
    return pod
