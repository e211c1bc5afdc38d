"""The plain sentences that open the report and the terminal summary.

They answer the reader's first two questions, in this order: how much did compiling
cost, and what should I change. Both renderers use the same words so the HTML and the
terminal never disagree.
"""

from __future__ import annotations

import math
from typing import Any

from xprof.analysis.model import Analysis, Finding, unmeasured
from xprof.analysis.ranks import GROUP_MIN, RankFinding, RankGroup, RanksView, span
from xprof.analysis.steps import is_inference, phase_is
from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.registry import UNITS
from xprof.diagnosis.terms import MINOR_SHARE, NOTHING_TO_JUDGE, WARMUP_STEPS
from xprof.report import fmt
from xprof.runfile import Run
from xprof.words import plural

CAUSE_LABELS: dict[str, str] = {name: u.label for name, u in UNITS.items()}
"""Each cause's name in the report (its unit's label)."""

CAUSE_COLORS: dict[str, str] = {name: u.colour for name, u in UNITS.items()}
"""Each cause's colour in the report (its unit's)."""


def spmd_line(run: Run) -> str | None:
    """``SPMD: 4 devices, mesh 4x1 (data, model)`` (and ``process 1 of 2`` on a pod);
    None outside SPMD runs."""
    spmd = run.spmd
    if spmd is None:
        return None
    parts = [plural(spmd.devices, "device")] if spmd.devices is not None else []
    if spmd.mesh_shape:
        mesh = "x".join(str(d) for d in spmd.mesh_shape)
        if spmd.axis_names:
            mesh += " (" + ", ".join("-" if n is None else n for n in spmd.axis_names) + ")"
        parts.append(f"mesh {mesh}")
    if spmd.process_count and spmd.process_count > 1:
        parts.append(f"process {spmd.process_index} of {spmd.process_count}")
    return "SPMD" + (": " + ", ".join(parts) if parts else "")


def cause_label(cause: str | None) -> str:
    if not cause:
        return ""
    return CAUSE_LABELS.get(cause, cause.replace("_", " "))


def ranked(findings: list[Finding]) -> list[Finding]:
    """What to change, most seconds lost first, then what is for information (an evaluation
    pass, a checkpoint now and then), so the first is the one :func:`next_step` names; minor
    ones left out (see :func:`minor`); ties keep the analysis's order."""
    return sorted((f for f in findings if not f.minor),
                  key=lambda f: (f.severity == "info", -(f.seconds or 0.0)))


def minor(findings: list[Finding]) -> list[Finding]:
    """Findings that cost under MINOR_SHARE of the run each, most seconds first."""
    return sorted((f for f in findings if f.minor), key=lambda f: -(f.seconds or 0.0))


def minor_line(analysis: Analysis) -> str | None:
    """One sentence for the folded findings, or None when there are none."""
    folded = minor(analysis.findings)
    if not folded:
        return None
    total = sum(f.seconds for f in folded)
    kinds = fmt.short_list(sorted({f.kind.replace("_", " ") for f in folded}), 4)
    return (f"{plural(len(folded), 'minor finding')} ({kinds}; {fmt.seconds(total)} in all, "
            f"each under {MINOR_SHARE:.0%} of the run) folded away.")


def status_banner(analysis: Analysis) -> str | None:
    """A warning sentence when the numbers cover only part of a run, else None."""
    t = analysis.totals
    if not analysis.run.complete or t.status == "incomplete":
        text = (f"Incomplete run: the process stopped before xprof.watch() finished, so this "
                f"report covers only the {plural(t.steps, 'step')} "
                f"{'that was' if t.steps == 1 else 'that were'} recorded.")
        if analysis.run.truncated_tail:
            text += " The last line of the run file was cut off mid-write."
        return text
    if t.status == "interrupted":
        return (f"Interrupted run: the loop was stopped (Ctrl-C) after "
                f"{plural(t.steps, 'step')}; the numbers cover those steps.")
    if t.status == "error":
        raised = str(t.exception).rstrip(". ") if t.exception else "an exception"
        return (f"The training loop raised {raised} after {plural(t.steps, 'step')}; the numbers cover "
                "those steps.")
    return None


