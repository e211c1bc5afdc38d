"""Host reads as findings: what the user wrote that read a tensor on the host (``.item()``, a
print, a condition, a library call), the compiles and waits it forced, and what to change."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE, READ_KINDS, read_tail
from xprof.analysis.findings.common import (
    and_list,
    compiled_early,
    dur_text,
    loc_text,
    short_code,
    step_pattern,
    title_seconds,
)
from xprof.analysis.findings.library import library_advice, third_party
from xprof.analysis.model import Finding
from xprof.diagnosis import mechanisms as _mech
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.evidence import grew
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.rules.reads import DD_WORDS, KIND_WORDS, sync_kind
from xprof.runfile import Site


@dataclass
class _Reads:
    """The facts of one host-read finding, gathered once for its title, advice and evidence:
    its reads (``g``, rows of the read table), the compiles it owns (``ks``) and what they cost."""

    key: str
    g: pd.DataFrame
    first: Any
    """The first read (a row of ``g``): its line names the finding."""
    site: Site | None
    mech: _mech.Mechanism | None
    called: str | None
    """The library call a ``lib:NAME@file:line`` finding is about."""
    code: str
    file: str
    line: int
    via: Any
    kind: str
    value_shape: bool
    """A tensor read as a slice bound whose value then set a shape (``t[:, :mask.sum(1).max()]``)."""
    ks: list[int]
    rows: pd.DataFrame
    """The compiles it owns (``compiles.iloc[ks]``)."""
    compile_ms: float
    wait_ms: float
    saved_ms: float
    theirs: list[int]
    """Compiles inside its reads that another cause owns."""
    theirs_ms: float
    exec_ms: float
    executions: int
    read_steps: list[int]
    pattern: str | None
    seconds: float
    where: str
    callers: list[tuple[str, int, str]]
    """The user lines that called the function holding the reads (a read inside a user function)."""
    parts: list[str]
    """``3 reads``, ``2 compiles``, ``1 extra execution``: the title's counts."""
    when: str
    mid_step: bool
    severity: str
    lines: list[tuple[str, int, str]]
    """Every user line of the group (value-dependent ops in the same steps), in the order they ran."""

    @property
    def n(self) -> int:
        return len(self.g)

    @property
    def what(self) -> str:
        return KIND_WORDS.get(self.kind, self.kind)


class ReadSums:
    """The read table's columns as arrays and the compiles by the read they happened in, taken
    once, so each read finding's sums are a few array operations on its rows' positions, not
    a pass of pandas over its group (thousands of read sites, issue 28)."""

    def __init__(self, reads: pd.DataFrame, compiles: pd.DataFrame) -> None:
        self.cols = {c: reads[c].to_numpy() for c in ("ms", "saved_ms", "exec_ms", "executions",
                                                       "uncached", "cached") if c in reads}
        self.labels = reads.index.to_numpy()
        self.rows = {c: reads[c].to_numpy() for c in reads.columns}
        """Every column as an array: a group's first read without a row of a mixed frame."""
        self.no_compiles = compiles.iloc[0:0]
        self.compiles_in: dict[Any, list[int]] = {}
        """A read's row label -> the positions of the compiles inside it, in order."""
        if len(compiles):
            for k, row in enumerate(compiles["sync_row"].tolist()):
                self.compiles_in.setdefault(row, []).append(k)

    def first(self, at: np.ndarray) -> dict[str, Any]:
        """The first read of the rows at positions ``at``, column by column."""
        k = int(at[0])
        return {c: v[k] for c, v in self.rows.items()}

    def total(self, col: str, at: np.ndarray) -> Any:
        """The sum of ``col`` over the rows at positions ``at`` (as ``Series.sum`` adds them)."""
        values = self.cols[col][at]
        return np.nansum(values) if values.dtype.kind == "f" else values.sum()

    def any(self, col: str, at: np.ndarray) -> bool:
        return bool(self.cols[col][at].any())

    def others_inside(self, at: np.ndarray, ks: list[int]) -> list[int]:
        """:func:`_others_inside` of the reads at positions ``at``."""
        mine = set(ks)
        found = {k for label in self.labels[at].tolist() for k in self.compiles_in.get(label, ())}
        return sorted(found - mine)


