"""The ``split_step`` rule (xprof/diagnosis/rules/split.py): a training step cut by more than one
barrier that ran a graph. Its evidence on exact records, its finding in the analysis, and the
two corpus loops that do it (tests/corpus/loops/split_step*.py)."""

from __future__ import annotations

from pathlib import Path

from tests.test_analysis_unit import Builder
from xprof.analysis import analyze
from xprof.diagnosis.rules.split import Barrier, split_steps
from xprof.runfile import load_run

CORPUS = Path(__file__).resolve().parent / "corpus" / "runs"


def _steps(n: int, cut: bool, inputs_last: bool = False) -> list[Barrier]:
    out = []
    for k in range(n):
        compiled = int(k < 2)
        if cut:
            out.append(Barrier(k, 7, True, 1, compiled))
        out.append(Barrier(k, 9, inputs_last or not cut, 1, compiled))
    return out


def test_a_step_cut_in_two_in_every_steady_step_is_split() -> None:
    found = split_steps(_steps(10, cut=True), 2)
    assert found is not None
    assert (found.graphs, found.cut_sites, found.steps, found.steady) == (2, (7,), list(range(2, 10)), 8)
    assert found.extra_executions == 8 and found.warmup_compiles == 2


def test_one_barrier_a_step_a_window_of_micro_batches_and_a_short_run_are_not() -> None:
    assert split_steps(_steps(10, cut=False), 2) is None
    # every barrier took its own inputs: micro-batches of one update, not a cut step
    assert split_steps(_steps(10, cut=True, inputs_last=True), 2) is None
    assert split_steps(_steps(4, cut=True), 2) is None  # 2 steady steps: no pattern yet


def test_split_in_a_few_steps_only_is_not_a_pattern() -> None:
    barriers = _steps(10, cut=False) + [Barrier(5, 7, True, 1, 0)]
    barriers.sort(key=lambda b: (b.step, b.site != 7))
    assert split_steps(barriers, 2) is None


def test_the_analysis_says_it_as_information_with_the_cutting_line(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for k in range(8):
        b.step({"x": [4, 8]}, compile_ms=300 if k == 0 else 0, nodes=40, fields={"bw": 1},
               barrier_site={"id": 5, "line": 24, "code": "torch_xla.sync()", "via": None})
        b.step(None, compile_ms=200 if k == 0 else 0, nodes=30, opt=1,
               barrier_site={"id": 6, "line": 27, "code": "torch_xla.sync()", "via": None})
    a = b.done()
    split = [f for f in a.findings if f.cause == "split_step"]
    assert len(split) == 1 and split[0].severity == "info" and split[0].line == 24
    assert split[0].title == ("Each training step runs 2 graphs, cut by the barrier at train.py:24: "
                              "6 extra executions in 6 steps")
    assert "drop the barrier inside the step" in split[0].advice
    assert a.totals.recompiles == 0  # (the cut-off part's graph compiled in warm-up)


def test_the_corpus_loops_that_cut_their_steps_are_found() -> None:
    for name, line in (("split_step", 24), ("split_step_grad_clip", 27)):
        a = analyze(load_run(CORPUS / f"{name}.json"))
        split = [f for f in a.findings if f.cause == "split_step"]
        assert len(split) == 1 and split[0].line == line, (name, [f.title for f in a.findings])
        assert "runs 2 graphs" in split[0].title
