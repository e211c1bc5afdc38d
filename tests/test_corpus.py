"""The corpus: every scenario loop, the corpus' own loops (written in other styles), the demo,
the Trainer runs, SPMD and the sample runs, recorded once (tests/corpus/record.py) and judged
here with no torch: what the report and the live side say of each.

- The verdicts are the recorded ones (tests/corpus/verdicts.json): a change to the diagnosis
  shows up here as a diff, and is recorded again on purpose
  (``python -m tests.corpus.verdicts --write``).
- One verdict: every live notice names a finding the report has, once. (The exit summary of
  ``watch()`` and ``xprof run`` is the analysis' own: ``exit_lines`` on the same file.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.corpus import verdicts

RUNS = verdicts.corpus()
EXPECTED = json.loads(verdicts.EXPECTED.read_text(encoding="utf-8"))


def test_the_corpus_is_all_there() -> None:
    names = {p.name for p in RUNS}
    assert names == set(EXPECTED), "record the corpus again: python -m tests.corpus.verdicts --write"
    assert len(names) >= 40


@pytest.fixture(scope="module")
def found() -> dict[str, dict[str, object]]:
    return verdicts.all_verdicts()


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_verdicts_are_the_recorded_ones(found: dict[str, dict[str, object]], path: Path) -> None:
    assert found[path.name] == EXPECTED[path.name]


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_every_live_notice_names_a_finding_of_the_report(found: dict[str, dict[str, object]], path: Path) -> None:
    v = found[path.name]
    ids = {str(f).split(" | ", 1)[0] for f in v["findings"]}  # type: ignore[attr-defined]
    said = list(v["notice_ids"])  # type: ignore[call-overload]
    assert len(said) == len(set(said)), said
    assert set(said) <= ids, (said, sorted(ids))


def test_warm_up_is_one_thing_everywhere(found: dict[str, dict[str, object]]) -> None:
    """Every compile of the first two training steps is warm-up: the exit line's count, the
    totals' and the steps table's agree on every run of the corpus."""
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    for path in RUNS:
        a = analyze(load_run(path))
        warm = a.compiles[a.compiles["cause"] == "warmup"]
        steps = a.steps.set_index("i")
        in_warmup = steps.loc[warm["step"], "user_step"] if len(warm) else []
        assert all(0 <= s < 2 for s in in_warmup), path.name
        assert a.totals.recompiles == a.totals.compiles - len(warm) or a.totals.compiles != len(a.compiles), path.name
        assert f"{a.totals.recompiles} after warm-up" in str(found[path.name]["exit"][0])  # type: ignore[index]
