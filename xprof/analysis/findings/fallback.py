"""Ops without an XLA lowering that ran on the CPU, as findings: the calls, the graphs they
cut, the compiles they forced."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.findings.common import compiled_early, step_pattern
from xprof.analysis.model import Finding
from xprof.analysis.tables import fallback_rows
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.rules.fallback import FALLBACK_MECHANISM, op_advice, uncompiled
from xprof.diagnosis.terms import WARMUP_STEPS
from xprof.runfile import is_fallback_counter


def uncompiled_fallbacks(findings: list[Finding], steps: pd.DataFrame, compiles: pd.DataFrame,
                          ordinal_of: Mapping[int, int], steady: int,
                          located: dict[str, dict[str, Any]] | None = None) -> list[Finding]:
    """CPU-fallback ops that run after warm-up without compiling anything new: each call
    still copies to the host and cuts the graph, so it is a finding of its own."""
    ran = fallback_rows(steps)
    cause = uncompiled(zip(steps["ordinal"].to_numpy()[ran].tolist(), steps["fallback"].to_numpy()[ran].tolist()),
                       {op for f in findings if f.cause == CauseName.CPU_FALLBACK for op in f.key.ops},
                       any(f.cause == CauseName.DATA_DEPENDENT for f in findings))
    if cause is None:
        return []
    key = cause.key
    return [fallback_finding(key, cause, compiles.iloc[0:0], steps, ordinal_of, steady, located)]



def tail_fallbacks(tail: Mapping[str, int], findings: list[Finding]) -> list[Finding]:
    """A run with no barrier at all: the ops torch_xla ran on the CPU (its ``aten::`` counters
    after the last barrier, here the whole run) that no finding has (a value-dependent op's
    finding has the ops it runs on the CPU), as a finding of their own: adding the barrier
    leaves them. Which ops is :func:`~xprof.diagnosis.rules.fallback.uncompiled`'s rule, the
    whole run counted as past warm-up (it has no steps to leave out)."""
    ran = [op for op, n in tail.items() if is_fallback_counter(op) and int(n) > 0]
    cause = uncompiled([(WARMUP_STEPS, ran)],
                       {op for f in findings if f.cause == CauseName.CPU_FALLBACK for op in f.key.ops},
                       any(f.cause == CauseName.DATA_DEPENDENT for f in findings))
    if cause is None:
        return []
    ops = cause.key.ops
    total = sum(int(tail[op]) for op in ops)
    names, has = ", ".join(ops), ("have" if len(ops) > 1 else "has")
    return [Finding(
        id=str(cause.key), cause=CauseName.CPU_FALLBACK, kind="cpu_fallback",
        title=f"{names} {has} no XLA lowering and ran on the CPU: {total} call{'s' if total != 1 else ''}",
        count=total, compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0, advice=_advice(ops),
        evidence=[f"torch_xla counted {', '.join(f'{op} x{int(tail[op])}' for op in ops)} in a run with no step "
                  "barrier (no per-step counts)",
                  "each call copies its input to the host and cuts the graph around it; adding the barrier "
                  "leaves it"], steps=[])]


def _advice(ops: list[str]) -> str:
    """The mechanism, then what was checked for these ops in place of the generic "replace them"."""
    checked = op_advice(ops)
    return " ".join([FALLBACK_MECHANISM, *checked]) if checked else ADVICE["cpu_fallback"]


def fallback_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame,
                      ordinal_of: Mapping[int, int], steady: int,
                      located: dict[str, dict[str, Any]] | None = None) -> Finding:
    ops = key.ops
    ms = float(rows["ms"].sum())
    ran = []
    ran_rows = fallback_rows(steps)  # most steps ran no fallback op: an empty dict counts 0 calls
    for i, d in zip(steps["i"].to_numpy()[ran_rows].tolist(), steps["fallback"].to_numpy()[ran_rows].tolist()):
        calls_here = sum(int(d.get(op, 0)) for op in ops)
        if calls_here:
            ran.append((i, calls_here))
    calls = sum(n for _, n in ran)
    ran_steps = [i for i, _ in ran]
    pattern = step_pattern([ordinal_of.get(i, 0) for i in ran_steps], steady)
    names = ", ".join(ops)
    has = "have" if len(ops) > 1 else "has"
    when = f" {pattern}" if pattern else ""
    n = len(rows)
    ran_calls = f"{names} {has} no XLA lowering and ran on the CPU{when}: {calls} call{'s' if calls != 1 else ''}"
    title = f"{ran_calls}, {n} compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"
    evidence = [c0.evidence] if c0.evidence else []
    evidence.append("each call copies its input to the host and cuts the graph around it")
    kind = "cpu_fallback"
    steady_ran = [i for i in ran_steps if ordinal_of.get(i, 0) >= WARMUP_STEPS]
    if not n and steady_ran:
        # Nothing compiled, but each call still ran the graph before it early (torch_xla's
        # counters: graphs between barriers, outside host reads) and copied to the host and
        # back: time xprof cannot separate from the step's. In most steps, a change to make.
        cut = steps.loc[steps["i"].isin(steady_ran), "mid_graphs"].to_numpy()
        if cut.sum() and len(steady_ran) * 2 >= max(steady, 1):
            kind = "graph_cut"
            per = cut.sum() / len(steady_ran)
            it = "them" if len(ops) > 1 else "it"
            graphs = f"{per:.3g} graph{'s' if per != 1 else ''}"
            title = f"{ran_calls}, each step cut at {it} ({graphs} run early a step)"
            evidence.append(f"{int(cut.sum())} graphs ran before the barrier, outside any host read, in the "
                            f"{len(steady_ran)} steps after warm-up that called {it}: "
                            "the graph up to each call runs early so its inputs can be copied to the host; the "
                            "copies and the op on the CPU are not timed apart from the step")
    early = compiled_early(rows, ran, ordinal_of)
    if early is not None:
        # The graphs it cut were compiled once: the same calls later hit the cache.
        user, later = early
        title += (f" (all compiles by step {user}; the {later} call{'s' if later != 1 else ''} "
                  "after compiled nothing)")
        evidence.append(f"its {later} later call{'s' if later != 1 else ''} compiled nothing: the graphs "
                        "around it are cached once seen, so this cost is paid when a new code path first "
                        "runs it (a new shape, the first evaluation or generation)")
    located = located or {}
    site = next((located[op] for op in ops if op in located), None)
    if site is not None:
        evidence.append(f"it is the backward of the forward call at {Path(str(site['file'])).name}:{site['line']}: "
                        f"{site.get('code', '')} (autograd runs it from C++, with no Python line of its own; "
                        "found from that call's autograd node)")
    advice = _advice(ops)
    finding = Finding(
        id=str(key), cause=CauseName.CPU_FALLBACK, kind=kind, title=title, count=calls, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=ran_steps, pattern=pattern,
    )
    if site is not None:
        finding.file, finding.line = str(site["file"]), int(site["line"])
        finding.func, finding.code = str(site.get("func") or ""), str(site.get("code") or "")
    return finding
