"""What an analysis of a run holds: the tables, the totals and the findings.

Renderers (the HTML report, the terminal summary, compare) take an :class:`Analysis`
and nothing else; they never look at run-file records directly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from xprof.analysis.tables import live_reads
from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.terms import MINOR_SHARE
from xprof.runfile import Run


def is_missing(value: Any) -> bool:
    """None, NaN or pandas' NA: a table cell with no value (anything ``pd.isna`` cannot judge
    counts as present)."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def unmeasured(f: Finding) -> bool:
    """A finding that wants a change though its time lost is not measured: eager mode (no
    compiled step to compare with), optimizer steps that never ran (lost work), torch.compile
    giving up on a function (its uncompiled steps after that), an op on the CPU that cuts
    most steps' graph (its copies are not timed). Never minor."""
    return f.cause == CauseName.EAGER_MODE or f.kind in ("never_ran", "dynamo_limit", "graph_cut")


SUMMARY_SCHEMA = "xprof-summary"
SUMMARY_VERSION = 1


@dataclass
class Finding:
    """One problem, its cost, the evidence and the fix.

    ``seconds`` is what it cost in this run: compile time of the compiles it caused plus
    the execution time of the extra executions it forced. Fields that do not apply are None.
    """

    id: str
    cause: str
    """One of :data:`xprof.diagnosis.registry.FINDING_CAUSES`."""
    kind: str
    """Finer pattern: ``dynamic_padding``, ``partial_batch``, ``batch_size_change``,
    ``shape_change``, ``sharding_change``, ``item``, ``print``, ``format``, ``tensor_condition``, ``tolist``,
    ``numpy``, ``to_cpu``, ``scalar``, ``library_sync``, ``checkpoint``, ``materialize``,
    ``periodic_graph``, ``eval_pass``, ``graph_change``, ``graph_every_step``, ``cpu_fallback``,
    ``eager_mode``, ``no_barrier``, ``unknown``.

    ``eager_mode``'s ``seconds`` is 0: what compiling the step would save is not measured
    by a run that never ran it compiled (it is never *minor* either)."""
    title: str
    """One sentence a person reads first."""
    count: int
    """How many times it happened (compiles for compile causes, reads for syncs)."""
    compiles: int
    seconds: float
    compile_seconds: float
    execute_seconds: float
    advice: str
    evidence: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    file: str | None = None
    line: int | None = None
    func: str | None = None
    code: str | None = None
    via: str | None = None
    input: str | None = None
    dim: int | None = None
    shapes: list[list[int]] | None = None
    """Distinct shapes the input took, in order of first appearance."""
    pattern: str | None = None
    """E.g. "every 5 steps", "the last batch of each epoch"."""
    what_if: list[dict[str, Any]] | None = None
    """For padding: what bucketing would leave. Rows of ``strategy``, ``graphs`` (distinct
    shapes, one graph each), ``compile_seconds`` (recompile time of the graphs after the
    first, at the observed mean compile time), ``saved_seconds`` and ``padding_waste``
    (extra elements computed, relative to the recorded ones). The first row is the run
    as recorded."""
    lines: list[dict[str, Any]] | None = None
    """Every user line of one mechanism, when there are several (value-dependent ops that run
    in the same steps and feed one graph): ``file``, ``line``, ``code``, in the order they ran.
    All must change: fixing one leaves the others' compiles."""
    inputs: list[str] | None = None
    """Every input that changed shape with ``input`` (padded by the same collate call), the
    finding's own first; None when it changed alone."""
    leaves: int | None = None
    """The training steps' recompiles (after warm-up; an eval pass's own apart) once this
    finding's advice is applied, where that removes every compile it owns and nothing else
    (what-if rows say it per padding choice: ``run_recompiles``)."""
    severity: str = "warning"
    """``warning`` (costs time every run), ``info`` (expected, e.g. an occasional checkpoint)."""
    minor: bool = False
    """Cost under :data:`MINOR_SHARE` of the run: folded in the summary and the report."""
    shardings: list[str] | None = None
    """SPMD ``sharding_change``: the sharding specs the input took with the same shape, the
    usual one first (``""``: none, replicated)."""
    graph_changes: list[dict[str, Any]] | None = None
    """``--explain``: what changed in its new graphs (the first 5), each ``{step, at, lines,
    more_lines, backward, library, changed}``, ``lines`` the user lines where the change starts
    (``{file, line, func, code, what, kind, op, ops}``; docs/diagnosis.md)."""

    @property
    def key(self) -> FindingKey:
        return FindingKey.parse(self.id)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Totals:
    steps: int
    """Training steps (docs/diagnosis.md: an optimizer step and the barriers it spans; in a
    loop without an optimizer, each barrier that ran a graph)."""
    barriers: int
    """All step barriers, including empty ones (MpDeviceLoader syncs at epoch edges)."""
    wall_seconds: float
    compile_seconds: float
    execute_seconds: float
    compiles: int
    """Uncached compiles in the run."""
    recompiles: int
    """Uncached compiles after warm-up (see :data:`xprof.diagnosis.terms.WARMUP_STEPS`)."""
    cached_compiles: int
    distinct_graphs: int
    executions: int
    syncs: int
    """Host reads of device tensors that made the host wait (deferred step-closure reads
    excluded)."""
    deferred_reads: int
    extra_executions: int
    """Executions beyond one per barrier that ran a graph (caused by syncs)."""
    transfers: int
    """Device-to-host transfers (``xla::_to_cpu``)."""
    fallback_ops: dict[str, int]
    complete: bool
    status: str
    """``ok``, ``error`` (the loop raised), ``interrupted``, or ``incomplete`` (killed)."""
    exception: str | None
    profiler_errors: int
    step_ms_median: float | None
    step_ms_p95: float | None
    execute_ms_median: float | None
    """Median execute time of steady-state steps (after warm-up, without compiles)."""
    execute_ms_p95: float | None
    compile_share: float
    """compile_seconds / wall_seconds."""
    eval_steps: int = 0
    """Barriers of eval passes that ran a graph (no optimizer step or backward pass; grad off
    or the model in eval mode)."""
    eval_passes: int = 0
    """Runs of eval barriers (only empty barriers between them): how often the loop evaluated."""
    forced_reads: int = 0
    optimizer_steps: int = 0
    """``optimizer.step()`` calls the recorder counted (at barriers, and after the last one)."""
    """Host reads (of ``syncs``) that ran or compiled a graph: the ones that made the device
    run early. The others found their value already computed."""


