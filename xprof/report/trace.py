"""A run as a Chrome trace (Trace Event Format), to open in Perfetto or chrome://tracing.

A timeline is the fastest way to see that a step was slow because it compiled, or that
a host read stalled it. One process per rank, one track each for steps (with the
barrier nested inside), compiles, executions and host syncs; every event is a complete
(``"ph": "X"``) event with ``ts``/``dur`` in microseconds from the start of the run.

Times come from the run file: steps and syncs are wall-clock spans recorded by xprof;
compiles and executions are torch_xla metric samples, stamped when they *finished*
(so they start at ``t - duration``). Reads only the run file: no torch, no pandas.
"""

from __future__ import annotations

from typing import Any

from xprof._version import __version__
from xprof.runcolumns import with_records
from xprof.runfile import Run, Site

TID_STEPS = 1
TID_COMPILES = 2
TID_EXECUTIONS = 3
TID_SYNCS = 4
TRACKS = {TID_STEPS: "steps", TID_COMPILES: "compiles", TID_EXECUTIONS: "executions",
          TID_SYNCS: "host syncs"}
LANE_STRIDE = 10
"""A slice that overlaps one on its track without nesting in it (executions torch_xla ran
concurrently) moves to a lane of its own, ``tid + LANE_STRIDE * lane``, named "executions (2)":
on one track, Perfetto's importer would drop it."""


def _pid(run: Run) -> int:
    return run.rank if run.rank is not None else 0


def _origin(run: Run) -> float:
    """The earliest time in the run, so no event gets a negative timestamp."""
    times: list[float] = []
    if run.started_unix is not None:
        times.append(run.started_unix)
    times.extend(s.t0 for s in run.steps)
    times.extend(c.t - c.ns / 1e9 for c in run.compiles)
    times.extend(end - ns / 1e9 for end, ns in run.executions)
    times.extend(s.t0 for s in run.syncs)
    return min(times) if times else 0.0


def _ns(t: float, origin: float) -> int:
    """Whole nanoseconds since ``origin``: each instant rounded once, so a span that ends
    where the next begins (a step and the next, a barrier and its step) shares that value."""
    return round((t - origin) * 1e9)


def _us(t: float, origin: float) -> float:
    return _ns(t, origin) / 1000


def _span(name: str, cat: str, pid: int, tid: int, start: float, end: float, origin: float,
          args: dict[str, Any]) -> dict[str, Any]:
    """A complete event whose ``ts`` and ``dur`` (µs, to the ns) come from its start and end
    rounded once each, never its duration rounded apart: Perfetto's importer drops a slice that
    ends even 1 ns past the end of the slice around it or the start of the next."""
    first = _ns(start, origin)
    last = max(_ns(end, origin), first)
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": first / 1000, "dur": (last - first) / 1000, "args": args}


def _site_label(site: Site | None) -> str:
    if not site:
        return "sync"
    return f"{site.access} at {site.file.rsplit('/', 1)[-1]}:{site.line}"


def _into_lanes(events: list[dict[str, Any]]) -> set[int]:
    """Move each slice to the first lane of its track where it nests in or follows what is
    open there (``events`` sorted by track, start, longest first); the extra lanes' tids."""
    open_ends: dict[int, list[int]] = {}
    extra: set[int] = set()
    for e in events:
        start = round(e["ts"] * 1000)
        end = start + round(e["dur"] * 1000)
        tid = e["tid"]
        while True:
            ends = open_ends.setdefault(tid, [])
            while ends and ends[-1] <= start:
                ends.pop()
            if not ends or end <= ends[-1]:
                break
            tid += LANE_STRIDE
        ends.append(end)
        if tid != e["tid"]:
            extra.add(tid)
            e["tid"] = tid
    return extra


def chrome_trace(run: Run) -> dict[str, Any]:
    """The trace as a JSON-ready dict: ``{"traceEvents": [...], ...}`` (a run read as columns
    is walked as typed records)."""
    run = with_records(run)
    pid = _pid(run)
    origin = _origin(run)
    events: list[dict[str, Any]] = []
    for s in run.steps:
        step_args: dict[str, Any] = {"barrier": s.barrier, "counters": s.counters,
                                     "barrier_uncached": s.barrier_uncached, "barrier_cached": s.barrier_cached}
        if s.sig is not None:
            step_args["sig"] = s.sig
        label = "compile" if s.barrier_uncached else "step"
        events.append(_span(f"step {s.i}", label, pid, TID_STEPS, s.t0, s.t1, origin, step_args))
        if s.t0 <= s.tb <= s.t1:
            events.append(_span(f"barrier ({s.barrier})", "barrier", pid, TID_STEPS,
                                s.tb, s.t1, origin, {"step": s.i}))
    for c in run.compiles:
        events.append(_span(f"compile (step {c.i})", "compile", pid, TID_COMPILES,
                            c.t - c.ns / 1e9, c.t, origin, {"step": c.i, "at": c.at, "ms": round(c.ns / 1e6, 3)}))
    for end, ns in run.executions:
        events.append(_span("execute", "execute", pid, TID_EXECUTIONS, end - ns / 1e9, end, origin,
                            {"ms": round(ns / 1e6, 3)}))
    for y in run.syncs:
        site = run.sites.get(y.site)
        args: dict[str, Any] = {"step": y.i, "deferred": y.deferred}
        if site:
            args.update({"file": site.file, "line": site.line, "func": site.func, "code": site.code,
                         "via": site.via})
        # ``x`` counts graph executions during the read (not transfers).
        args.update({"uncached_compiles": y.uncached, "cached_compiles": y.cached, "executions": y.executions})
        events.append(_span(_site_label(site), "deferred read" if y.deferred else "sync",
                            pid, TID_SYNCS, y.t0, y.t1, origin, args))
    # Sorted by track, then start; an enclosing span before what it encloses.
    events.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    lanes = _into_lanes(events)
    for err in run.errors:
        if err.t is not None:
            events.append({"name": f"xprof error: {err.where}", "cat": "xprof", "ph": "i",
                           "s": "p", "pid": pid, "tid": TID_STEPS, "ts": _us(err.t, origin),
                           "args": {"error": err.error}})
    label = f"{run.name} (rank {run.rank})" if run.rank is not None else run.name
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    for tid in sorted(set(TRACKS) | lanes):
        base, lane = tid % LANE_STRIDE, tid // LANE_STRIDE
        tname = TRACKS[base] + (f" ({lane + 1})" if lane else "")
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"sort_index": base * LANE_STRIDE + lane}})
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": f"xprof {__version__}", "run": run.name, "path": run.path,
                      "started_unix": origin, "complete": run.complete},
    }
