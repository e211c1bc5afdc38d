"""Analysis of a run file: steps table, compile causes, findings with advice.

``analyze(run)`` is the only entry point the renderers need. It uses pandas, never torch.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis import causes as _causes
from xprof.analysis import findings as _findings
from xprof.analysis import steps as _steps
from xprof.analysis import tables
from xprof.analysis.findings import explained as _explained
from xprof.analysis.findings.fallback import tail_fallbacks
from xprof.analysis.model import Analysis, Finding, Totals, unmeasured
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.mechanisms import known
from xprof.diagnosis.rules.reads import sync_kind
from xprof.diagnosis.signatures import Shardings, Signature
from xprof.diagnosis.terms import MINOR_SHARE, WARMUP_STEPS
from xprof.runcolumns import ColumnRun, RunColumns, columns_of, load_columns
from xprof.runfile import CACHED, EXECUTION_COUNTERS, TO_CPU, UNCACHED, End, Run, gc_paused, is_fallback_counter
from xprof.words import plural

__all__ = ["WARMUP_STEPS", "Analysis", "Finding", "Totals", "analyze", "analyze_path"]


def analyze_path(path: str) -> Analysis:
    return analyze(load_columns(path))


def analyze(read: Run | ColumnRun) -> Analysis:
    """Tables, causes, findings and totals of a run, typed (``load_run``) or read as columns
    (``load_columns``) (the collector paused: see gc_paused)."""
    with gc_paused():
        return _analyze(read)


def _analyze(read: Run | ColumnRun) -> Analysis:
    run = read.run if isinstance(read, ColumnRun) else read
    cols = columns_of(read)
    eager = _ran_ops_eagerly(cols)
    cols, dropped, tail_ms = _consistent(cols, run.end.steps if run.end else None)
    executions = cols.sample("executions")
    steps = tables.step_table(cols)
    _steps.assign(steps)
    syncs = tables.sync_table(cols, run.sites)
    compiles = tables.compile_table(cols, steps, syncs)
    inputs = tables.input_table(run.signatures)
    steps["graph_nodes"] = tables.barrier_graph_nodes(cols, steps)
    ordinal = steps["ordinal"].to_numpy()
    steps["warmup"] = _steps.phase_is(steps, "train") & (ordinal >= 0) & (ordinal < WARMUP_STEPS)
    exec_ms, sync_exec, execute_s = tables.attribute_executions(executions, steps, syncs)
    steps["execute_ms"] = exec_ms
    steps["sync_execute_ms"] = sync_exec
    per_step_compile = _by_step(compiles["step"].tolist(), compiles["ms"].tolist(), _kahan, float)
    rows_of = _StepRows(steps)
    steps["compile_ms"] = rows_of.spread(per_step_compile, 0.0)
    if len(syncs):
        deferred = syncs["deferred"].to_numpy(dtype=bool)
        read_steps = syncs["step"].to_numpy()
        steps["syncs"] = rows_of.count(read_steps[~deferred])
        steps["deferred_reads"] = rows_of.count(read_steps[deferred])
    else:
        steps["syncs"] = 0
        steps["deferred_reads"] = 0

    compiles["graph_hash"] = _debug_hashes(run, len(compiles))
    _debug_evidence(run, compiles)
    sigs = _causes.signatures(inputs)
    specs = _causes.shardings(inputs)
    found = _causes.attribute(steps, compiles, syncs, sigs, run.sites, specs)
    compiles["cause"] = [c.cause for c in found]
    compiles["rule"] = [c.rule for c in found]
    compiles["finding"] = [str(c.key) for c in found]
    compiles["input"] = [c.input for c in found]
    compiles["sig"] = rows_of.column_at("sig", compiles["step"].to_numpy()) if len(
        compiles) else pd.array([], dtype="Int64")
    first_cause = _by_step(compiles["step"].tolist(), compiles["cause"].tolist(), _first, object)
    steps["cause"] = rows_of.spread(first_cause, "")
    sync_exec_ms, sync_exec_n = tables.sync_executions(executions, syncs, steps)
    if len(syncs):
        syncs["kind"] = [sync_kind(a, c, v if isinstance(v, str) else None)
                         for a, c, v in zip(syncs["access"], syncs["code"], syncs["via"])]
        syncs["exec_ms"] = sync_exec_ms
        syncs["saved_ms"] = tables.sync_savings(executions, syncs, steps)
        # Counted by timestamps when samples exist: the counter lags asynchronous executions.
        if len(executions):
            syncs["executions"] = sync_exec_n
    else:
        syncs["kind"] = pd.Series(dtype=object)
        syncs["exec_ms"] = pd.Series(dtype=float)
        syncs["saved_ms"] = pd.Series(dtype=float)
    missing = _missing_barrier(run, steps, syncs, tail_ms, eager)
    findings = _built(run, steps, compiles, found, syncs, sigs, specs, missing)
    _explained.attach(findings, compiles, _explained.per_compile(run, compiles), steps, tuple(run.graph_changes),
                      tuple(d.fields for d in run.debug if d.kind == "optimizer"))
    if missing is not None and not any(e.where == "barrier" for e in run.errors):
        # (a barrier hook that failed records no step: its barriers are not missing)
        findings.insert(0, missing)
    totals = _totals(run, steps, compiles, syncs, execute_s, found, float(tail_ms.sum()), eager)
    # Minor: under 1% of the run. Never minor: a finding whose time lost is not measured
    # (model.unmeasured), and a read that runs the device early at every step: its seconds on
    # this machine say little (a CPU "device" answers in microseconds), while on an accelerator
    # each is a round trip to the device and a stall of the pipeline, every step.
    for f in findings:
        per_step = (f.cause in _PER_STEP_CAUSES and f.pattern == "every step"
                    and (f.execute_seconds > 0 or f.cause == CauseName.CPU_FALLBACK))
        f.minor = not per_step and f.seconds < MINOR_SHARE * totals.wall_seconds and not unmeasured(f)
    notes = _notes(run, steps, syncs, totals, cols.dropped, eager)
    if dropped:
        notes.append(dropped)
    return Analysis(run=run, steps=steps, compiles=compiles, syncs=syncs, inputs=inputs,
                    findings=findings, totals=totals, notes=notes)


_PER_STEP_CAUSES = frozenset({CauseName.IMPLICIT_SYNC, CauseName.LIBRARY, CauseName.DATA_DEPENDENT,
                              CauseName.CPU_FALLBACK})
"""Causes whose findings are never minor when they run the device early (or copy to the
host) at every step."""

_OWN_MECHANISM = frozenset({CauseName.DATA_DEPENDENT, CauseName.CPU_FALLBACK})
"""Findings kept beside a missing barrier's in a run with no barrier at all."""