def sync_finding(key: str, g: pd.DataFrame, compiles: pd.DataFrame, ks: list[int],
                  ordinal_of: Mapping[int, int], steady: int, sites: dict[int, Site] | None = None,
                  causes: list[Cause] | None = None, steps: pd.DataFrame | None = None,
                  sums: tuple[ReadSums, np.ndarray] | None = None) -> Finding:
    """The finding of one group of host reads (one line, one library call, or one mechanism's
    reads), with the compiles ``ks`` (positions in ``compiles``) they forced. ``sums``: the
    read table's :class:`ReadSums` and the group's positions in it, where the caller has them."""
    r = _reads_of(key, g, compiles, ks, ordinal_of, steady, sites or {}, causes, sums)
    title, cause, kind = _read_title(r)
    advice = _read_advice(r, kind)
    if r.mech is None and not r.value_shape and kind in READ_KINDS:
        ready = (not r.executions and not (sums[0].any("uncached", sums[1]) or sums[0].any("cached", sums[1]))
                 if sums is not None and "uncached" in sums[0].cols and "cached" in sums[0].cols
                 else not (r.executions or g["uncached"].any() or g["cached"].any()))
        if ready:
            # Every value was ready: nothing ran early, the host only waited for the device.
            title = (f"{r.what} at {r.where} waits for the device{r.when}: {', '.join(r.parts)}, "
                     f"{title_seconds(r.seconds)}")
            if kind not in ("tensor_condition", "scalar"):
                # A logged value can be read later, on a thread; a decision or a Python number
                # is needed now: keeping it on the device is still the fix.
                advice = ADVICE["ready_read"]
        advice += read_tail(r.pattern)
    if isinstance(r.via, str) and (kind == "library_sync" or (kind == "data_dependent" and third_party(r.via))):
        advice = library_advice(r.via, r.where, r.code, r.site,
                                 "reads a tensor's value on the host" if kind == "library_sync"
                                 else "runs an op whose output size depends on the values, on the CPU")
    evidence = _read_evidence(r, kind, sites or {}, causes, steps)
    grown = _grown_in_one_step(r, kind, compiles)
    if grown is not None:
        # One read, ever larger graphs in one step: the ops since the barrier pile up
        # between its reads (an RL episode, acting step by step), so each runs a longer one.
        # Told whoever counts the compiles (warm-up's, in a short run: the mechanism is the same).
        top, n = grown
        evidence.insert(1, f"it compiled {n} graphs within step {ordinal_of.get(top, top)} alone: each read in "
                           "a step ran a longer graph, the ops since the last barrier piling up between reads")
        if r.mech is None and kind != "library_sync":
            advice = ADVICE["growing_read"]
    if len(r.rows):
        title, advice = _compile_evidence(r, kind, compiles, causes, ordinal_of, evidence, title, advice)
    return Finding(
        id=key, cause=cause, kind=kind, title=title, count=r.n, compiles=len(ks),
        seconds=r.seconds, compile_seconds=r.compile_ms / 1e3, execute_seconds=r.exec_ms / 1e3,
        advice=advice, evidence=evidence, steps=r.read_steps, file=r.file, line=r.line,
        func=str(r.first["func"]), code=r.code, via=r.via if isinstance(r.via, str) else None,
        pattern=r.pattern, severity=r.severity,
        lines=[{"file": f, "line": n, "code": c} for f, n, c in r.lines] if len(r.lines) > 1 else None,
    )


