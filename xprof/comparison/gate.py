"""The CI gate: thresholds a new run must stay within, and the message when it does not.

Thresholds come from the command line as text (``10%``, ``2s``, ``300ms``, ``3``), are
parsed here with one-line errors, and are checked against each
:class:`~xprof.comparison.model.PairComparison`. A percent limit on compile time also needs
the change to clear the noise floor of :class:`~xprof.comparison.metrics.Noise`; an absolute
limit (``2s``) is taken as given. The step-time limit is a statistical test: it is crossed only
when the whole 95% bootstrap interval of the change in the 10th percentile of the execute time
per step (:mod:`xprof.comparison.interval`; why not the median: there) is above it; with too
few steady steps to judge, the gate says so (:meth:`Gate.unjudged`) instead of passing silently.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from xprof.comparison.interval import MIN_STEPS
from xprof.comparison.metrics import Noise
from xprof.comparison.model import PairComparison, Violation
from xprof.diagnosis.cause import CauseName
from xprof.words import plural

STEP_TIME_METRIC = "execute_ms_p10"
"""The metric ``--max-step-time-increase`` judges: the fastest tenth of the steady steps, which
another process on the machine does not move and a slower loop does."""


class ThresholdError(ValueError):
    """A threshold that does not parse; the message is one line for a person."""


@dataclass(frozen=True)
class Limit:
    """A limit on an increase: ``percent`` of the base, or an absolute amount in seconds."""

    kind: str
    """``percent`` or ``seconds``."""
    value: float

    def allows(self, base: float, delta: float) -> bool:
        if self.kind == "percent":
            return delta <= base * self.value / 100.0
        return delta <= self.value

    def __str__(self) -> str:
        if self.kind == "percent":
            return f"{self.value:g}%"
        return f"{self.value * 1000:g}ms" if self.value < 1 else f"{self.value:g}s"


_LIMIT = re.compile(r"^\s*\+?(\d+(?:\.\d*)?|\.\d+)\s*(%|s|sec|ms)\s*$", re.IGNORECASE)


def parse_limit(text: str, option: str) -> Limit:
    """``10%`` -> 10 percent; ``2s``/``2 sec`` -> 2 s; ``300ms`` -> 0.3 s. A bare number is an error."""
    m = _LIMIT.match(text or "")
    if not m:
        raise ThresholdError(f"{option}: cannot read {text!r}; give a percent (10%) or a time (2s, 300ms)")
    value = float(m.group(1))
    unit = m.group(2).lower()
    if not math.isfinite(value):
        raise ThresholdError(f"{option}: {text!r} is not a finite number")
    if unit == "%":
        return Limit("percent", value)
    return Limit("seconds", value / 1000.0 if unit == "ms" else value)


def parse_count(text: str, option: str) -> int:
    """A non-negative whole number of events (``0``, ``3``)."""
    t = (text or "").strip()
    if not re.fullmatch(r"\+?\d+", t):
        raise ThresholdError(f"{option}: cannot read {text!r}; give a whole number >= 0 (e.g. 0)")
    return int(t)


@dataclass(frozen=True)
class Gate:
    max_new_recompiles: int | None = None
    max_compile_seconds_increase: Limit | None = None
    max_step_time_increase: Limit | None = None
    """On the 10th percentile of the execute time of steady-state steps (its 95% interval)."""
    max_new_syncs: int | None = None

    @classmethod
    def parse(cls, *, max_new_recompiles: str | None = None,
              max_compile_seconds_increase: str | None = None,
              max_step_time_increase: str | None = None,
              max_new_syncs: str | None = None) -> Gate:
        return cls(
            max_new_recompiles=None if max_new_recompiles is None
            else parse_count(max_new_recompiles, "--max-new-recompiles"),
            max_compile_seconds_increase=None if max_compile_seconds_increase is None
            else parse_limit(max_compile_seconds_increase, "--max-compile-seconds-increase"),
            max_step_time_increase=None if max_step_time_increase is None
            else parse_limit(max_step_time_increase, "--max-step-time-increase"),
            max_new_syncs=None if max_new_syncs is None else parse_count(max_new_syncs, "--max-new-syncs"),
        )

    @property
    def active(self) -> bool:
        return any(v is not None for v in self.__dict__.values())

    def describe(self) -> dict[str, str]:
        """The thresholds as given, keyed by option name (for the JSON ``gate`` object)."""
        out: dict[str, str] = {}
        for attr, value in self.__dict__.items():
            if value is not None:
                out["--" + attr.replace("_", "-")] = str(value)
        return out

    def check(self, pair: PairComparison, noise: Noise | None = None) -> list[Violation]:
        noise = noise or Noise()
        out: list[Violation] = []
        run = pair.new.name
        if self.active and pair.new.steps == 0:
            # Nothing ran (the script failed before its first step): every count would read
            # as an improvement, so the gate must not pass it.
            return [Violation("(any threshold)", run, 0, "steps > 0",
                              f"{run}: no training steps recorded (status: {pair.new.status}); "
                              "nothing to judge")]
        if self.max_new_recompiles is not None:
            m = pair.metric("recompiles")
            added = int((m.new or 0) - (m.base or 0))
            if added > self.max_new_recompiles:
                out.append(Violation(
                    "--max-new-recompiles", run, added, str(self.max_new_recompiles),
                    f"{run}: {plural(added, 'new recompile')} "
                    f"({int(m.base or 0)} -> {int(m.new or 0)} after warm-up), more than "
                    f"--max-new-recompiles {self.max_new_recompiles}" + _recompile_causes(pair)))
        if self.max_compile_seconds_increase is not None:
            v = self._time(pair, "compile_seconds", self.max_compile_seconds_increase, noise,
                           "--max-compile-seconds-increase", "compile time", 1.0, "s")
            if v:
                out.append(v)
        if self.max_step_time_increase is not None:
            v = _step_time(pair, self.max_step_time_increase)
            if v:
                out.append(v)
        if self.max_new_syncs is not None:
            added = new_syncs(pair)
            if added > self.max_new_syncs:
                out.append(Violation(
                    "--max-new-syncs", run, added, str(self.max_new_syncs),
                    f"{run}: {added} more implicit sync{'s' if added != 1 else ''} than the base "
                    f"would make in as many steps, more than --max-new-syncs {self.max_new_syncs}"
                    + _sync_sites(pair)))
        return out

    def unjudged(self, pair: PairComparison) -> list[str]:
        """Thresholds given that this pair has too little to judge by (one line each)."""
        m = pair.metric(STEP_TIME_METRIC)
        if self.max_step_time_increase is None or m.interval is not None or pair.new.steps == 0:
            return []
        why = m.note if m.verdict == "n/a" and m.note else f"not enough steps to judge ({MIN_STEPS} needed)"
        return [f"{pair.new.name}: --max-step-time-increase {self.max_step_time_increase} not checked: {why}"]

    @staticmethod
    def _time(pair: PairComparison, key: str, limit: Limit, noise: Noise, option: str, what: str,
              per_second: float, unit: str) -> Violation | None:
        m = pair.metric(key)
        if m.base is None or m.new is None or m.delta is None:
            return None
        if m.verdict == "n/a" and m.note and "steady" in m.note:
            return None
        base, delta = m.base / per_second, m.delta / per_second  # in seconds
        if limit.allows(base, delta):
            return None
        dc = int((pair.metric("compiles").new or 0) - (pair.metric("compiles").base or 0))
        if limit.kind == "percent" and not noise.significant(key, m.base, m.delta, dc):
            return None  # over the percent, but within noise (see Noise)
        rel = f" (+{m.rel * 100:.0f}%)" if m.rel is not None else ""
        fmt = (lambda v: f"{v:.2f} {unit}") if unit == "ms" else (lambda v: f"{v:.2f} s")
        return Violation(option, pair.new.name, m.delta, str(limit),
                         f"{pair.new.name}: {what} rose {fmt(m.base)} -> {fmt(m.new)}{rel}, more "
                         f"than {option} {limit}")


def _step_time(pair: PairComparison, limit: Limit) -> Violation | None:
    """Crossed when the whole interval of the change is above ``limit`` (its lower end is)."""
    m = pair.metric(STEP_TIME_METRIC)
    iv = m.interval
    if iv is None or m.base is None or m.new is None:
        return None
    over = iv.ratio_lo > 1 + limit.value / 100 if limit.kind == "percent" else iv.diff_lo > limit.value * 1000
    if not over:
        return None
    rel = f" (+{m.rel * 100:.0f}%)" if m.rel is not None else ""
    return Violation("--max-step-time-increase", pair.new.name, m.delta or 0.0, str(limit),
                     f"{pair.new.name}: execute time per step (10th percentile) rose {m.base:.2f} ms -> "
                     f"{m.new:.2f} ms{rel}; "
                     f"its 95% interval, {iv.percent()} ({iv.diff_lo:+.2f} to {iv.diff_hi:+.2f} ms), is all above "
                     f"--max-step-time-increase {limit}")


def new_syncs(pair: PairComparison) -> int:
    """Syncs in the new run minus what the base makes in as many steps (rounded)."""
    total = pair.metric("syncs")
    per_step = pair.metric("syncs_per_step")
    if total.new is None or total.base is None:
        return 0
    expected = total.base
    if per_step.base is not None and pair.new.steps != pair.base.steps:
        expected = per_step.base * pair.new.steps
    return round(total.new - expected)


def _recompile_causes(pair: PairComparison) -> str:
    causes = [f.cause_text() for f in pair.findings
              if f.status in ("new", "changed") and f.compiles_delta > 0]
    return "; cause: " + "; ".join(causes) if causes else ""


def _sync_sites(pair: PairComparison) -> str:
    sites = [f.cause_text() for f in pair.findings
             if f.status in ("new", "changed") and f.cause == CauseName.IMPLICIT_SYNC and f.count_delta > 0]
    return "; at: " + "; ".join(sites) if sites else ""
