"""The step-time gate is a statistical test (issue 38): a bootstrap interval of the ratio of the
median execute times of both runs' steady steps, with the user's limit applied to the interval.
Exact synthetic samples from fixed seeds: what the gate decides, not how fast it decides."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xprof.comparison import Gate, Noise
from xprof.comparison.interval import MIN_STEPS, interval
from xprof.comparison.metrics import SPECS, judge
from xprof.comparison.model import PairComparison, RunInfo

ROOT = Path(__file__).resolve().parent.parent


def _steps(median_ms: float, n: int, seed: int, spread: float = 0.08) -> np.ndarray:
    """``n`` step times around ``median_ms``: log-normal noise and a few slow outliers (a step
    that waited on the host), as a busy machine records them."""
    rng = np.random.default_rng(seed)
    x = median_ms * np.exp(rng.normal(0.0, spread, n))
    x[rng.random(n) < 0.05] *= 3.0
    return x


def _pair(base: np.ndarray, new: np.ndarray) -> PairComparison:
    iv = interval(base, new)
    spec = SPECS["execute_ms_median"]
    m = judge(spec, float(np.median(base)), float(np.median(new)), Noise(), (len(base), len(new)), 0, iv)
    info = [RunInfo(name, f"{name}.json", 200, "ok", True, None, None, None, None, None) for name in ("base", "new")]
    return PairComparison(base=info[0], new=info[1], metrics=pd.DataFrame([m.to_json()]).set_index("key"),
                          metric_changes=[m], findings=[], graphs=[], shapes=[], warnings=[])


def test_the_interval_is_the_same_every_time() -> None:
    base, new = _steps(0.5, 150, 1), _steps(0.6, 150, 2)
    assert interval(base, new) == interval(base, new)
    iv = interval(base, new)
    assert iv is not None and iv.ratio_lo < 1.2 < iv.ratio_hi and iv.steps == (150, 150)


@pytest.mark.parametrize("median_ms", [0.5, 5.0, 50.0])
def test_a_quarter_slower_is_caught_at_every_size(median_ms: float) -> None:
    """0.5, 5 and 50 ms steps, 150 steady steps each, the new loop 25% slower: a 10% limit is
    crossed (the whole interval is above +10%). No absolute floor hides the 0.5 ms step."""
    pair = _pair(_steps(median_ms, 150, 3), _steps(median_ms * 1.25, 150, 4))
    m = pair.metric("execute_ms_median")
    assert m.verdict == "worse" and m.interval is not None and m.interval.ratio_lo > 1.10
    violations = Gate.parse(max_step_time_increase="10%").check(pair)
    assert [v.threshold for v in violations] == ["--max-step-time-increase"]
    assert "95% interval" in violations[0].message


def test_the_limit_applies_to_the_interval_not_the_point() -> None:
    """25% slower against a 25% limit: the point estimate is near +25%, but the interval is not
    all above it, so the gate holds; 3x slower is above any of them."""
    base = _steps(0.5, 150, 5)
    assert not Gate.parse(max_step_time_increase="25%").check(_pair(base, _steps(0.625, 150, 6)))
    tripled = _pair(base, _steps(1.5, 150, 7))
    assert Gate.parse(max_step_time_increase="25%").check(tripled)
    assert Gate.parse(max_step_time_increase="0.5ms").check(tripled)  # +1 ms, all of it above 0.5 ms
    assert not Gate.parse(max_step_time_increase="2ms").check(tripled)


@pytest.mark.parametrize("seed", range(10))
def test_the_same_loop_twice_is_no_alarm(seed: int) -> None:
    """Two recordings of one loop, the second with more spread and more outliers (a busy
    machine): within noise, and the gate holds."""
    pair = _pair(_steps(0.5, 150, 100 + seed), _steps(0.5, 150, 200 + seed, spread=0.15))
    assert pair.metric("execute_ms_median").verdict == "same"
    assert not Gate.parse(max_step_time_increase="10%").check(pair)


def test_too_few_steps_are_said_not_passed_silently() -> None:
    short = _pair(_steps(0.5, MIN_STEPS - 1, 8), _steps(1.5, 150, 9))
    m = short.metric("execute_ms_median")
    assert m.verdict == "n/a" and m.interval is None and m.note is not None
    assert m.note.startswith("not enough steps to judge")
    gate = Gate.parse(max_step_time_increase="10%")
    assert not gate.check(short)
    [line] = gate.unjudged(short)
    assert "not enough steps to judge" in line and "--max-step-time-increase 10%" in line
    assert gate.unjudged(_pair(_steps(0.5, 150, 10), _steps(0.5, 150, 11))) == []


def test_the_command_shows_the_interval_and_says_when_it_cannot_judge(tmp_path: Path) -> None:
    """Through ``xprof compare`` with its defaults: the table and the markdown show the interval;
    a new run of 8 steps is not passed silently."""
    from tests.test_cli_report import invoke

    base = ROOT / "sample_runs" / "clean_a.json"
    full = invoke(["compare", str(base), str(ROOT / "sample_runs" / "clean_b.json"), "--max-step-time-increase", "10%"])
    assert full.exit_code == 0 and "95% CI" in full.stdout and "not checked" not in full.stderr
    md = invoke(["compare", str(base), str(ROOT / "sample_runs" / "clean_b.json"), "--markdown"])
    assert "95% CI" in md.stdout
    short = tmp_path / "short.json"
    kept = [line for line in base.read_text().splitlines()
            if json.loads(line).get("type") != "step" or json.loads(line)["i"] < 8]
    short.write_text("\n".join(line for line in kept if json.loads(line).get("type") != "end") + "\n")
    res = invoke(["compare", str(base), str(short), "--max-step-time-increase", "10%"])
    assert res.exit_code == 0, res.output
    assert "not enough steps to judge" in res.stderr and "--max-step-time-increase 10% not checked" in res.stderr
    assert "not enough steps" in res.stdout  # (the table's verdict column, or its note under the table)
