"""Predictions that hold: what a finding says its advice leaves is what a copy of the loop
with that advice applied (its fixed twin, tests/corpus/loops/*_fixed.py) records.

Both runs are corpus runs (recorded on real torch_xla by tests/corpus/record.py, committed):
a finding's ``leaves`` (and its what-if row's ``run_recompiles``) against the twin's
recompiles after warm-up, with no torch here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xprof.analysis import Analysis, analyze
from xprof.runfile import load_run

RUNS = Path(__file__).resolve().parent / "corpus" / "runs"

TWINS = [
    # (the loop, its finding, the twin: the loop with that finding's advice applied)
    ("mask_two_lines", "dd:", "boxes_padded"),  # both mask lines rewritten, padding left
    ("token_mask_two_lines", "dd:", "token_mask_two_lines_fixed"),  # both mask lines rewritten
    ("boxes_padded", "input:gt_boxes", "boxes_padded_fixed"),  # gt_boxes and gt_labels padded to 4
    ("eval_loader_padded", "input:ids", "eval_loader_padded_fixed"),  # ids and mask padded to 15
    ("accelerate_padded", "input:input_ids", "accelerate_padded_fixed"),  # padded to max_length 21
    # a Trainer whose collate (shared with its evaluation) pads to max_length 13
    ("trainer_padded_eval", "input:input_ids", "trainer_padded_eval_fixed"),
]


def training_recompiles_of(a: Analysis) -> int:
    """Recompiles after warm-up outside eval passes, counted from the twin's compile table."""
    phase = dict(zip(a.steps["i"].tolist(), a.steps["phase"].tolist()))
    return int(sum(1 for cause, step in zip(a.compiles["cause"], a.compiles["step"])
                   if cause != "warmup" and phase[int(step)] != "eval"))


def _analysis(name: str) -> Analysis:
    return analyze(load_run(RUNS / f"{name}.json"))


@pytest.mark.parametrize(("loop", "finding", "twin"), TWINS, ids=[t[0] for t in TWINS])
def test_the_fixed_twin_recompiles_as_predicted(loop: str, finding: str, twin: str) -> None:
    found = [f for f in _analysis(loop).findings if f.id.startswith(finding)]
    assert len(found) == 1, [f.id for f in _analysis(loop).findings]
    f = found[0]
    assert f.leaves is not None
    fixed = _analysis(twin)
    assert training_recompiles_of(fixed) == f.leaves, (f.title, f.evidence)
    # (the finding's own compiles are gone from the twin)
    assert not [g for g in fixed.findings if g.id == f.id]
    if f.what_if:
        assert f.what_if[-1]["run_recompiles"] == f.leaves


def test_the_prediction_is_said_where_the_user_reads_the_finding() -> None:
    f = next(f for f in _analysis("mask_two_lines").findings if f.id.startswith("dd:"))
    assert f.evidence[-1] == "with both lines changed, training would recompile 2 times after warm-up (6 recorded)"


def test_both_mask_lines_are_one_finding_that_names_both() -> None:
    """Two lines with a value-dependent shape in the same steps feed one graph: one finding,
    every line named, and the advice says all must change."""
    for loop, lines in (("mask_two_lines", (56, 57)), ("token_mask_two_lines", (26, 27))):
        dd = [f for f in _analysis(loop).findings if f.cause == "data_dependent"]
        assert len(dd) == 1, [f.id for f in dd]
        assert [entry["line"] for entry in dd[0].lines or []] == list(lines)
        assert f":{lines[0]} and :{lines[1]}" in dd[0].title
        assert "change both" in dd[0].advice


def test_inputs_padded_together_are_named_together_and_only_those() -> None:
    boxes = next(f for f in _analysis("boxes_padded").findings if f.cause == "input_shape")
    assert boxes.inputs == ["gt_boxes", "gt_labels"]  # images never changed: not named
    assert boxes.title.startswith("gt_boxes is padded per batch (3 distinct values of dim 1: 2, 3, 4), "
                                  "and gt_labels with it:")
    text = next(f for f in _analysis("accelerate_padded").findings if f.cause == "input_shape")
    assert text.inputs == ["input_ids", "attention_mask"]  # labels [4] never changed


def test_a_training_step_ended_at_an_eval_loaders_barrier_is_not_eval_mode() -> None:
    """The loop calls model.train() after evaluating; its training steps before each eval end
    at the eval loader's first barrier (grad off there): a new length there is padding's, a
    length seen before is the cut step's graph, never 'training in eval mode'."""
    a = _analysis("eval_loader_padded")
    kinds = {f.id: f.kind for f in a.findings}
    assert "graph:eval_mode" not in kinds
    assert kinds["joined:began"] == "step_cut_by_pass"
    cut = next(f for f in a.findings if f.id == "joined:began")
    assert cut.steps == [11] and "eval_loader_padded.py:42" in cut.evidence[0]


def test_a_trainers_padding_is_paddings_and_its_evaluation_the_evaluations() -> None:
    """transformers.Trainer padding per batch and evaluating every 3 steps: every training
    compile of a new length is the padding finding's (input_ids and attention_mask together),
    the evaluation's forward graphs the evaluation's."""
    a = _analysis("trainer_padded_eval")
    by_id = {f.id: f for f in a.findings}
    pad = by_id["input:input_ids"]
    assert (pad.compiles, pad.inputs) == (4, ["input_ids", "attention_mask"])
    assert by_id["lib:hf_trainer_eval"].kind == "hf_trainer_eval"
    assert not [f for f in a.findings if f.kind in ("eval_mode_training", "graph_change")]