def unwatched_work(analysis: Analysis) -> str | None:
    """When the run recorded nothing but torch_xla's debug output (``xprof run``) saw graphs
    compile and run: the training ran in a process ``watch()`` was not in (a worker that
    ``torch_xla.launch`` or ``xmp.spawn`` started)."""
    if analysis.totals.compiles or analysis.totals.syncs or len(analysis.syncs):
        return None  # this process compiled or read values itself: the work was watched
    for d in analysis.run.debug:
        if d.kind == "capture":
            compiles, runs = d.fields.get("compiles"), d.fields.get("executions")
            if isinstance(compiles, int) and isinstance(runs, int) and (compiles or runs):
                return (f"Yet torch_xla's debug output counted {plural(compiles, 'compile')} and "
                        f"{plural(runs, 'execution')}: the training ran in another process (a worker "
                        "started by torch_xla.launch or xmp.spawn). Put xprof.watch() inside the worker "
                        "function (one run file per rank).")
    return None


def headline(analysis: Analysis) -> list[str]:
    """Four or five sentences: cost of compiling, recompiles, host reads, what to change."""
    t = analysis.totals
    if t.steps == 0 and t.compiles == 0:
        out = ["This run recorded no training steps: no step barrier ran a graph while "
               "xprof.watch() was recording."]
        elsewhere = unwatched_work(analysis)
        if elsewhere is not None:
            out.append(elsewhere)
        return out
    out = [
        _ran_sentence(analysis),
        f"Compiling took {fmt.seconds(t.compile_seconds)}, {fmt.percent(t.compile_share)} of "
        f"the wall time: {plural(t.compiles, 'uncached compile')} of "
        f"{plural(t.distinct_graphs, 'distinct graph')}.",
    ]
    end = analysis.run.end
    closed = t.optimizer_steps - (end.tail_opt if end is not None else 0)  # the last ones may be pending
    if t.steps and closed >= 1.5 * t.steps:
        # A sync every N optimizer steps: one graph holds N training steps.
        per = round(closed / t.steps)
        out.insert(1, f"Each step barrier closed about {per} optimizer steps ({closed} in all): "
                      f"one graph runs {per} training steps of one optimizer (or one step each of {per} "
                      "optimizers, as a GAN does), and the steps counted here are barriers.")
    if t.steps == 0 and any(f.cause == CauseName.NO_BARRIER for f in analysis.findings):
        trained = ("its optimizer steps ran" if t.optimizer_steps
                   else "its training steps ran (backward passes, no optimizer)" if end is not None and end.tail_bw
                   else "its graphs ran at host reads")
        out[0] = f"This run reached no step barrier in {fmt.seconds(t.wall_seconds)}: {trained}, but none ended in one."
    else:
        out.append(_recompile_sentence(analysis))
    out += _read_sentences(analysis)
    if t.fallback_ops:
        ops = fmt.short_list(sorted(t.fallback_ops), 5)
        out.append(f"{plural(len(t.fallback_ops), 'op')} fell back to the CPU: {ops}.")
    return out


def _ran_sentence(analysis: Analysis) -> str:
    """``This run trained N steps (M barriers...) in S.``"""
    t = analysis.totals
    counted = f" ({plural(t.barriers, 'barrier')})" if t.barriers != t.steps else ""
    entries = int((analysis.steps["barrier"] == "compile_entry").sum()) if len(analysis.steps) else 0
    if counted and entries and t.barriers - entries <= t.steps:
        # torch_xla.compile syncs what is pending when the compiled function is entered, and
        # runs its graph at the exit: two barriers a call
        counted = (f" ({plural(t.barriers, 'barrier')}: torch_xla.compile syncs on entering the "
                   "compiled function and runs its graph on leaving it)")
    if t.eval_steps and not _model_in_eval_mode(analysis.steps):
        # Forward-only barriers under no_grad with the model left in train mode: an RL
        # rollout, a sampling loop; "eval" would name what the loop does not do.
        counted = (f" and ran {plural(max(t.eval_passes, 1), 'forward-only pass', 'forward-only passes')} "
                   f"between them ({plural(t.eval_steps, 'barrier')} with grad off, the model in train mode; "
                   f"{t.barriers} barriers in all)")
    elif t.eval_steps:
        # "2 eval passes (4 eval steps; 35 barriers in all)": an eval step is an eval batch.
        counted = (f" and ran {plural(max(t.eval_passes, 1), 'eval pass', 'eval passes')} "
                   f"({plural(t.eval_steps, 'eval step')}; {t.barriers} barriers in all)")
    inference = not t.optimizer_steps and is_inference(analysis.steps)
    verb = "ran" if inference else "trained"
    if inference:
        counted += " with no backward pass or optimizer step (inference)"
    if t.steps == 0:
        return f"This run reached no step barrier in {fmt.seconds(t.wall_seconds)}."
    return f"This run {verb} {plural(t.steps, 'step')}{counted} in {fmt.seconds(t.wall_seconds)}."