def _reads_of(key: str, g: pd.DataFrame, compiles: pd.DataFrame, ks: list[int], ordinal_of: Mapping[int, int],
              steady: int, sites: dict[int, Site], causes: list[Cause] | None,
              sums: tuple[ReadSums, np.ndarray] | None = None) -> _Reads:
    """What a read finding says, before it is worded: what the user wrote, and the costs."""
    first = sums[0].first(sums[1]) if sums is not None else g.iloc[0]
    site = sites.get(int(first["site"]))
    # A library read's finding is one library call (``lib:NAME@file:line``), or one function
    # inside the library call that runs the training loop (see ``mechanisms.group_key``).
    called = key[4:].rsplit("@", 1)[0] if key.startswith("lib:") else None
    code, file, line, via = str(first["code"]), str(first["file"]), int(first["line"]), first["via"]
    kind = sync_kind(str(first["access"]), code, via if isinstance(via, str) else None)
    # A tensor read as a slice bound whose value then set a shape (t[:, :mask.sum(1).max()]):
    # the recompiles are the value's, as for the ops with a value-dependent output.
    value_shape = (str(first["access"]) == "index" and causes is not None
                   and any(causes[k].cause == CauseName.DATA_DEPENDENT for k in ks))
    if value_shape:
        kind = "data_dependent"
    rows = compiles.iloc[ks] if ks else compiles.iloc[0:0] if sums is None else sums[0].no_compiles
    compile_ms = float(rows["ms"].sum()) if len(rows) else 0.0
    # Compiles inside its reads are in the reads' waits; those at a barrier, between two of
    # its reads (a library call's, cut by an op on the CPU), or inside another line's read
    # (a value-dependent shape's, compiled by the `.item()` after it), are not.
    outside = ((rows["at"] == "barrier") | (rows["sync_row"] < 0) | ~rows["sync_row"].isin(g.index)
               if len(rows) else None)
    barrier_compile_ms = float(rows[outside]["ms"].sum()) if outside is not None else 0.0
    fast = sums is not None and all(c in sums[0].cols for c in ("ms", "exec_ms", "executions"))
    wait_ms = float(sums[0].total("ms", sums[1])) if sums is not None and fast else float(g["ms"].sum())
    # What removing the reads saves: their waits, less what the host would have waited for
    # at the barrier anyway (the graph an earlier barrier launched, on a device-bound loop).
    saved_ms = ((float(sums[0].total("saved_ms", sums[1])) if "saved_ms" in sums[0].cols else wait_ms)
                if sums is not None and fast else float(g["saved_ms"].sum()) if "saved_ms" in g else wait_ms)
    # Compiles inside its reads that another cause owns (warm-up's first graphs, a new input
    # shape) are in the waits too: they count there, not here (no second count).
    theirs = (sums[0].others_inside(sums[1], ks) if sums is not None and len(compiles)
              else _others_inside(g, compiles, ks))
    theirs_ms = float(compiles["ms"].iloc[theirs].sum()) if theirs else 0.0
    executions = (int(sums[0].total("executions", sums[1])) if sums is not None and fast
                  else int(g["executions"].sum()))
    read_steps = sorted({int(s) for s in g["step"]})
    pattern = step_pattern([ordinal_of.get(s, 0) for s in read_steps], steady)
    lines = _group_lines(g, sites) if kind == "data_dependent" or value_shape else [(file, line, code)]
    where = _lines_where(lines)
    callers = _callers(g, sites) if site is not None and site.caller is not None and not isinstance(via, str) else []
    if callers:
        # (a read inside a user function: which calls of it, when it is called from several lines)
        where += f" (called from {_lines_where([(f, n, '') for f, n, _ in callers])})"
    n = len(g)
    parts = [f"{n} read{'s' if n != 1 else ''}"]
    if len(ks):
        parts.append(f"{len(ks)} compile{'s' if len(ks) != 1 else ''}")
    if executions:
        parts.append(f"{executions} extra execution{'s' if executions != 1 else ''}")
    # A save now and then is expected, unless it ran before the barrier and compiled parts of
    # the step's graph to read them (torch.save mid-step: 13 compiles, 78% of a run).
    mid_step = kind == "checkpoint" and bool(len(ks))
    severity = ("info" if kind == "checkpoint" and not mid_step and len(read_steps) <= max(1, steady // 4)
                else "warning")
    return _Reads(
        key=key, g=g, first=first, site=site, mech=_mech.known(key), called=called, code=code, file=file,
        line=line, via=via, kind=kind, value_shape=value_shape, ks=ks, rows=rows, compile_ms=compile_ms,
        wait_ms=wait_ms, saved_ms=saved_ms, theirs=theirs, theirs_ms=theirs_ms,
        exec_ms=float(sums[0].total("exec_ms", sums[1])) if sums is not None and fast else float(g["exec_ms"].sum()),
        executions=executions, read_steps=read_steps, pattern=pattern,
        seconds=(max(saved_ms - theirs_ms, 0.0) + barrier_compile_ms) / 1e3, where=where, callers=callers,
        parts=parts, when=f" {pattern}" if pattern else "", mid_step=mid_step, severity=severity, lines=lines)


def _callers(g: pd.DataFrame, sites: dict[int, Site]) -> list[tuple[str, int, str]]:
    """The user lines that called the function holding the group's reads, in order of first
    read (one line read through several calls is one finding)."""
    out: list[tuple[str, int, str]] = []
    for sid in dict.fromkeys(int(s) for s in g["site"]):
        site = sites.get(sid)
        if site is not None and site.caller is not None and site.caller not in out:
            out.append(site.caller)
    return out


def _group_lines(g: pd.DataFrame, sites: dict[int, Site]) -> list[tuple[str, int, str]]:
    """(file, line, code) of each user line among the reads ``g``, in the order they first ran."""
    out: dict[tuple[str, int], str] = {}
    for sid in dict.fromkeys(int(v) for v in g.sort_values("t0", kind="stable")["site"]):
        site = sites.get(sid)
        if site is not None:
            out.setdefault((site.file, site.line), site.code or "")
    return [(f, n, c) for (f, n), c in out.items()]


def _lines_where(lines: list[tuple[str, int, str]]) -> str:
    """``a.py:56``, ``a.py:56 and :57``, ``a.py:56 and b.py:9`` (up to three, then how many more)."""
    locs = [loc_text(f, n) if k == 0 or f != lines[0][0] else f":{n}" for k, (f, n, _) in enumerate(lines[:3])]
    more = len(lines) - 3
    if more > 0:
        return ", ".join(locs) + f" and {more} more"
    return and_list(locs) if locs else "?"


def _read_title(r: _Reads) -> tuple[str, str, str]:
    """(title, cause, kind) of a read finding: a mechanism's (an evaluation's, a logger's),
    a value-dependent shape's, a checkpoint's, a library call's, or a line's own read."""
    n, when, parts, where, seconds = r.n, r.when, r.parts, r.where, title_seconds(r.seconds)
    if r.mech is not None:
        accesses = sorted({str(a) for a in r.g["access"]})
        own = int((r.rows["at"] == "barrier").sum()) if len(r.rows) else 0
        # Lead with what costs most: graphs the mechanism compiled at its own barriers (an
        # evaluation's forward graphs), else its reads.
        does = (f"compiled {own} graph{'s' if own != 1 else ''} of its own and reads {n} "
                f"value{'s' if n != 1 else ''} on the host" if own
                else f"reads {n} value{'s' if n != 1 else ''} on the host")
        return (f"{r.mech.what} {does}{when} ({', '.join(accesses)}; via {where}): "
                f"{', '.join(parts[1:]) + ', ' if len(parts) > 1 else ''}{seconds}"), CauseName.LIBRARY, r.mech.kind
    if r.kind == "data_dependent":
        ops = list(dict.fromkeys(DD_WORDS.get(str(a), str(a)) for a in r.g["access"]))
        op = " and ".join(ops[:2])
        recompiles = len(r.rows)
        dd_parts = [f"{recompiles} recompile{'s' if recompiles != 1 else ''}"]
        if r.executions:
            dd_parts.append(f"{r.executions} early execution{'s' if r.executions != 1 else ''}")
        if third_party(r.via):
            # inside a library's own code (torchmetrics' input validation): the call is what to change
            return (f"{r.via} (called from {where}) runs {op} on the CPU{when}: {', '.join(dd_parts)}, "
                    f"{seconds}"), CauseName.DATA_DEPENDENT, r.kind
        if len(r.lines) > 1:
            return (f"{op} at {where} give value-dependent shapes{when or ' in the same steps'}: "
                    f"{', '.join(dd_parts)}, {seconds}", CauseName.DATA_DEPENDENT, r.kind)
        return (f"{op} at {where} gives a value-dependent shape{when}: {', '.join(dd_parts)}, {seconds}",
                CauseName.DATA_DEPENDENT, r.kind)
    if r.kind == "checkpoint":
        title = (f"{r.what} at {where} copies tensors to the host{when}"
                 f"{' (expected)' if r.severity == 'info' else ''}: {', '.join(parts)}, {seconds}")
    elif r.kind == "library_sync":
        title = f"{r.called} (called from {where}) forces a host sync{when}: {', '.join(parts)}, {seconds}"
    else:
        title = f"{r.what} at {where} forces a host sync{when}: {', '.join(parts)}, {seconds}"
    return title, CauseName.IMPLICIT_SYNC, r.kind


def _read_advice(r: _Reads, kind: str) -> str:
    """The advice for a read finding of ``kind``, before the notes on ready values and patterns."""
    if r.mech is not None:
        return r.mech.advice
    if r.value_shape:
        return ADVICE["value_shape"]
    if r.mid_step:
        return ADVICE["checkpoint_mid_step"]
    if kind == "data_dependent" and len(r.lines) > 1:
        n = len(r.lines)
        both = "both" if n == 2 else f"all {n}"
        return (f"These {n} lines run in the same steps and feed one graph: change {both}; one left as it "
                f"is keeps every recompile. " + (ADVICE["mask_assign"] if set(r.g["access"]) == {"mask_assign"}
                                                 else ADVICE["data_dependent"]))
    if kind == "data_dependent" and set(r.g["access"]) == {"mask_assign"}:
        return ADVICE["mask_assign"]
    return ADVICE.get(kind, ADVICE["item"])


def _read_evidence(r: _Reads, kind: str, sites: dict[int, Site], causes: list[Cause] | None,
                   steps: pd.DataFrame | None) -> list[str]:
    """Where the read is, who called it, what it does to the graph, and what the host waited
    (the compiles it forced come after, from :func:`_compile_evidence`)."""
    first, g = r.first, r.g
    here = f"{loc_text(r.file, r.line)} in {first['func']}()"
    evidence = [f"{here}: {r.code}" if r.code else here]
    for file, line, code in r.lines[1:]:
        evidence.append(f"{loc_text(file, line)}: {code}" if code else loc_text(file, line))
    for caller in r.callers:
        evidence.append(f"{first['func']}() was called from {loc_text(caller[0], caller[1])}"
                        + (f": {caller[2]}" if caller[2] else ""))
    evidence += _inside_library(r, sites)
    if r.value_shape:
        evidence.append("its value is read on the host and sets a shape, so every new value is a new "
                        "shape for the ops after it and the barrier graph")
    elif kind == "data_dependent":
        evidence.append("the op runs on the CPU and its output's length depends on the values, so "
                        "every new count is a new shape for the ops after it and the barrier graph")
        mid = (int(steps.loc[steps["i"].isin(g["step"].unique()), "mid_graphs"].sum())
               if steps is not None and "mid_graphs" in steps else 0)
        if mid:
            # (the overview's extra executions count these too)
            evidence.append(f"in those steps {mid} more graph{'s' if mid != 1 else ''} ran early outside the reads "
                            "(the ops after the op on the CPU, cut from the barrier's graph)")
    wait_ms, saved_ms = r.wait_ms, r.saved_ms
    evidence.append(f"the host waited {dur_text(wait_ms)} in total ({dur_text(wait_ms / max(r.n, 1))} a read)")
    if wait_ms - saved_ms > max(0.05 * wait_ms, 1.0):
        evidence.append(f"{dur_text(wait_ms - saved_ms)} of that was the device finishing the graph the previous "
                        "barrier launched, which the host would have waited for at its barrier anyway (the "
                        "device is the slower side of these steps): not counted")
    if r.theirs:
        theirs = r.theirs
        warm = sum(1 for k in theirs if causes is not None and k < len(causes) and causes[k].cause == CauseName.WARMUP)
        whose = (f"warm-up compile{'s' if warm != 1 else ''}, counted with warm-up" if warm == len(theirs)
                 else f"compile{'s' if len(theirs) != 1 else ''} counted under "
                      f"{'their' if len(theirs) != 1 else 'its'} own cause{' or warm-up' if warm else ''}")
        evidence.append(f"{dur_text(r.theirs_ms)} of that was {len(theirs)} {whose}, not here")
    if r.executions:
        evidence.append(f"{r.executions} execution(s) ran inside these reads ({dur_text(r.exec_ms)})")
    return evidence


def _inside_library(r: _Reads, sites: dict[int, Site]) -> list[str]:
    """A library call's reads by the library function that made them, or the library
    function (and line) a read happened inside."""
    via, g = r.via, r.g
    inner = r.first.get("inner") if "inner" in g else None
    by_function = _reads_by_function(g, sites) if r.called is not None and r.called == via else []
    if len(by_function) > 1:
        shown = [f"{n} in {name.rsplit('.', 2)[-2] + '.' + name.rsplit('.', 1)[-1] if name.count('.') > 1 else name}"
                 + (f" ({at})" if at else "") for name, n, at in by_function[:3]]
        more = len(by_function) - 3
        return [f"its reads, by the library function that made them: {'; '.join(shown)}"
                + (f"; and {more} more" if more > 0 else "")]
    if not isinstance(via, str):
        return []
    out = [f"the read happens inside {via}" + (f" (innermost: {inner})" if isinstance(inner, str) else "")]
    if r.site is not None and r.site.inner_at is not None:
        lib_file, lib_line, lib_code = r.site.inner_at
        out.append(f"the library's line: {os.path.basename(lib_file)}:{lib_line}"
                   + (f": {lib_code}" if lib_code else ""))
    return out


def _grown_in_one_step(r: _Reads, kind: str, compiles: pd.DataFrame) -> tuple[int, int] | None:
    """(step, graphs): the step in which the graphs run at this finding's reads grew read by
    read, counting the compiles inside its reads whoever owns them (warm-up's too)."""
    if kind in ("data_dependent", "checkpoint") or not len(compiles):
        return None
    rows = np.asarray(sorted({*r.ks, *r.theirs}), dtype=np.int64)
    rows = rows[compiles["at"].to_numpy(dtype=object)[rows] == "step"]
    if not len(rows):
        return None
    steps = compiles["step"].to_numpy()[rows].tolist()
    counts: dict[int, int] = {}
    for step in steps:
        counts[step] = counts.get(step, 0) + 1
    most = max(counts.values())
    top = next(step for step, n in counts.items() if n == most)  # (the first of equals)
    nodes = compiles["graph_nodes"].to_numpy(dtype=object)[rows]
    if not grew([None if pd.isna(v) else int(v) for v, step in zip(nodes.tolist(), steps) if step == top]):
        return None
    return int(top), most


def _compile_evidence(r: _Reads, kind: str, compiles: pd.DataFrame, causes: list[Cause] | None,
                      ordinal_of: Mapping[int, int], evidence: list[str], title: str,
                      advice: str) -> tuple[str, str]:
    """The compiles a read finding forced, added to its ``evidence``: graphs that grew read by
    read, those at a step barrier, and whether they were all early (a one-off). The title and
    advice, as those change them."""
    rows, ks, mech = r.rows, r.ks, r.mech
    evidence.append(f"{len(rows)} compile(s) forced ({dur_text(r.compile_ms)})")
    at_barrier = [k for k in ks if compiles["at"].iat[k] == "barrier"]
    joined = [k for k in at_barrier if causes is not None and causes[k].leftovers]
    if at_barrier and causes is not None and (mech is None or joined):
        # (a library's read too, when what it left pending made the step's graph larger)
        k = (joined or at_barrier)[0]
        step = ordinal_of.get(int(compiles["step"].iat[k]), int(compiles["step"].iat[k]))
        said = f"{len(at_barrier)} of them at a step barrier (step {step}: {causes[k].evidence})"
        if joined:
            evidence.insert(1, said)
        else:
            evidence.append(said)
    early = compiled_early(rows, [(int(s), 1) for s in r.g["step"].tolist()], ordinal_of)
    if early is not None:
        user, later = early
        evidence.append(f"all of them by step {user}: the {later} read"
                        f"{'s' if later != 1 else ''} after compiled nothing (their graphs were cached)")
        if mech is None:  # as the fallback finding says it: the compiles were a one-off
            title += (f" (all compiles by step {user}; the {later} read{'s' if later != 1 else ''} "
                      "after compiled nothing)")
    return title, advice


def same_steps_value_shapes(dd: list[Finding]) -> None:
    """Two value-dependent shapes in the same steps (a detection loss's boolean-mask index
    and a nonzero): the recompiles are told to the first, but fixing it alone leaves the
    other's. Each says so."""
    for f in dd:
        mine = set(f.steps)
        for g in dd:
            if g is not f and mine and len(mine & set(g.steps)) * 2 >= len(mine):
                other = g.title.split(" gives", 1)[0].split(" runs", 1)[0]
                f.evidence.append(
                    f"{other} has a value-dependent shape in the same steps: "
                    + ("their recompiles are counted here, but fixing this one alone leaves that one's"
                       if f.compiles >= g.compiles else "their recompiles are counted there; fix both"))



def _reads_by_function(g: pd.DataFrame, sites: dict[int, Site]) -> list[tuple[str, int, str]]:
    """(innermost library function, reads, its line ``file:line: code``) of a library call's
    reads, most reads first."""
    out: dict[str, list[Any]] = {}
    for sid, n in g["site"].value_counts(sort=False).items():
        site = sites.get(int(sid))
        if site is None:
            continue
        name = site.inner or site.via or "?"
        entry = out.setdefault(name, [0, ""])
        entry[0] += int(n)
        if not entry[1] and site.inner_at is not None:
            lib_file, lib_line, lib_code = site.inner_at
            entry[1] = (f"{os.path.basename(lib_file)}:{lib_line}"
                        + (f": {short_code(lib_code, 60)}" if lib_code else ""))
    return sorted(((k, v[0], v[1]) for k, v in out.items()), key=lambda r: -r[1])



def _others_inside(g: pd.DataFrame, compiles: pd.DataFrame, ks: list[int]) -> list[int]:
    """Positions of the compiles that happened inside the reads ``g`` but are not ``ks``."""
    if not len(compiles) or not len(g):
        return []
    inside = compiles["sync_row"].isin(g.index).to_numpy(dtype=bool, copy=True)
    if ks:
        inside[np.asarray(ks, dtype=np.int64)] = False
    return np.flatnonzero(inside).tolist()



def closure_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, syncs: pd.DataFrame) -> Finding:
    """A read inside an ``xm.add_step_closure`` callback compiled a small graph: deferred."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    site = int(key.detail)
    g = syncs[syncs["site"] == site]
    first = g.iloc[0] if len(g) else None
    file = str(first["file"]) if first is not None else None
    line = int(first["line"]) if first is not None else None
    code = str(first["code"]) if first is not None else None
    where = loc_text(file, line) if file and line else "a step closure"
    reads = len(g)
    title = (f"A step-closure read at {where} compiled {n} small graph{'s' if n != 1 else ''} of its own "
             f"(deferred, after the barrier): {ms / 1e3:.2f} s once")
    evidence = [c0.evidence] if c0.evidence else []
    if code:
        evidence.append(f"{where}: {code}")
    evidence.append(f"{reads} deferred read{'s' if reads != 1 else ''} at this line; none ran mid-step")
    # The step whose barrier ran the closure (the compile is counted at the next barrier).
    compiled_in = g[g["uncached"] > 0]["step"] if len(g) else []
    comp_steps = sorted({int(s) for s in compiled_in}) or sorted({int(s) for s in rows["step"]})
    return Finding(
        id=str(key), cause=CauseName.STEP_CLOSURE, kind="deferred_read", title=title, count=reads, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["deferred_read"],
        evidence=evidence, steps=comp_steps, file=file, line=line,
        func=str(first["func"]) if first is not None else None, code=code, severity="info",
    )



def barrier_mechanism_finding(mech: _mech.Mechanism, rows: pd.DataFrame, c0: Cause) -> Finding:
    ms = float(rows["ms"].sum())
    n = len(rows)
    title = f"{mech.what} ran a graph of its own at a barrier: {n} compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"
    return Finding(
        id=mech.key, cause=CauseName.LIBRARY, kind=mech.kind, title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=mech.advice,
        evidence=[c0.evidence] if c0.evidence else [], steps=sorted({int(s) for s in rows["step"]}),
    )



def own_barrier_finding(key: str, rows: pd.DataFrame, c0: Cause, site: Site | None) -> Finding:
    """A library call that asked for barriers itself (no reads of its own recorded):
    accelerate's gather, a rendezvous. Its graphs are the call's."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    who = (f"{site.via} (called from {loc_text(site.file, site.line)})" if site is not None and site.via
           else "A library call")
    return Finding(
        id=key, cause=CauseName.IMPLICIT_SYNC, kind="library_sync",
        title=f"{who} asked for a barrier of its own: {n} compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s",
        count=n, compiles=n, seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
        advice=ADVICE["own_barrier"], evidence=[c0.evidence] if c0.evidence else [],
        steps=sorted({int(s) for s in rows["step"]}),
        file=site.file if site is not None else None, line=site.line if site is not None else None,
        code=site.code if site is not None else None)
