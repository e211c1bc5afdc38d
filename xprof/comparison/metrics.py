"""The metrics a comparison lines up, and when a change in one is more than noise.

Counts (compiles, graphs, syncs, transfers) are deterministic for a given loop: any
change is real. Times are not: two recordings of the same loop on the same machine
differ by tens of percent in compile time (another process compiling at the same
time is enough), and by a few percent in step time. So a time is only called worse
or better when the change is larger than both a relative threshold and an absolute
floor, and step times are medians over steady-state steps (after warm-up, without a
compile), never means that one slow step can move. The median and the 10th percentile of the
execute time per step are judged on the steps themselves: a bootstrap interval of the ratio of
the two runs' percentiles (:mod:`xprof.comparison.interval`), with no absolute floor; the
step-time gate judges the 10th percentile (why: that module's docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.model import Analysis
from xprof.comparison.interval import MIN_STEPS, Interval
from xprof.comparison.model import MetricChange
from xprof.diagnosis.terms import WARMUP_STEPS


def _default_floors() -> dict[str, float]:
    return {"wall_seconds": 1.0, "compile_seconds": 1.0, "step_ms_median": 1.0,
            "execute_ms_p95": 2.0, "syncs_per_step": 0.01}


COUNT_DRIVEN = ("compile_seconds", "wall_seconds")
"""Times that more (or fewer) uncached compiles explain."""


@dataclass(frozen=True)
class Noise:
    """When a timing change counts: ``|delta| >= floors[key]`` and ``|delta / base| >= rel``."""

    rel: float = 0.10
    floors: dict[str, float] = field(default_factory=_default_floors)
    """Absolute floors in the metric's unit (seconds, ms, syncs per step)."""
    min_steady_steps: int = 5
    """Fewer steady-state steps than this on either side: step times are ``n/a``."""
    min_tail_steps: int = 100
    """A p95 is judged only over this many steady-state steps on both sides; below it, the
    p95 is the second or third slowest step, which one busy moment on the machine moves."""

    count_floor: float = 0.1
    """Floor (seconds) for compile and wall time when the compile count moved the same way:
    more compiles is a cause, not noise, so a smaller change is believed."""

    def significant(self, key: str, base: float, delta: float, compiles_delta: int = 0) -> bool:
        floor = self.floors.get(key, 0.0)
        if key in COUNT_DRIVEN and compiles_delta and (compiles_delta > 0) == (delta > 0):
            floor = min(floor, self.count_floor)
        if abs(delta) < floor:
            return False
        if base == 0:
            return delta != 0
        return abs(delta / base) >= self.rel


@dataclass(frozen=True)
class MetricSpec:
    key: str
    label: str
    unit: str
    direction: int
    """-1: lower is better; 0: no good direction (only ``changed``)."""
    timing: bool = False
    """Judged with :class:`Noise` (else any change counts)."""
    steady: bool = False
    """Needs enough steady-state steps on both sides."""
    tail: bool = False
    """A tail percentile: shown always, judged only over :attr:`Noise.min_tail_steps` steps."""
    sampled: bool = False
    """Judged on the per-step samples of both runs (the bootstrap interval), not on floors."""
    percentile: int = 50
    """Of a sampled metric: the percentile of the steps' execute times it is."""
    shown_only: bool = False
    """Shown, never judged: the whole step's wall time, host work included, which two runs of
    one loop on a shared machine put 70% apart (a scan re-traced every step shows here)."""


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("steps", "Steps", "count", 0),
    MetricSpec("wall_seconds", "Wall time", "s", -1, timing=True),
    MetricSpec("compiles", "Uncached compiles", "count", -1),
    MetricSpec("recompiles", "Recompiles (after warm-up)", "count", -1),
    MetricSpec("compile_seconds", "Compile time", "s", -1, timing=True),
    MetricSpec("distinct_graphs", "Distinct graphs", "count", -1),
    MetricSpec("step_ms_median", "Step time (median)", "ms", -1, timing=True, steady=True, shown_only=True),
    MetricSpec("execute_ms_median", "Execute time / step (median)", "ms", -1, timing=True, steady=True,
               sampled=True),
    MetricSpec("execute_ms_p10", "Execute time / step (p10)", "ms", -1, timing=True, steady=True,
               sampled=True, percentile=10),
    MetricSpec("execute_ms_p95", "Execute time / step (p95)", "ms", -1, timing=True, steady=True,
               tail=True),
    MetricSpec("syncs_per_step", "Implicit syncs / step", "per step", -1, timing=True),
    MetricSpec("syncs", "Implicit syncs", "count", -1),
    MetricSpec("transfers", "Host transfers", "count", -1),
    MetricSpec("fallback_ops", "CPU-fallback ops", "count", -1),
)
"""In display order. ``syncs_per_step`` is "timing" only in that it gets a floor (0.01)."""

SPECS = {m.key: m for m in METRICS}


def steady_steps(analysis: Analysis) -> int:
    """Steps after warm-up that ran a graph without compiling one (where times are fair)."""
    df = analysis.steps
    if df is None or not len(df):
        return 0
    return int(_steady_mask(df).sum())


