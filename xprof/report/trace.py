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
from xprof.runfile import Run

TID_STEPS = 1
TID_COMPILES = 2
TID_EXECUTIONS = 3
TID_SYNCS = 4
TRACKS = {TID_STEPS: "steps", TID_COMPILES: "compiles", TID_EXECUTIONS: "executions",
          TID_SYNCS: "host syncs"}


def _pid(run: Run) -> int:
    rank = run.meta.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool) and (run.meta.get("world_size") or 0) > 1:
        return rank
    return 0


def _origin(run: Run) -> float:
    """The earliest time in the run, so no event gets a negative timestamp."""
    times: list[float] = []
    start = run.header.get("started_unix")
    if isinstance(start, (int, float)):
        times.append(float(start))
    times.extend(float(s["t0"]) for s in run.steps if isinstance(s.get("t0"), (int, float)))
    times.extend(float(c["t"]) - float(c.get("ns", 0)) / 1e9 for c in run.compiles
                 if isinstance(c.get("t"), (int, float)))
    times.extend(end - ns / 1e9 for end, ns in run.executions)
    times.extend(float(s["t0"]) for s in run.syncs if isinstance(s.get("t0"), (int, float)))
    return min(times) if times else 0.0


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _us(t: float, origin: float) -> float:
    return round((t - origin) * 1e6, 3)


def _span(name: str, cat: str, pid: int, tid: int, start: float, end: float, origin: float,
          args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": _us(start, origin), "dur": round(max(end - start, 0.0) * 1e6, 3), "args": args}


def _site_label(site: dict[str, Any] | None) -> str:
    if not site:
        return "sync"
    where = f"{site.get('file', '?')}:{site.get('line', 0)}"
    return f"{site.get('kind', 'sync')} at {where.rsplit('/', 1)[-1]}"


def chrome_trace(run: Run) -> dict[str, Any]:
    """The trace as a JSON-ready dict: ``{"traceEvents": [...], ...}``."""
    pid = _pid(run)
    origin = _origin(run)
    events: list[dict[str, Any]] = []
    for s in run.steps:
        t0, tb, t1 = _num(s.get("t0")), _num(s.get("tb")), _num(s.get("t1"))
        if t0 is None or t1 is None:
            continue
        step_args: dict[str, Any] = {k: s[k] for k in ("barrier", "c", "bu", "bc", "sig", "xfer") if k in s}
        label = "compile" if s.get("bu") else "step"
        events.append(_span(f"step {s['i']}", label, pid, TID_STEPS, t0, t1, origin, step_args))
        if tb is not None and t0 <= tb <= t1:
            events.append(_span(f"barrier ({s.get('barrier', 'sync')})", "barrier", pid, TID_STEPS,
                                tb, t1, origin, {"step": s["i"]}))
    for c in run.compiles:
        t, ns = c.get("t"), c.get("ns")
        if not isinstance(t, (int, float)) or not isinstance(ns, (int, float)):
            continue
        events.append(_span(f"compile (step {c.get('i')})", "compile", pid, TID_COMPILES,
                            t - ns / 1e9, t, origin, {"step": c.get("i"), "at": c.get("at"),
                                                      "ms": round(ns / 1e6, 3)}))
    for end, ns in run.executions:
        events.append(_span("execute", "execute", pid, TID_EXECUTIONS, end - ns / 1e9, end, origin,
                            {"ms": round(ns / 1e6, 3)}))
    for y in run.syncs:
        t0, t1 = y.get("t0"), y.get("t1")
        if not isinstance(t0, (int, float)) or not isinstance(t1, (int, float)):
            continue
        site = run.sites.get(y.get("site", -1)) if isinstance(y.get("site"), int) else None
        args: dict[str, Any] = {"step": y.get("i"), "deferred": bool(y.get("deferred"))}
        if site:
            args.update({"file": site.get("file"), "line": site.get("line"), "func": site.get("func"),
                         "code": site.get("code"), "via": site.get("via")})
        for key, label in (("u", "uncached_compiles"), ("c", "cached_compiles"), ("x", "transfers")):
            if key in y:
                args[label] = y[key]
        events.append(_span(_site_label(site), "deferred read" if y.get("deferred") else "sync",
                            pid, TID_SYNCS, t0, t1, origin, args))
    # Sorted by track, then start; an enclosing span before what it encloses.
    events.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    for err in run.errors:
        t = err.get("t")
        if isinstance(t, (int, float)):
            events.append({"name": f"xprof error: {err.get('where')}", "cat": "xprof", "ph": "i",
                           "s": "p", "pid": pid, "tid": TID_STEPS, "ts": _us(t, origin),
                           "args": {"error": err.get("error")}})
    rank = run.meta.get("rank")
    label = f"{run.name} (rank {rank})" if pid == rank and (run.meta.get("world_size") or 0) > 1 else run.name
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    for tid, tname in TRACKS.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}})
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": f"xprof {__version__}", "run": run.name, "path": run.path,
                      "started_unix": origin, "complete": run.complete},
    }