def _built(run: Run, steps: pd.DataFrame, compiles: pd.DataFrame, found: list[Cause], syncs: pd.DataFrame,
           sigs: dict[int, Signature], specs: Shardings, missing: Finding | None) -> list[Finding]:
    """The findings of the compiles' causes and the reads (the missing barrier's apart)."""
    limits = [d.fields for d in run.debug if d.kind == "dynamo_limit"]
    located = {str(d.fields.get("op")): d.fields for d in run.debug if d.kind == "fallback_site"}
    # No barrier at all: the reads are all the run did (model.generate(), or a loop that
    # misses its barrier, whose finding then owns the reads' compiles: an op with a
    # value-dependent shape or none on the device, or a known library mechanism's read (a
    # causal-mask check), is a mechanism of its own, left when the barrier is added).
    reads_only = not len(steps)
    findings = _findings.build(steps, compiles, found, syncs, sigs, run.sites, run.dynamo, specs, limits,
                               reads_only=reads_only, fallback_sites=located)
    if reads_only and missing is not None:
        findings = [f for f in findings if f.cause in _OWN_MECHANISM
                    or (known(f.id) is not None and missing.kind != "reads_only")]
        findings += tail_fallbacks(run.end.tail if run.end is not None else {}, findings)
        for f in findings:  # (no barrier, no per-step pattern: as often as the optimizer steps)
            f.pattern = f.pattern or ("every step" if f.count >= max(missing.count, 1) else None)
    return findings