def _model_in_eval_mode(steps: Any) -> bool:
    """Some eval-phase barrier ran with the model in eval mode (files without the mark: True)."""
    if not len(steps) or "eval_mode" not in steps or "phase" not in steps:
        return True
    return bool(steps["eval_mode"].to_numpy(dtype=bool)[phase_is(steps, "eval")].any())


def _recompile_sentence(analysis: Analysis) -> str:
    """What the compiles after warm-up were, or that there were none."""
    t = analysis.totals
    if t.recompiles:
        evals = sum(f.compiles for f in analysis.findings if f.kind == "eval_pass")
        if evals == t.recompiles:
            return (f"{'One' if t.recompiles == 1 else t.recompiles} of them "
                    f"{'was' if t.recompiles == 1 else 'were'} an evaluation pass's own "
                    f"graph{'s' if t.recompiles != 1 else ''}, compiled after warm-up: expected, and "
                    "cached after.")
        notes = []
        for n, what in ((_early_read_compiles(analysis), f"compiled inside host reads in the first "
                         f"{WARMUP_STEPS} steps: graphs the reads needed, not the step"),
                        (evals, "an evaluation pass's own graphs: expected, cached after")):
            if n:
                whom = "it was" if t.recompiles == 1 else "all of them" if n == t.recompiles else f"{n} of them"
                notes.append(f"{whom} {what}")
        return (f"{'One' if t.recompiles == 1 else t.recompiles} of them {'was' if t.recompiles == 1 else 'were'} "
                f"not warm-up (every compile of the first {WARMUP_STEPS} steps): "
                f"{'a recompile' if t.recompiles == 1 else 'recompiles'}"
                f" that a loop with fixed shapes and graphs would not pay"
                + (f" ({'; '.join(notes)})." if notes else "."))
    if t.steps == 0:
        return ("No step barrier (torch_xla.sync()) ran a graph: every graph compiled and ran at a host "
                "read, so the reads below are what this run did, not extra work on top of steps.")
    if t.steps <= WARMUP_STEPS:
        return (f"Only {plural(t.steps, 'training step')} recorded: too few to judge "
                f"recompiles (warm-up is the first {WARMUP_STEPS} steps).")
    return f"Nothing recompiled after warm-up (the first {WARMUP_STEPS} steps): the step graph is stable."


