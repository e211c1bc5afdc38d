"""The decoders: each record's short keys (docs/run-format.md) into its typed record, and
:func:`file_record`, which files one decoded line into a :class:`~xprof.runfile.Run`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xprof.runfile.records import Compile, Debug, End, Error, GraphChange, GraphLine, Input, Run, Site, Step, Sync
from xprof.runfile.values import (
    MAX_COUNT,
    MAX_NS,
    MAX_SECONDS,
    NO_COUNTS,
    Impossible,
    as_int,
    counts_of,
    counts_possible,
    num_pairs,
    opt_int,
    opt_str,
    pair_possible,
    time_or_none,
)


def _step_possible(s: Step) -> bool:
    return (0 <= s.i <= MAX_COUNT and 0.0 <= s.t0 <= s.tb <= s.t1 < MAX_SECONDS
            and 0 <= s.barrier_uncached <= MAX_COUNT and 0 <= s.barrier_cached <= MAX_COUNT
            and 0 <= s.opt <= MAX_COUNT and 0 <= s.dynamo_graphs <= MAX_COUNT and 0 <= s.backward <= MAX_COUNT
            and 0 <= s.mid_graphs <= MAX_COUNT and counts_possible(s.counters))


def _sync_possible(s: Sync) -> bool:
    return (0 <= s.i <= MAX_COUNT and 0.0 <= s.t0 <= s.t1 < MAX_SECONDS and 0 <= s.uncached <= MAX_COUNT
            and 0 <= s.cached <= MAX_COUNT and 0 <= s.executions <= MAX_COUNT)


_new_tuple = tuple.__new__


def step_record(rec: dict[str, Any]) -> Step | None:
    """A ``step`` record decoded (None when it has no barrier index)."""
    i = rec.get("i")
    if type(i) is not int:
        return None
    g = rec.get
    t0, tb, t1, barrier, c, bu, bc, sig = (g("t0", 0.0), g("tb", 0.0), g("t1", 0.0), g("barrier", "sync"),
                                           g("c", NO_COUNTS), g("bu", 0), g("bc", 0), g("sig"))
    o, ng, dz, site, ev, bw, mg, gd = (g("o", 0), g("ng", 0), g("dz", 0), g("site"), g("ev", 0), g("bw", 0),
                                       g("mg", 0), g("gd", 0))
    if (type(t0) is float and type(tb) is float and type(t1) is float and type(barrier) is str
            and type(c) is dict and type(bu) is int and type(bc) is int and (sig is None or type(sig) is int)
            and type(o) is int and type(dz) is int and (site is None or type(site) is int) and type(bw) is int
            and type(mg) is int):
        # What the recorder writes: the fields are already of their types. Building the tuple
        # directly skips the NamedTuple's Python-level __new__ (a long run has a million steps).
        return _new_tuple(Step, (i, t0, tb, t1, barrier, c, bu, bc, sig, o, bool(ng), dz, site,  # type: ignore[no-any-return]
                                 bool(ev), bw, mg, bool(gd)))
    return Step(i, float(t0), float(tb), float(t1), str(barrier), counts_of(c), int(bu), int(bc),
                opt_int(sig), int(o), bool(ng), int(dz), opt_int(site), bool(ev), int(bw),
                int(mg), bool(gd))


def _add_step(run: Run, rec: dict[str, Any]) -> bool:
    step = step_record(rec)
    if step is None:
        return False
    if not _step_possible(step) or (run.steps and step.i <= run.steps[-1].i):
        raise Impossible  # (a step index repeated or out of order is one too)
    run.steps.append(step)
    return True


def sync_record(rec: dict[str, Any]) -> Sync:
    """A ``sync`` record (a host read) decoded."""
    g = rec.get
    return Sync(int(g("i", 0)), int(g("site", -1)), float(g("t0", 0.0)), float(g("t1", 0.0)),
                int(g("u", 0)), int(g("c", 0)), int(g("x", 0)), bool(g("deferred", False)), opt_str(g("thread")))


def _add_sync(run: Run, rec: dict[str, Any]) -> bool:
    sync = sync_record(rec)
    if not _sync_possible(sync):
        raise Impossible
    run.syncs.append(sync)
    return True


def site_record(rec: dict[str, Any]) -> Site | None:
    """A ``site`` record decoded (None when it has no id)."""
    sid = rec.get("id")
    if not isinstance(sid, int):
        return None
    g = rec.get
    chain_ = g("chain")
    return Site(sid, str(g("kind", "?")), str(g("file", "?")), int(g("line", 0) or 0),
                str(g("func", "?")), opt_str(g("via")), str(g("code", "") or ""), opt_str(g("inner")),
                tuple(str(n) for n in chain_) if isinstance(chain_, list) else (),
                _inner_at(g("inner_at")), _inner_at(g("caller")))


def _add_site(run: Run, rec: dict[str, Any]) -> bool:
    site = site_record(rec)
    if site is None:
        return False
    run.sites[site.id] = site
    return True


def _inner_at(value: Any) -> tuple[str, int, str] | None:
    if isinstance(value, list) and len(value) == 3 and isinstance(value[1], int):
        return str(value[0]), value[1], str(value[2])
    return None


def _input(entry: dict[str, Any]) -> Input:
    shape = entry.get("shape")
    sharding = entry.get("sharding")
    return Input(str(entry.get("name", "?")), tuple(int(x) for x in shape) if isinstance(shape, list) else (),
                 str(entry.get("dtype", "?")), str(entry.get("src", "?")),
                 sharding if isinstance(sharding, str) else None)


def signature_record(rec: dict[str, Any]) -> tuple[int, tuple[Input, ...]] | None:
    """A ``sig`` record decoded: its id and inputs (None when either is missing)."""
    inputs = rec.get("inputs")
    if not isinstance(rec.get("id"), int) or not isinstance(inputs, list):
        return None
    return rec["id"], tuple(_input(i) for i in inputs if isinstance(i, dict))


def _add_sig(run: Run, rec: dict[str, Any]) -> bool:
    found = signature_record(rec)
    if found is None:
        return False
    sid, sig = found
    if not all(0 <= d <= MAX_COUNT for entry in sig for d in entry.shape):
        raise Impossible
    run.signatures[sid] = sig
    return True


def compile_record(rec: dict[str, Any]) -> Compile | None:
    """A ``compile`` record decoded (None when it has no barrier index)."""
    i = rec.get("i")
    if type(i) is not int:
        return None
    g = rec.get
    return Compile(i, float(g("t", 0.0)), float(g("ns", 0.0)), str(g("at", "barrier")))


def _add_compile(run: Run, rec: dict[str, Any]) -> bool:
    c = compile_record(rec)
    if c is None:
        return False
    if not (0 <= c.i <= MAX_COUNT and 0.0 <= c.t < MAX_SECONDS and 0.0 <= c.ns <= MAX_NS):
        raise Impossible
    run.compiles.append(c)
    return True


def _samples(rec: dict[str, Any]) -> list[tuple[float, float]]:
    pairs = num_pairs(rec.get("samples"))
    if not all(map(pair_possible, pairs)):
        raise Impossible
    return pairs


def _add_exec(run: Run, rec: dict[str, Any]) -> bool:
    run.executions.extend(_samples(rec))
    return True


def _add_spmd(run: Run, rec: dict[str, Any]) -> bool:
    run.spmd_updates.append({k: v for k, v in rec.items() if k != "type"})
    return True


def _add_xfer(run: Run, rec: dict[str, Any]) -> bool:
    run.transfers.extend(_samples(rec))
    return True


def _add_graph_sizes(run: Run, rec: dict[str, Any]) -> bool:
    run.graph_sizes.extend(_samples(rec))
    return True


def _add_error(run: Run, rec: dict[str, Any]) -> bool:
    run.errors.append(Error(time_or_none(rec.get("t")), str(rec.get("where", "?")),
                            str(rec.get("error", "")), opt_str(rec.get("trace"))))
    return True


def _add_dynamo(run: Run, rec: dict[str, Any]) -> bool:
    failures = rec.get("guard_failures")
    if not isinstance(failures, list):
        return False
    run.dynamo.extend(f for f in failures if isinstance(f, dict))
    return True


def _count(v: Any) -> int:
    """A count written by the recorder: an int (not a bool), 0 when absent."""
    if v is None:
        return 0
    if type(v) is not int:
        raise TypeError("not a count")
    if not 0 <= v <= MAX_COUNT:
        raise Impossible
    return v


def _text(v: Any) -> str:
    if type(v) is not str:
        raise TypeError("not a string")
    return v


def _graph_line(v: Any) -> GraphLine:
    if type(v) is not dict:
        raise TypeError("not an object")
    g = v.get
    return GraphLine(_text(g("file")), _count(g("line")), _text(g("func", "")), _text(g("code", "")),
                     _text(g("what")), _text(g("kind", "ops")), _text(g("op", "")), _count(g("ops", 1)))


def graph_change_record(rec: dict[str, Any]) -> GraphChange:
    """A ``debug`` record of kind ``graph`` (``--explain``); TypeError on a field of the wrong
    type, :class:`Impossible` on a number no recorder writes."""
    g = rec.get
    lines = g("lines") or []
    if type(lines) is not list:
        raise TypeError("lines is not a list")
    base = g("base")
    return GraphChange(_count(g("i")), _text(g("at", "barrier")), _text(g("hash", "")), _count(g("ops")),
                       _count(g("inputs")), None if base is None else _count(base),
                       tuple(_graph_line(x) for x in lines), _count(g("more_lines")), _count(g("backward")),
                       _count(g("library")), _count(g("changed")))


def _add_debug(run: Run, rec: dict[str, Any]) -> bool:
    if rec.get("kind") == "graph":
        run.graph_changes.append(graph_change_record(rec))
        return True
    fields = {k: v for k, v in rec.items() if k not in ("type", "kind")}
    run.debug.append(Debug(str(rec.get("kind", "")), fields))
    return True


def _add_end(run: Run, rec: dict[str, Any]) -> bool:
    g = rec.get
    t = g("t")
    dropped = g("samples_dropped")
    end = End(float(t) if t else None, str(g("status", "ok") or "ok"), opt_str(g("exception")),
              as_int(g("steps")), as_int(g("syncs")), as_int(g("errors")), counts_of(g("tail")),
              tuple(str(d) for d in dropped) if isinstance(dropped, list) else (),
              as_int(g("tail_opt")), as_int(g("tail_graphs")), as_int(g("events_dropped")),
              opt_int(g("dropped_from")), as_int(g("tail_bw")))
    counts = (end.steps, end.syncs, end.errors, end.tail_opt, end.tail_graphs, end.events_dropped,
              end.dropped_from or 0, end.tail_bw)
    if ((end.t is not None and not 0.0 <= end.t < MAX_SECONDS) or not all(0 <= n <= MAX_COUNT for n in counts)
            or not counts_possible(end.tail)):
        raise Impossible
    run.end = end
    return True


_ADDERS: dict[str, Callable[[Run, dict[str, Any]], bool]] = {
    "step": _add_step, "sync": _add_sync, "site": _add_site, "sig": _add_sig,
    "compile": _add_compile, "exec": _add_exec, "xfer": _add_xfer, "spmd": _add_spmd,
    "graph_sizes": _add_graph_sizes, "error": _add_error, "debug": _add_debug, "dynamo": _add_dynamo, "end": _add_end,
}
"""Record type -> the function that files it (a dict lookup per line, not an if-chain)."""


def file_record(run: Run, rec: Any) -> bool:
    """Decode one record into ``run`` (its typed list or field); False when it is not a
    record this version reads (not an object, an unknown type, a field of the wrong type)."""
    if type(rec) is not dict:
        return False
    kind = rec.get("type")
    add = _ADDERS.get(kind) if type(kind) is str else None
    if add is None:
        return False
    try:
        return add(run, rec)
    except Impossible:
        run.impossible += 1
        return True  # (read, and counted apart from the unreadable lines)
    except (TypeError, ValueError, OverflowError):
        return False  # a field of the wrong type: the record is skipped like a bad line