def _ran_ops_eagerly(cols: RunColumns) -> bool:
    """Eager mode compiled ops one by one (``op`` compiles): graphs run outside host reads are
    then its ops, not the few a CPU-fallback op materializes in a lazy loop."""
    at = cols.compiles["at"]
    return bool(len(at) and (np.asarray(at) == "op").any())


def _missing_barrier(run: Run, steps: pd.DataFrame, syncs: pd.DataFrame, tail_ms: np.ndarray,
                     eager: bool) -> Finding | None:
    """The no-barrier finding, from the end record, or from the recorder's mark in a run cut
    before its end (:func:`_cut_end`)."""
    missing = _findings.no_barrier(run.end or _cut_end(run, len(steps), len(syncs)), steps, syncs, tail_ms,
                                   eager)
    if missing is not None and run.end is None:
        missing.evidence.append("the run ended without its end record (stopped or killed): the counts are the "
                                "recorder's when it saw the missing barrier, so at least as many steps ran")
    return missing


def _cut_end(run: Run, steps: int, syncs: int) -> End | None:
    """A run cut before its ``end`` record (a slow port stopped by hand) that reached no barrier:
    the recorder's ``no_barrier`` mark stands in for the end's counts of the steps that ran
    without one (at least as many ran)."""
    mark = next((d.fields for d in run.debug if d.kind == "no_barrier"), None)
    if steps or mark is None:
        return None
    opt, bw = mark.get("opt"), mark.get("bw")
    return End(None, "interrupted", None, 0, syncs, 0, {}, (), opt if isinstance(opt, int) else 0, 0,
               tail_bw=bw if isinstance(bw, int) else 0)


def _by_step(steps: list[int], values: list[Any], reduce: Callable[[list[Any]], Any], dtype: type) -> pd.Series:
    """``values`` reduced per step, indexed by step in order: ``groupby("step")`` of a run's
    compiles (a few dozen rows, where a groupby's fixed cost is a millisecond a run)."""
    grouped: dict[int, list[Any]] = {}
    for step, value in zip(steps, values):
        grouped.setdefault(int(step), []).append(value)
    keys = sorted(grouped)
    return pd.Series([reduce(grouped[k]) for k in keys], index=pd.Index(keys, dtype=np.int64), dtype=dtype)


def _kahan(values: list[float]) -> float:
    """pandas' groupby sum: NaN skipped, compensated (Kahan) summation in order."""
    total = compensation = 0.0
    for v in values:
        if v != v:
            continue
        y = v - compensation
        t = total + y
        compensation = t - total - y
        if compensation != compensation:  # (an infinite value: pandas starts the compensation again)
            compensation = 0.0
        total = t
    return total


def _first(values: list[Any]) -> Any:
    """pandas' groupby first: the first value that is not missing."""
    return next((v for v in values if not pd.isna(v)), None)