@dataclass
class Analysis:
    """Everything the renderers need.

    ``steps``: one row per barrier, columns ``i, t0, tb, t1, barrier, work`` (the
    barrier ran a graph), ``ordinal`` (index among working steps, -1 for empty
    barriers), ``warmup``, ``sig, uncached, cached, barrier_uncached, barrier_cached,
    executions, transfers, fallback`` (dict of CPU-fallback op counts), ``graph_nodes,
    compile_ms, execute_ms, sync_execute_ms, step_ms, syncs, deferred_reads, cause``
    (``cause``: the cause of the step's first uncached compile, or "").

    ``compiles``: one row per uncached compile, columns ``step, t, ms, at`` ("barrier"
    or "step" for one forced mid-step by a host read), ``cause, finding, input, sig,
    graph_nodes, graph_hash`` (torch_xla's hash, when ``xprof run`` captured it).

    ``syncs``: one row per host read, columns ``step, t0, t1, ms, site, kind, file,
    line, func, code, via, deferred, uncached, cached, executions``.

    ``inputs``: one row per (signature, input), columns ``sig, name, shape, dtype, src,
    sharding`` (``sharding``: SPMD runs' sharding spec, None where not recorded).
    """

    run: Run
    steps: pd.DataFrame
    compiles: pd.DataFrame
    syncs: pd.DataFrame
    inputs: pd.DataFrame
    findings: list[Finding]
    totals: Totals
    notes: list[str] = field(default_factory=list)
    """Caveats worth telling the reader (incomplete run, dropped samples, profiler errors)."""

    @property
    def live_syncs(self) -> pd.DataFrame:
        """The host reads that made the host wait: ``syncs`` without deferred step-closure reads."""
        return live_reads(self.syncs)

    def summary(self) -> dict[str, Any]:
        """The documented, versioned object of ``xprof summary --json`` (docs/json.md)."""
        t = self.totals
        return {
            "schema": SUMMARY_SCHEMA,
            "version": SUMMARY_VERSION,
            "name": self.run.name,
            "path": self.run.path,
            "complete": t.complete,
            "status": t.status,
            "steps": t.steps,
            "barriers": t.barriers,
            "eval_steps": t.eval_steps,
            "eval_passes": t.eval_passes,
            "compiles": t.compiles,
            "recompiles": t.recompiles,
            "cached_compiles": t.cached_compiles,
            "distinct_graphs": t.distinct_graphs,
            "compile_seconds": round(t.compile_seconds, 6),
            "execute_seconds": round(t.execute_seconds, 6),
            "wall_seconds": round(t.wall_seconds, 6),
            "compile_share": round(t.compile_share, 6),
            "executions": t.executions,
            "extra_executions": t.extra_executions,
            "syncs": t.syncs,
            "deferred_reads": t.deferred_reads,
            "forced_reads": t.forced_reads,
            "optimizer_steps": t.optimizer_steps,
            "transfers": t.transfers,
            "fallback_ops": t.fallback_ops,
            "step_ms_median": t.step_ms_median,
            "step_ms_p95": t.step_ms_p95,
            "execute_ms_median": t.execute_ms_median,
            "execute_ms_p95": t.execute_ms_p95,
            "profiler_errors": t.profiler_errors,
            "exception": t.exception,
            "meta": self.run.meta,
            "spmd": self.run.spmd._asdict() if self.run.spmd is not None else None,
            "findings": [f.to_json() for f in self.findings],
            "minor": {"count": sum(1 for f in self.findings if f.minor),
                      "seconds": round(sum(f.seconds for f in self.findings if f.minor), 6),
                      "share": MINOR_SHARE},
            "notes": list(self.notes),
        }
