"""What xprof says of loops written apart from its fixes (issue 39's mechanisms), on their
recorded corpus runs, each refereed by torch_xla's own counters when it was written (the
figures in each loop's docstring and in docs/history.md):

- a library's read is named at its owner, with the library's own fix (not "drop the argument");
- routing tokens by value (the one-argument ``torch.where``) is a value-dependent shape at its line;
- a backward op that falls back to the CPU is named at its forward call, and the advice names
  only replacements checked to lower, saying which change the model;
- a training loop with no optimizer and no barrier (a manual SGD port) is told as a missing
  barrier in a training loop, with the line to add, not as generation.

No torch needed: the runs are read as recorded.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from xprof.analysis import analyze
from xprof.analysis.model import Analysis
from xprof.diagnosis.cause import CauseName
from xprof.report.prose import exit_lines, headline
from xprof.runfile import load_run

RUNS = Path(__file__).resolve().parent / "corpus" / "runs"


@cache
def _analysis(name: str) -> Analysis:
    return analyze(load_run(RUNS / f"{name}.json"))


def test_a_library_read_is_named_at_its_owner_with_the_librarys_own_fix() -> None:
    a = _analysis("encoder_causal_mask")
    reads = [f for f in a.findings if f.count >= 6 and "causal" in f.title.lower()]
    assert reads, [f.title for f in a.findings]
    f = reads[0]
    assert "_wrapped_call_impl" not in f.title and "_wrapped_call_impl" not in (f.via or "")
    assert "is_causal=True" in f.advice and "the same outputs" in f.advice
    assert not f.minor  # a read every step: a device round trip a step on an accelerator
    fixed = _analysis("encoder_causal_mask_fixed")
    assert not [g for g in fixed.findings if "causal" in g.title.lower()]
    assert fixed.totals.recompiles == 0


def test_routing_by_value_is_a_value_dependent_shape_at_its_line() -> None:
    a = _analysis("moe_where_routing")
    first = a.findings[0]
    assert first.cause == CauseName.DATA_DEPENDENT
    assert first.code is not None and "torch.where(expert_mask[e])" in first.code
    assert "Python number" not in first.title and "experts" in first.advice
    fixed = _analysis("moe_where_routing_fixed")  # the dense form the advice describes
    assert fixed.totals.recompiles == 0 and not fixed.findings


def test_a_backward_fallback_is_named_at_its_forward_call_with_checked_advice() -> None:
    a = _analysis("upsample_bilinear_fallback")
    f = next(f for f in a.findings if f.cause == CauseName.CPU_FALLBACK)
    assert f.code is not None and f.code.startswith("h = F.interpolate(")
    assert "upsample_bilinear2d_backward" in f.title
    # only replacements checked on torch_xla 2.9, and the ones that change the model say so
    assert "mode='nearest'" in f.advice and "change what the model computes" in f.advice


def test_training_without_an_optimizer_or_a_barrier_is_told_as_a_missing_barrier() -> None:
    a = _analysis("no_barrier_manual_sgd")
    f = a.findings[0]
    assert f.cause == CauseName.NO_BARRIER and f.kind == "no_barrier"
    assert f.code is not None and "loss.item()" in f.code
    assert f.advice.startswith("Add torch_xla.sync() at the end of each iteration")
    assert "generate(" not in f.advice
    said = " ".join(headline(a))
    assert "training steps ran" in said and "optimizer steps" not in said
    assert not any("nothing to judge" in line for line in exit_lines(a, "run.json"))


def test_a_port_without_a_barrier_stopped_by_hand_is_still_told_as_one(tmp_path: Path) -> None:
    """A device-only port is slow (each read compiles everything since the start), so people stop
    it: the file has no end record, and the recorder's no_barrier mark stands in for its counts."""
    for name in ("no_barrier_manual_sgd", "no_barrier"):
        lines = (RUNS / f"{name}.json").read_text().splitlines()
        cut = tmp_path / f"{name}.json"
        cut.write_text("\n".join(line for line in lines if '"type":"end"' not in line.replace(" ", "")) + "\n")
        run = load_run(cut)
        assert run.end is None
        a = analyze(run)
        f = a.findings[0]
        assert f.cause == CauseName.NO_BARRIER and f.kind == "no_barrier", (name, f.title)
        assert any("without its end record" in e for e in f.evidence)


