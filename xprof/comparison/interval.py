"""How sure a change in step time is: a bootstrap interval of the ratio of a percentile of the
execute times of two runs' steady steps (the median, and the 10th percentile the gate judges).

A point estimate (new median / base median) moves by tens of percent between two recordings of
one loop on a busy machine, and a fixed floor (the 1 ms the gate once had) hides a step under
a millisecond that triples. So step times are judged on the per-step samples of both runs: each
side is resampled with replacement, the ratio of the two percentiles is taken each time, and the
2.5th and 97.5th percentiles of those ratios are the 95% interval. The user's relative limit
applies to the interval: a step is slower by more than 25% only when the whole interval is
above +25% (its lower end is), so a run must show the change, not merely allow it.

Why the gate judges the 10th percentile, not the median (measured, benchmarks/time_gate.py):
another process on the machine only ever adds time to a step, and only to the steps it
preempted, so under load the upper part of a run's steps moves and its lowest tenth does not;
a loop that does more work is slower in every step, its fastest tenth too. Over two runs of 36
same-loop and 36 slower pairs of interleaved recordings (0.5, 5, 50 ms steps, half the rounds
beside a CPU burner, load 7-9 on 2 cores), the median's interval at a 10% limit raised 2 false
alarms and missed 17 slower twins; the 10th percentile's raised none and missed 5, all at 0.5 ms
(a busy 50 ms pair: median -9% to +54%, 10th percentile +23% to +26%: under load a step is
either unhindered or slowed by half, and the median falls between the two). What it cannot see:
a change that slows fewer than about nine steps in ten (a stall every other step); the
median's interval and the p95 show that.

Why this and not a rank test (Mann-Whitney): the limit is a ratio ("25% slower"), and the
interval is of that ratio, so the threshold and the evidence are in one unit; a rank test
answers "is there any shift", which thousands of steps always show, and says nothing of its
size. numpy only (no scipy): resamples drawn from a fixed seed, so the same two runs give the
same interval every time (the summary cache and CI logs stay reproducible).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_STEPS = 20
"""Steady steps each run needs before its step time is judged: below it a percentile's interval
is wider than any limit worth setting, and the gate says "not enough steps to judge"."""
RESAMPLES = 2000
"""Bootstrap resamples of each side."""
MAX_SAMPLES = 4000
"""Steps drawn (without replacement, fixed seed) from a longer run before resampling: the
interval of a percentile over 4000 steps is already narrow, and a 1M-step run stays cheap."""
CONFIDENCE = 0.95
SEED = 0


@dataclass(frozen=True)
class Interval:
    """The 95% bootstrap interval of new / base of the ``percentile``-th percentile of the steps
    (``ratio_lo``..``ratio_hi``) and of new - base in ms (``diff_lo``..``diff_hi``), over
    ``steps`` samples."""

    ratio_lo: float
    ratio_hi: float
    diff_lo: float
    diff_hi: float
    steps: tuple[int, int]
    percentile: int = 50

    def percent(self) -> str:
        """``+18% to +31%``: the interval as a change of the base."""
        return f"{(self.ratio_lo - 1) * 100:+.0f}% to {(self.ratio_hi - 1) * 100:+.0f}%"

    def to_json(self) -> dict[str, float | int | list[int]]:
        return {"ratio_low": self.ratio_lo, "ratio_high": self.ratio_hi, "delta_low_ms": self.diff_lo,
                "delta_high_ms": self.diff_hi, "confidence": CONFIDENCE, "steps": list(self.steps),
                "percentile": self.percentile}


def _percentiles(x: np.ndarray, q: int, rng: np.random.Generator) -> np.ndarray:
    """The ``q``-th percentile of each of :data:`RESAMPLES` resamples of ``x`` (in blocks:
    bounded memory)."""
    if len(x) > MAX_SAMPLES:
        x = rng.choice(x, MAX_SAMPLES, replace=False)
    out = np.empty(RESAMPLES)
    block = max(1, (1 << 22) // len(x))
    for start in range(0, RESAMPLES, block):
        rows = min(block, RESAMPLES - start)
        out[start:start + rows] = np.percentile(x[rng.integers(0, len(x), size=(rows, len(x)))], q, axis=1)
    return out


def interval(base: np.ndarray, new: np.ndarray, percentile: int = 50) -> Interval | None:
    """The interval of the change of the ``percentile``-th percentile from ``base`` to ``new``
    (per-step times, ms); None when a side has fewer than :data:`MIN_STEPS` finite samples or
    a base percentile of 0."""
    base = np.asarray(base, dtype=np.float64)
    new = np.asarray(new, dtype=np.float64)
    base, new = base[np.isfinite(base)], new[np.isfinite(new)]
    if min(len(base), len(new)) < MIN_STEPS:
        return None
    rng = np.random.default_rng(SEED)
    mb, mn = _percentiles(base, percentile, rng), _percentiles(new, percentile, rng)
    if (mb <= 0).any():
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    ratio = np.percentile(mn / mb, [tail, 100 - tail])
    diff = np.percentile(mn - mb, [tail, 100 - tail])
    return Interval(float(ratio[0]), float(ratio[1]), float(diff[0]), float(diff[1]), (len(base), len(new)), percentile)