def _read_sentences(analysis: Analysis) -> list[str]:
    """The host reads, or the executions mid-step without one."""
    t = analysis.totals
    if t.syncs:
        extra = (f", {plural(t.extra_executions, 'extra execution')} beyond one a barrier"
                 if t.extra_executions and t.steps else "")
        if t.forced_reads >= t.syncs:
            out = [f"{plural(t.syncs, 'implicit host read')} (such as .item(), print(tensor) "
                   f"or a boolean mask) made the device run early{extra}."]
        elif t.forced_reads:
            out = [f"{plural(t.syncs, 'implicit host read')} of device tensors (such as .item(), "
                   f"print(tensor) or a boolean mask); {t.forced_reads} of them made the device run "
                   f"early{extra}."]
        else:
            out = [f"{plural(t.syncs, 'host read')} of device tensors, none of which made the "
                   "device run early (the values were already computed)."]
        unseen = _unseen_reads(analysis)
        return out + ([unseen] if unseen else [])
    if t.extra_executions > _deferred_executions(analysis):
        compiles = analysis.compiles
        how = ("op by op (eager mode)" if any(f.cause == CauseName.EAGER_MODE for f in analysis.findings)
               else "at the ops that ran on the CPU (the graph before each runs early)"
               if any(f.kind == "graph_cut" for f in analysis.findings)
               else "outside host reads, ops run eagerly (eager mode) around the compiled step"
               if len(compiles) and bool((compiles["at"] == "op").any())
               else "inside torch.compile's XLA bridge, which syncs the compiled graph's inputs when it runs "
               "(expected with torch.compile)" if _used_dynamo(analysis)
               else "outside any host read xprof saw")
        return [f"{plural(t.extra_executions - _deferred_executions(analysis), 'execution')} "
                f"ran mid-step, {how}."]
    return ["No implicit host read made the device run mid-step."]


def _used_dynamo(analysis: Analysis) -> bool:
    """torch.compile ran in this run: its own barriers, or graphs it traced."""
    steps = analysis.steps
    if not len(steps):
        return False
    return bool(phase_is(steps, "dynamo").any() or ("dynamo_graphs" in steps and (steps["dynamo_graphs"] > 0).any()))


def _deferred_executions(analysis: Analysis) -> int:
    """Executions run by reads in step closures (after the barrier: not mid-step)."""
    syncs = analysis.syncs
    if not len(syncs):
        return 0
    return int(syncs.loc[syncs["deferred"].astype(bool), "executions"].sum())


def _unseen_reads(analysis: Analysis) -> str | None:
    """Transfers to the host that no hooked read made, while executions ran mid-step that no
    read explains: values turned into numbers inside ops (a tensor learning rate in Adam's
    ``addcdiv_(value=...)``, ``fill_(tensor)``), which no Python method xprof hooks sees."""
    t, syncs = analysis.totals, analysis.syncs
    if t.fallback_ops or any(f.cause in (CauseName.DATA_DEPENDENT, CauseName.CPU_FALLBACK) for f in analysis.findings):
        return None  # (an op on the CPU copies its inputs to the host: transfers no read made)
    inside = int(syncs["executions"].sum()) if len(syncs) and "executions" in syncs else 0
    unexplained = t.extra_executions - inside - _deferred_executions(analysis)
    unseen = t.transfers - len(syncs)
    if unexplained <= 0 or unseen <= 0:
        return None
    n = min(unexplained, unseen)
    return (f"About {plural(n, 'more read')} came from inside ops, not from a Python call xprof hooks "
            "(torch_xla counted the transfers): a tensor passed where a number is expected, such as a "
            "tensor learning rate (Adam's addcdiv_(value=...), a scheduler's fill_()); each runs the graph "
            "before it early. Pass plain numbers there, or use a torch_xla optimizer that keeps them on "
            "the device.")


def costly(analysis: Analysis) -> list[Finding]:
    """The findings that cost time and want a change, costliest first."""
    # (eager mode, steps that never ran, torch.compile giving up: not measured, still wanted)
    return [f for f in ranked(analysis.findings)
            if f.severity != "info" and (f.seconds > 0 or unmeasured(f))]


_RAISED = ("Nothing to judge yet.", "The training loop raised before its first step: fix that error, then record "
           "the loop again.")


def raised_before_first_step(analysis: Analysis) -> bool:
    """The loop raised before its first step (and ran no optimizer step without a barrier):
    the error is the first thing to fix, not a read in the forward of the step that raised."""
    t, end = analysis.totals, analysis.run.end
    return t.steps == 0 and t.status == "error" and not t.optimizer_steps and not (end is not None and end.tail_bw)