def test_gradient_accumulation_compiles_each_shape_once_per_micro_batch_role() -> None:
    # accelerate with 2 micro-batches an update, a barrier per micro-batch (its loader) and
    # batches padded to their longest row: torch_xla compiled 9 graphs, a 74-node one (the
    # micro-batch that only accumulates) and a 141-node one (the one that steps the optimizer)
    # for each length, the first update's 146-node one apart. Every compile after warm-up is
    # the padding's, in the role the length was new to; nothing of the eval pass joined a
    # training graph (grad was off at a barrier whose graph is the steady 141-node one).
    a = _analysis("accelerate_accum_eval")
    assert [(f.cause, f.count) for f in a.findings] == [(CauseName.INPUT_SHAPE, 6)]
    assert a.totals.recompiles == 6
    steps = a.findings[0].evidence
    assert any("steps the optimizer with these inputs" in line for line in steps), steps


def test_a_one_off_graph_change_is_told_by_the_graph_the_step_after_went_back_to() -> None:
    # AdamW (weight_decay=1e-4) under a cosine schedule to 0: 1 - lr*wd rounds to 1.0 from step
    # 6 and lr is 0 at step 8, so two graphs with one input fewer compiled (torch_xla: 4 compiles);
    # --explain switched itself on after step 6's change and had no earlier graph to compare
    # step 8's with, but step 9 went back to a graph seen before and was compared with step 8's.
    a = _analysis("adamw_cosine_decay")
    f = a.findings[0]
    assert f.cause == CauseName.GRAPH_CHANGE and f.code == "opt.step()"
    assert "a graph input became a constant: 20 -> 19 inputs" in f.title
    assert any("step after it" in e for e in f.evidence), f.evidence
    assert "3e-4" in f.advice and "weight_decay=0.0001" in f.advice  # the floor from the run's own wd
    assert "trains a little differently" in f.advice  # the example value changes the model: said
    assert "control flow" not in f.advice
    fixed = _analysis("adamw_cosine_decay_fixed")  # the floor the advice computed: one graph, as predicted
    assert fixed.totals.recompiles == 0 and fixed.totals.compiles == 2 and not fixed.findings


def _read_finding(a: Analysis, line_text: str) -> Any:
    return next(f for f in a.findings if f.code is not None and line_text in f.code)


def test_a_rollouts_reads_in_two_styles_and_their_fixed_twins_match_the_advice() -> None:
    # PPO's shape (Categorical, action.item() and value.item() per env step) and REINFORCE's
    # (torch.multinomial, int(action), log-probs kept with grad): each read runs everything
    # pending since the barrier, one compile per env step of the first rollout; the advice's
    # fix (torch_xla.sync() right after the read) predicts one small graph, cached after the
    # first. Recorded: 12 -> 8 compiles (PPO, 6 env steps) and 11 -> 7 (REINFORCE, 10).
    for name, line, rollout in (("ppo_rollout", "action.item()", 6), ("reinforce_multinomial", "int(action)", 10)):
        a, fixed = _analysis(name), _analysis(f"{name}_fixed")
        f = _read_finding(a, line)
        assert "torch_xla.sync() right after the read" in f.advice, f.advice
        assert "micro-batch" not in f.advice and "accumulat" not in f.advice  # a rollout is not accumulation
        # one per env step, in warm-up here (said in the evidence, counted with warm-up)
        assert f"it compiled {rollout} graphs within step 0 alone" in " ".join(f.evidence), f.evidence
        g = _read_finding(fixed, line)
        assert g.compiles <= 1 and fixed.totals.recompiles == 0, (name, g.compiles)
        assert fixed.totals.compiles < a.totals.compiles, name
        assert a.totals.recompiles == 0  # its compiles are all in the first two updates: warm-up's


CHANGES_THE_MODEL = {
    # a change an advice may suggest -> words that must follow it in the same advice: what it
    # changes (or that it changes nothing)
    "drop_last=True": ("left out", "leaves", "leave"),
    "capacity": ("changes what the model computes",),
    "max_grad_norm=0": ("different training",),
    "call it less often": ("different training",),
    "keep it off 0 and 1": ("trains a little differently",),
    "eta_min": ("trains a little differently",),
    "validate_args=False": ("the same results on valid",),
    "truncation=True": ("longer than max_length",),
    "mode=": ("change what the model computes", "changes what the model computes"),
}


def test_advice_that_would_change_the_model_says_so_on_every_corpus_run() -> None:
    # The audit of issue 39 over every recorded corpus run and sample run: an advice that
    # suggests a change altering what the model computes (or sees) says so in the same advice.
    runs = sorted(RUNS.glob("*.json")) + sorted((RUNS.parents[2] / "sample_runs").glob("*.json"))
    seen = set()
    for path in runs:
        for f in _analysis_of(path).findings:
            for change, said in CHANGES_THE_MODEL.items():
                if change in f.advice:
                    seen.add(change)
                    assert any(s in f.advice for s in said), (path.name, change, f.advice)
    assert {"drop_last=True", "capacity", "eta_min", "validate_args=False"} <= seen  # the audit saw them


@cache
def _analysis_of(path: Path) -> Analysis:
    return analyze(load_run(path))