def steady_execute_ms(analysis: Analysis) -> np.ndarray:
    """The execute time (ms) of each steady step that has one: what the median is taken over
    (a step whose graphs ran op by op, in eager mode, has no execute time)."""
    df = analysis.steps
    if df is None or not len(df) or "execute_ms" not in df:
        return np.zeros(0)
    mask = _steady_mask(df).to_numpy()
    if "mid_graphs" in df and "barrier_uncached" in df and "barrier_cached" in df:
        at_barrier = df["barrier_uncached"].to_numpy() + df["barrier_cached"].to_numpy()
        mask = mask & ~((df["mid_graphs"].to_numpy() > 0) & (at_barrier == 0))
    ms = df["execute_ms"].to_numpy(dtype=np.float64)[mask]
    return ms[np.isfinite(ms)]


def _steady_mask(df: pd.DataFrame) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    if "work" in df:
        mask &= df["work"].astype(bool)
    if "ordinal" in df:  # n-th step that ran a graph
        mask &= df["ordinal"].astype(int) >= WARMUP_STEPS
    elif "warmup" in df:
        mask &= ~df["warmup"].astype(bool)
    if "uncached" in df:
        mask &= df["uncached"].fillna(0).astype(int) == 0
    return mask


def values(analysis: Analysis) -> dict[str, float | None]:
    """Every metric of :data:`METRICS` for one run (None where the run cannot say)."""
    t = analysis.totals
    steps = t.steps
    return {
        "steps": float(steps),
        "wall_seconds": _num(t.wall_seconds),
        "compiles": float(t.compiles),
        "recompiles": float(t.recompiles),
        "compile_seconds": _num(t.compile_seconds),
        "distinct_graphs": float(t.distinct_graphs),
        "step_ms_median": _num(t.step_ms_median),
        "execute_ms_median": _num(t.execute_ms_median),
        "execute_ms_p10": _p10(analysis),
        "execute_ms_p95": _num(t.execute_ms_p95),
        "syncs_per_step": (t.syncs / steps) if steps else None,
        "syncs": float(t.syncs),
        "transfers": float(t.transfers),
        "fallback_ops": float(sum(t.fallback_ops.values())) if t.fallback_ops else 0.0,
    }


def _p10(analysis: Analysis) -> float | None:
    """The 10th percentile of the steady steps' execute times: what the step-time gate judges."""
    ms = steady_execute_ms(analysis)
    return float(np.percentile(ms, 10)) if len(ms) else None


def _num(value: Any) -> float | None:
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def judge(spec: MetricSpec, base: float | None, new: float | None, noise: Noise,
          steady: tuple[int, int], compiles_delta: int = 0, interval: Interval | None = None) -> MetricChange:
    """The delta and verdict of one metric; see the module docstring for the rules. ``interval``:
    the bootstrap interval of a sampled metric (:attr:`MetricSpec.sampled`)."""
    if spec.sampled and base is not None and new is not None:
        return _judge_sampled(spec, base, new, noise, steady, interval)
    if base is None or new is None:
        return MetricChange(spec.key, spec.label, spec.unit, base, new, None, None, "n/a",
                            "not measured in " + ("either run" if base is None and new is None
                                                  else "the base" if base is None else "the new run"))
    delta = new - base
    rel = delta / base if base else None
    note = None
    if spec.steady and min(steady) < noise.min_steady_steps:
        verdict = "n/a"
        note = f"too few steady steps ({steady[0]} vs {steady[1]})"
    elif spec.shown_only:
        verdict = "same" if delta == 0 else "info"
        note = "not judged (host time: noisy)"
    elif spec.tail and min(steady) < noise.min_tail_steps:
        verdict = "same" if delta == 0 else "info"
        note = f"not judged (< {noise.min_tail_steps} steps)"
    elif spec.direction == 0:
        verdict = "changed" if delta else "same"
    elif spec.timing and not noise.significant(spec.key, base, delta, compiles_delta):
        verdict = "same"
        if delta:
            note = "within noise"
    elif delta == 0:
        verdict = "same"
    else:
        verdict = "worse" if (delta > 0) == (spec.direction < 0) else "better"
    return MetricChange(spec.key, spec.label, spec.unit, base, new, delta, rel, verdict, note)


def _judge_sampled(spec: MetricSpec, base: float, new: float, noise: Noise, steady: tuple[int, int],
                   interval: Interval | None) -> MetricChange:
    """Worse only when the whole interval of new/base is above ``1 + noise.rel``, better only
    when it is wholly below ``1 / (1 + noise.rel)``; too few steps: ``n/a``, said."""
    delta = new - base
    rel = delta / base if base else None
    if interval is None:
        return MetricChange(spec.key, spec.label, spec.unit, base, new, delta, rel, "n/a",
                            f"not enough steps to judge ({steady[0]} vs {steady[1]} steady steps; {MIN_STEPS} needed)")
    if interval.ratio_lo > 1 + noise.rel:
        verdict, note = "worse", None
    elif interval.ratio_hi < 1 / (1 + noise.rel):
        verdict, note = "better", None
    else:
        verdict, note = "same", ("within noise" if delta else None)
    return MetricChange(spec.key, spec.label, spec.unit, base, new, delta, rel, verdict, note, interval)