def next_step(analysis: Analysis) -> tuple[str, str]:
    """(what to change first, how): the costliest finding, or why there is nothing to do."""
    t = analysis.totals
    if raised_before_first_step(analysis):
        return _RAISED
    costly_ = costly(analysis)
    if costly_:
        first = costly_[0]
        return f"Change this first: {first.title.rstrip('.')}.", first.advice
    if analysis.findings and all(f.minor for f in analysis.findings):
        return "Nothing costly to change.", ("What xprof found cost under 1% of the run each (folded into one "
                                             "line below).")
    if analysis.findings:
        return "Nothing costly to change.", ("The findings below are for information: expected costs (an "
                                             "evaluation pass, a checkpoint now and then) or too small to matter.")
    if t.steps == 0 and t.status == "error":
        return _RAISED
    if t.steps == 0 and unwatched_work(analysis) is not None:
        return ("Nothing to judge here.", "The steps ran in worker processes: record each with xprof.watch() "
                "inside the function torch_xla.launch runs, then xprof summary on the run files' folder.")
    return "Nothing to change.", "xprof found no recompile or host read that cost time in this run."


def cost_line(f: Finding) -> str:
    """``3.2 s lost: 7 compiles (2.9 s) and 0.3 s of extra execution``."""
    if f.kind == "dynamo_limit":
        return "time lost not measured (the steps after it ran uncompiled, with nothing to compare with)"
    if f.kind == "graph_cut":
        return "time lost not measured (the host copies and the op on the CPU are inside the step's time)"
    if f.cause == CauseName.EAGER_MODE:
        return (f"time lost not measured (the run has no compiled step to compare with), "
                f"{plural(f.count, 'step')}")
    parts = []
    if f.compiles:
        parts.append(f"{plural(f.compiles, 'compile')} ({fmt.seconds(f.compile_seconds)})")
    if f.execute_seconds:
        parts.append(f"{fmt.seconds(f.execute_seconds)} of extra execution")
    detail = " and ".join(parts)
    times = f", {plural(f.count, 'time')}" if f.count and f.count != f.compiles else ""
    return f"{fmt.seconds(f.seconds)} lost" + (f": {detail}" if detail else "") + times


def short(analysis: Analysis) -> list[str]:
    """Three lines for the end of ``xprof demo``: cost, host reads, what to change."""
    t = analysis.totals
    after = f", {t.recompiles} after warm-up" if t.recompiles else ", none after warm-up"
    lines = [
        f"{plural(t.steps, 'step')} in {fmt.seconds(t.wall_seconds)}; compiling took "
        f"{fmt.seconds(t.compile_seconds)} ({fmt.percent(t.compile_share)}): "
        f"{plural(t.compiles, 'uncached compile')}{after}.",
        (f"{plural(t.syncs, 'implicit host read')} forced "
         f"{plural(t.extra_executions, 'extra execution')}." if t.syncs
         else "No implicit host reads."),
        next_step(analysis)[0],
    ]
    return lines


# -- ranks (the same table and words in the HTML report, the summary and ``xprof ranks``) --

RANK_COLUMNS = ("rank", "steps", "compiles", "recompiles", "compile s", "host reads", "sync wait s",
                "median step ms")

NO_STRAGGLER = "No straggler: the ranks compile and wait alike."


def rank_cells(row: dict[str, Any]) -> list[str]:
    """One row of :func:`xprof.analysis.ranks.rank_table` as the cells under :data:`RANK_COLUMNS`."""
    step = row.get("step_ms_median")
    rank = str(row["rank"]) + (" (incomplete)" if row.get("status") == "incomplete" else "")
    return [rank, str(row["steps"]), str(row["compiles"]), str(row["recompiles"]),
            f"{row['compile_s']:.2f}", str(row["syncs"]), f"{row['sync_wait_s']:.2f}",
            f"{step:.1f}" if isinstance(step, float) and math.isfinite(step) else ""]


def _spread(v: tuple[float, float, float] | None, digits: int) -> str:
    """``12.30 (12.10-12.60)``: the median and the range of a group's values."""
    if v is None:
        return ""
    lo, mid, hi = v
    if round(lo, digits) == round(hi, digits):
        return f"{mid:.{digits}f}"
    return f"{mid:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def group_cells(g: RankGroup) -> list[str]:
    """A group of alike ranks as one row under :data:`RANK_COLUMNS` (times: median (range))."""
    label = f"{len(g.ranks)} ranks: {span(g.ranks)}" + (" (incomplete)" if g.status == "incomplete" else "")
    return [label, str(g.steps), str(g.compiles), str(g.recompiles), _spread(g.compile_s, 2), str(g.syncs),
            _spread(g.sync_wait_s, 2), _spread(g.step_ms_median, 1)]