class _StepRows:
    """Per-step values of things keyed by step index, placed by position where the step
    table's indices are sorted and distinct (as read; :func:`_consistent` drops repeats), else
    through pandas' ``map`` (a table built by hand)."""

    def __init__(self, steps: pd.DataFrame) -> None:
        self.steps = steps
        self.idx = steps["i"].to_numpy()
        self.ordered = len(self.idx) < 2 or bool((np.diff(self.idx) > 0).all())

    def _rows(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The row of each index in ``wanted`` and whether the table has it."""
        idx = self.idx
        if not len(idx):
            return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
        pos = np.minimum(np.searchsorted(idx, wanted), len(idx) - 1)
        return pos, idx[pos] == wanted

    def spread(self, by_step: pd.Series, missing: Any) -> Any:
        """``by_step`` (indexed by step index) as a column of the step table, ``missing``
        where a step has no value: ``steps["i"].map(by_step).fillna(missing)``."""
        if not self.ordered:
            mapped = self.steps["i"].map(by_step)
            return (mapped.fillna(missing).astype(float) if isinstance(missing, float)
                    else mapped.astype(object).fillna(missing))
        out = np.empty(len(self.idx), dtype=float if isinstance(missing, float) else object)
        out.fill(missing)  # (not np.full: a str into objects is 15x slower there)
        if len(by_step):
            rows, hit = self._rows(by_step.index.to_numpy())
            out[rows[hit]] = by_step.to_numpy(dtype=out.dtype)[hit]
        # (object stays object: pandas would take a column of strings for its string dtype)
        return out if out.dtype != object else pd.Series(out, index=self.steps.index, dtype=object)

    def column_at(self, column: str, step_ids: np.ndarray) -> np.ndarray:
        """``column`` of the step of each index in ``step_ids`` (each has one row in the
        table: :func:`_consistent`)."""
        if not self.ordered:
            return self.steps.set_index("i")[column].reindex(step_ids).to_numpy()
        return self.steps[column].iloc[np.searchsorted(self.idx, step_ids)].to_numpy()

    def count(self, step_ids: np.ndarray) -> np.ndarray:
        """How many of ``step_ids`` fall on each step (int64)."""
        if not self.ordered:
            return self.steps["i"].map(pd.Series(step_ids).groupby(step_ids).size()).fillna(0).astype(int).to_numpy()
        rows, hit = self._rows(np.asarray(step_ids))
        return np.bincount(rows[hit], minlength=len(self.idx)).astype(np.int64)


def _consistent(cols: RunColumns, tail_step: int | None = None) -> tuple[RunColumns, str, np.ndarray]:
    """The columns with one record per step index and no compile without its step, and the
    compile times (ms) of the compiles after the last barrier (step ``tail_step``, the end
    record's ``steps``: no step record has them, on purpose).

    A process killed between writing a compile and its step record leaves such a
    compile; a corrupted or concatenated file can repeat a step index. Both are dropped
    (and said in the notes) rather than failing the whole analysis.
    """
    idx = cols.steps["i"]
    # Steps are sorted by index (stably): a repeat follows its first record.
    keep = np.ones(len(idx), dtype=bool)
    if len(idx) > 1:
        keep[1:] = idx[1:] != idx[:-1]
    has_step = np.isin(cols.compiles["step"], idx)
    tail = ~has_step & (cols.compiles["step"] == tail_step) if tail_step is not None else ~has_step & False
    tail_ms = cols.compiles["ns"][tail] / 1e6
    has_step_or_tail = has_step | tail
    repeated, orphans = int((~keep).sum()), int((~has_step_or_tail).sum())
    if tail.any():
        cols = dataclasses.replace(cols, compiles={k: v[has_step] for k, v in cols.compiles.items()})
    if not repeated and not orphans:
        return cols, "", tail_ms
    has_step = np.isin(cols.compiles["step"], idx)
    parts = []
    if repeated:
        parts.append(plural(repeated, "repeated step record"))
    if orphans:
        parts.append(plural(orphans, "compile record") + " without their step")
    note = f"Ignored {' and '.join(parts)} (a file cut off mid-step, or damaged)."
    return dataclasses.replace(cols, steps={k: v[keep] for k, v in cols.steps.items()},
                               counters={k: v[keep] for k, v in cols.counters.items()},
                               compiles={k: v[has_step] for k, v in cols.compiles.items()}), note, tail_ms


def _debug_evidence(run: Run, compiles: pd.DataFrame) -> None:
    """torch_xla's own reason and frames for each compile (``debug_reason``, ``debug_where``,
    ``debug_dynamo``), from ``xprof run``'s capture.

    Matched by order, and only when the capture saw as many compiles as the run recorded
    (as for the hashes), so a partial capture never lends one compile another's reason.
    """
    entries = [d.fields for d in run.debug if d.kind == "compile"]
    n = len(compiles)
    reasons: list[str | None] = [None] * n
    wheres: list[str | None] = [None] * n
    dyn = [False] * n
    graph_inputs: list[int | None] = [None] * n
    if n and len(entries) == n:
        for k, d in enumerate(entries):
            inputs = d.get("inputs")
            graph_inputs[k] = inputs if type(inputs) is int else None
            frames = [f for f in d.get("frames") or [] if isinstance(f, list) and len(f) == 3]
            reasons[k] = str(d.get("cause") or "") or None
            if d.get("cause_kind") == "barrier":
                # Under watch() torch_xla sees xprof's wrapper as the top frame of every barrier
                # and words it as a host read; the capture marked it a barrier (debuginfo.py).
                reasons[k] = "a step barrier (torch_xla.sync / mark_step)"
            dyn[k] = d.get("cause_kind") == "dynamo" or any("/_dynamo/" in str(f[1]) for f in frames[:3])
            user = [f for f in d.get("user_frames") or [] if isinstance(f, list) and len(f) == 3]
            lib = [f for f in frames if "-packages" in str(f[1]) and "/torch" not in str(f[1])]
            pick = user[0] if user else (lib[0] if lib else None)
            if pick is not None:
                wheres[k] = f"{pick[0]} ({os.path.basename(str(pick[1]))}:{pick[2]})"
    compiles["debug_reason"] = reasons
    compiles["debug_where"] = wheres
    compiles["debug_dynamo"] = dyn
    compiles["debug_inputs"] = pd.array(graph_inputs, dtype="Int64")


def _debug_hashes(run: Run, n: int) -> list[str | None]:
    """torch_xla's graph hash of each compile, from ``xprof run``'s debug capture.

    The capture has no timestamps, only order; hashes are attached only when it saw as
    many compiles as the run recorded, so a partial capture never mislabels a graph.
    """
    hashes = [d.graph_hash for d in run.debug if d.kind == "compile"]
    if n and len(hashes) == n:
        return hashes
    return [None] * n


def _pcts(values: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Percentiles ``qs`` of the values that are not NaN (None where none is), in one pass."""
    v = values[~np.isnan(values)]
    return [float(x) for x in np.percentile(v, qs)] if len(v) else [None] * len(qs)


def _totals(run: Run, steps: pd.DataFrame, compiles: pd.DataFrame, syncs: pd.DataFrame,
            execute_s: float, found: list[Cause], tail_compile_ms: float = 0.0, eager: bool = True) -> Totals:
    tail = run.end.tail if run.end else {}
    per_step_uncached = steps["uncached"].to_numpy()
    uncached = int(per_step_uncached.sum()) + int(tail.get(UNCACHED, 0))
    cached = int(steps["cached"].to_numpy().sum()) + int(tail.get(CACHED, 0))
    executions = int(steps["executions"].to_numpy().sum()) + sum(int(tail.get(name, 0)) for name in EXECUTION_COUNTERS)
    transfers = int(steps["transfers"].to_numpy().sum()) + int(tail.get(TO_CPU, 0))
    # Masks over plain arrays: a boolean filter of the table copies every column it keeps.
    work = steps["work"].to_numpy(dtype=bool)
    ordinal = steps["ordinal"].to_numpy()
    n_work = _steps.training_steps(steps) + (run.end.tail_opt if run.end is not None and _tail_step(run, eager) else 0)
    graph_barriers = int(work.sum())
    warm = sum(1 for c in found if c.cause == CauseName.WARMUP)
    # Compiles without a recorded event (the CompileTime ring dropped it) count as recompiles
    # only when they happened after warm-up.
    missing = max(uncached - len(compiles), 0)
    recompiles = max(uncached - warm, 0) if missing == 0 else (len(found) - warm) + missing
    if not _tail_step(run, eager) or _steps.training_steps(steps) < WARMUP_STEPS:
        # Compiled after the last barrier, in no step (a final evaluation or print), or in a
        # last step that is still warm-up (eager mode's only step): not a recompile of the
        # loop (the notes count the former).
        recompiles = max(recompiles - int(tail.get(UNCACHED, 0)), 0)
    fallback: dict[str, int] = {}
    for d in steps["fallback"].to_numpy()[tables.fallback_rows(steps)].tolist():
        for k, v in d.items():
            fallback[k] = fallback.get(k, 0) + int(v)
    for k, v in tail.items():
        if is_fallback_counter(k):
            fallback[k] = fallback.get(k, 0) + int(v)
    start = float(run.started_unix or (steps["t0"].min() if len(steps) else 0.0))
    if run.end and run.end.t:
        stop = run.end.t
    elif len(steps):
        stop = float(steps["t1"].max())
    else:
        stop = start
    wall = max(stop - start, 0.0)
    compile_s = (float(compiles["ms"].sum()) if len(compiles) else 0.0) / 1e3 + tail_compile_ms / 1e3
    steady = work & (ordinal >= WARMUP_STEPS)
    quiet = steady & (per_step_uncached == 0)
    # A step whose graphs ran op by op (eager mode) has no execute time: torch_xla times those
    # in EagerOpExecuteTime, which is not recorded (hundreds of samples a step).
    timed = quiet & ~((steps["mid_graphs"].to_numpy() > 0) & (tables.barrier_graphs(steps) == 0))
    step_ms, execute_ms = steps["step_ms"].to_numpy(dtype=np.float64), steps["execute_ms"].to_numpy(dtype=np.float64)
    step_median, step_p95 = _pcts(step_ms[steady], (50, 95))
    execute_median, execute_p95 = _pcts(execute_ms[timed], (50, 95))
    live = tables.live_reads(syncs)
    status = "incomplete" if run.end is None else run.end.status
    return Totals(
        steps=n_work, barriers=len(steps), wall_seconds=wall, compile_seconds=compile_s,
        execute_seconds=execute_s, compiles=uncached, recompiles=recompiles, cached_compiles=cached,
        distinct_graphs=(int(compiles["graph_hash"].nunique()) if len(compiles)
                         and compiles["graph_hash"].notna().all() else uncached),
        executions=executions, syncs=len(live),
        deferred_reads=len(syncs) - len(live), extra_executions=max(executions - graph_barriers, 0),
        eval_steps=_steps.eval_steps(steps), eval_passes=_steps.eval_passes(steps),
        forced_reads=int(((live["executions"].to_numpy() > 0) | (live["uncached"].to_numpy() > 0)
                          | (live["cached"].to_numpy() > 0)).sum()) if len(live) else 0,
        optimizer_steps=(int(steps["opt"].to_numpy().sum()) if "opt" in steps else 0)
        + (run.end.tail_opt if run.end is not None else 0),
        transfers=transfers, fallback_ops=fallback, complete=run.complete, status=status,
        exception=run.end.exception if run.end else None, profiler_errors=len(run.errors),
        step_ms_median=step_median, step_ms_p95=step_p95,
        execute_ms_median=execute_median, execute_ms_p95=execute_p95,
        compile_share=compile_s / wall if wall > 0 else 0.0,
    )


def _tail_step(run: Run, eager: bool) -> bool:
    """A last training step after the last barrier: an optimizer step, and graphs run outside
    host reads in eager mode (it runs each op at once; a lazy loop's pending ops never ran, and
    the few graphs a CPU-fallback op materialized there are not a step)."""
    end = run.end
    return end is not None and end.tail_opt > 0 and end.tail_graphs > 0 and eager


def _notes(run: Run, steps: pd.DataFrame, syncs: pd.DataFrame, totals: Totals, unreadable: int = 0,
           eager: bool = True) -> list[str]:
    notes = []
    if _tail_step(run, eager):
        notes.append("The last training step ran after the last barrier (its ops ran one by one, and no "
                     "barrier followed): it is counted in the steps, not in the per-step tables.")
    if not run.complete:
        notes.append("The run is incomplete: the process ended without closing the run file "
                     "(killed or crashed); everything up to the last step written is shown.")
    if totals.status == "error" and totals.exception:
        notes.append(f"The training loop raised {str(totals.exception).rstrip('.')}; the run ends there.")
    if totals.status == "interrupted":
        why = "SIGTERM" if totals.exception == "SIGTERM" else "Ctrl-C"
        notes.append(f"The run was stopped ({why}); everything up to the stop is shown.")
    if run.end is not None and run.end.t and len(steps) and totals.status != "ok":
        # Time after the last barrier is in no step: the step that was compiling or running.
        last = float(steps["t1"].max())
        gap = run.end.t - last
        if gap > max(1.0, 0.05 * totals.wall_seconds):
            notes.append(f"{_fmt_seconds(gap)} passed after the last barrier (step "
                         f"{int(steps['user_step'].iloc[-1])}) without reaching another: the run "
                         "ended while the next step was tracing, compiling or running.")
    auto = next((d.fields for d in run.debug if d.kind == "explain" and d.fields.get("auto")), None)
    if auto is not None:
        after = auto.get("after")
        at = steps.loc[steps["i"] == after, "user_step"].tolist() if isinstance(after, int) and len(steps) else []
        when = f" at step {int(at[0])}" if at and int(at[0]) >= 0 else ""
        why = ("its cost is under 1% of steps this long" if auto.get("why") == "long_steps"
               else "a new graph from inputs seen before")
        notes.append(f"--explain switched itself on{when} ({why}): the new graphs "
                     "after it are compared at their lines, those before are not. Record with --explain "
                     "(watch(explain=True)) to compare every one.")
    if run.errors:
        notes.append(f"xprof hit {plural(len(run.errors), 'error')} of its own while recording; training "
                     f"was not affected. First: {run.errors[0].where}: {run.errors[0].error}")
    dropped = run.end.samples_dropped if run.end else ()
    if dropped:
        notes.append(f"Some timing samples were lost from torch_xla's ring buffer ({', '.join(dropped)}); "
                     "execute times are partial.")
    lost, lost_from = (run.end.events_dropped, run.end.dropped_from) if run.end else (0, None)
    if lost:
        notes.append(f"The recorder dropped {plural(lost, 'event')} from step {lost_from} on (steps, "
                     "host reads): the disk did not take the run file's writes in time and training did not "
                     "wait for it, so the figures after that step are partial.")
    if run.skipped_lines + unreadable:
        notes.append(f"{plural(run.skipped_lines + unreadable, 'unreadable line')} in the run file "
                     + ("was" if run.skipped_lines + unreadable == 1 else "were") + " skipped.")
    if run.impossible:
        notes.append(f"{plural(run.impossible, 'record')} with impossible values "
                     + ("was" if run.impossible == 1 else "were") + " skipped (negative, NaN or infinite "
                     "times, durations or counts, or a step index repeated or out of order): the recorder never "
                     "writes them, so this file was changed or damaged and its figures are partial.")
    if len(syncs) and len(steps):
        live = tables.live_reads(syncs)
        after = np.flatnonzero(live["step"].to_numpy() > int(steps["i"].to_numpy().max()))
        tail_compiles = 0 if _tail_step(run, eager) or run.end is None else int(run.end.tail.get(UNCACHED, 0))
        if len(after):
            notes.append(f"{plural(len(after), 'host read')} after the last step barrier "
                         + ("is" if len(after) == 1 else "are") + " not counted as "
                         "findings (e.g. a final print)"
                         + (f", nor the {plural(tail_compiles, 'compile')} after it "
                            "as recompiles." if tail_compiles else "."))
    if totals.deferred_reads:
        notes.append(f"{plural(totals.deferred_reads, 'read')} ran in step closures after the barrier "
                     "(xm.add_step_closure): deferred, they never split a step's graph.")
    for d in run.debug:
        if d.kind == "hook":
            notes.append(_late_hook_note(d.fields, steps))
    if not run.signatures and totals.steps:
        notes.append("No step inputs were recorded (no DataLoader batches or .to(device) moves "
                     "were seen), so shape changes cannot be told apart from graph changes.")
    return notes


_LATE_HOOKS = {"mask_index": "Boolean-mask indexing and assignment (t[mask], t[mask] = v)"}


def _late_hook_note(fields: dict[str, Any], steps: pd.DataFrame) -> str:
    """A hook the recorder installed once a counter showed it could matter (``debug`` kind
    ``hook``): reads it would have seen before then are not among the host reads."""
    what = _LATE_HOOKS.get(str(fields.get("hook")), f"The {fields.get('hook')} hook")
    i = fields.get("i")
    at = steps.loc[steps["i"] == i, "user_step"].tolist() if isinstance(i, int) and len(steps) else []
    upto = f"up to step {int(at[0])}" if at else "before the last step"
    counter = fields.get("counter") or "its counter"
    return (f"{what} is hooked once torch_xla has run {counter} (the hook costs every tensor "
            f"index, so it waits for that evidence): such a read {upto} is in its step's counters, "
            "without its line.")


def _fmt_seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"