def rank_rows(view: RanksView) -> tuple[list[list[str]], list[list[str]]]:
    """The rank table as shown: (groups, outliers). Few ranks: no groups, every rank a row.
    Many ranks: one row per group of at least :data:`xprof.analysis.ranks.GROUP_MIN` ranks
    that counted alike, then every other rank and every straggler by itself."""
    if not view.grouped:
        return [], [rank_cells(r) for r in view.rows]
    groups = [g for g in view.groups if len(g.ranks) >= GROUP_MIN]
    grouped = {r for g in groups for r in g.ranks}
    singled = grouped - {s.rank for s in view.stragglers}
    return ([group_cells(g) for g in groups],
            [rank_cells(r) for r in view.rows if r["rank"] not in singled])


def group_sentence(g: RankGroup) -> str:
    """``250 ranks: 41 compiles, 39 recompiles, 120 host reads over 2000 steps``."""
    return (f"{plural(len(g.ranks), 'rank')}: {plural(g.compiles, 'compile')}, "
            f"{plural(g.recompiles, 'recompile')}, {plural(g.syncs, 'host read')} over "
            f"{plural(g.steps, 'step')}")


def rank_finding_where(f: RankFinding) -> str:
    """``ranks 1 (not 0)``: where a finding appeared, and where it did not."""
    where = f"ranks {span(f.ranks)}"
    if f.missing_on:
        where += f" (not {span(f.missing_on)})"
    return where


def exit_lines(analysis: Analysis, run_path: str) -> list[str]:
    """The end of ``xprof run``: steps, compile share, the first thing to change (the same
    finding the summary and the report rank first) and the command that opens the report."""
    import shlex

    t = analysis.totals
    warm = min(t.steps, WARMUP_STEPS)
    ended = (f", then the loop raised {t.exception.split(':', 1)[0]}" if t.status == "error" and t.exception
             else "")
    lines = [
        f"xprof: {plural(t.steps, 'step')} ({warm} warm-up) in {fmt.seconds(t.wall_seconds)}{ended}; "
        f"{plural(t.compiles, 'compile')}, {t.recompiles} after warm-up",
        f"xprof: compiling took {fmt.seconds(t.compile_seconds)}, {fmt.percent(t.compile_share)} of the run",
    ]
    first = costly(analysis)
    if raised_before_first_step(analysis):
        lines.append(NOTHING_TO_JUDGE)
    elif first:
        lines.append(f"xprof: first thing to change: {first[0].title.rstrip('.')}")
    elif t.steps == 0 and t.status == "error":
        lines.append(NOTHING_TO_JUDGE)
    elif t.steps == 0 and unwatched_work(analysis) is not None:
        lines.append("xprof: nothing to judge here: the steps ran in worker processes (torch_xla.launch); "
                     "put xprof.watch() inside the worker function")
    else:
        lines.append("xprof: first thing to change: nothing stands out (no recompile or host sync "
                     "with a known cause after warm-up)")
    lines.append(f"xprof: open the report: xprof report {shlex.quote(run_path)} --open")
    return lines


def _early_read_compiles(analysis: Analysis) -> int:
    """Compiles counted as recompiles though they ran inside host reads of the warm-up steps
    (a read whose graphs grew from read to read owns them, see analysis.causes)."""
    c, steps = analysis.compiles, analysis.steps
    if not len(c) or "cause" not in c or not len(steps) or "user_step" not in steps:
        return 0
    warm_steps = set(steps.loc[(steps["user_step"] >= 0) & (steps["user_step"] < WARMUP_STEPS), "i"].tolist())
    mine = (c["cause"] != CauseName.WARMUP) & (c["at"] == "step") & (c["sync_row"] >= 0) & c["step"].isin(warm_steps)
    return int(mine.sum())
