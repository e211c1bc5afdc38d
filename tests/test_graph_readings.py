"""What a graph diff is read as, on exact records: a claim about what changed must agree with
the graph itself (fewer inputs and new constants: an input became a constant, not ops that
control flow added), and the advice at an optimizer step computes its example from the run's
own weight decay."""

from __future__ import annotations

from xprof.analysis.findings.explained import ROUNDS_TO_ONE, _input_to_constant, _reversed, decay_advice
from xprof.runfile import GraphChange, GraphLine

LOSS = GraphLine("/u/train.py", 27, "train", "loss = mse(model(x), y)", "3 ops added", "added", "multiply", 3)
STEP = GraphLine("/u/train.py", 29, "train", "opt.step()", "20 ops added", "added", "constant", 20)


def _graph(i: int, inputs: int, base: int | None, lines: tuple[GraphLine, ...]) -> GraphChange:
    return GraphChange(i, "barrier", f"h{i}", 180, inputs, base, lines, 0, 0, 0, sum(c.ops for c in lines))


def test_fewer_inputs_and_new_constants_read_as_an_input_become_a_constant() -> None:
    base, new = _graph(7, 20, None, ()), _graph(8, 19, 7, (LOSS, STEP))
    inputs_at = {(g.i, g.at): g.inputs for g in (base, new)}
    found = _input_to_constant([new], inputs_at)
    assert found is not None
    line, said, how = found
    assert line == STEP  # where the constants appear, not the first line that changed
    assert said == "a graph input became a constant: 20 -> 19 inputs" and how == ""


def test_a_graph_with_nothing_before_it_is_read_from_the_next_steps_comparison_reversed() -> None:
    # Step 8's graph was the first --explain hashed; step 9 went back to a graph seen before
    # (no compile) and was compared with step 8's: 8 multiplies and an input more there.
    more = GraphLine("/u/train.py", 29, "train", "opt.step()", "8 ops added", "added", "multiply", 8)
    first, after = _graph(8, 19, None, ()), _graph(9, 20, 8, (more,))
    got = _reversed(after, 8, 19)
    assert got is not None and got.compared_after and (got.i, got.base, got.inputs) == (8, 9, 19)
    assert [(c.kind, c.what) for c in got.lines] == [("removed", "8 ops removed")]
    found = _input_to_constant([got], {(g.i, g.at): g.inputs for g in (first, after)})
    assert found is not None and found[0].line == 29 and "20 -> 19 inputs" in found[1] and "step after" in found[2]
    assert _reversed(_graph(9, 20, 8, (LOSS._replace(kind="bound", what="slice 4 -> 8"),)), 8, 19) is None


def test_the_same_inputs_with_added_ops_are_not_a_constant() -> None:
    base, new = _graph(7, 20, None, ()), _graph(8, 20, 7, (LOSS, STEP))
    assert _input_to_constant([new], {(g.i, g.at): g.inputs for g in (base, new)}) is None
    fewer_no_constant = _graph(9, 19, 7, (LOSS,))
    assert _input_to_constant([fewer_no_constant], {(7, "barrier"): 20, (9, "barrier"): 19}) is None


def test_the_learning_rate_floor_comes_from_the_runs_weight_decay() -> None:
    said = decay_advice(({"cls": "AdamW", "groups": [{"lr": 1e-3, "weight_decay": 1e-4}]},), STEP)
    assert said is not None
    assert "AdamW's weight_decay=0.0001" in said and "falls under 3e-4" in said  # 2**-25 / 1e-4
    assert abs(ROUNDS_TO_ONE / 1e-4 - 2.98e-4) < 1e-6
    assert "trains a little differently" in said  # the change to training is said
    wide = decay_advice(({"cls": "AdamW", "groups": [{"lr": 1e-3, "weight_decay": 0.01}]},), STEP)
    assert wide is not None and "falls under 3e-6" in wide
    assert decay_advice(({"cls": "SGD", "groups": [{"lr": 0.1, "weight_decay": 0}]},), STEP) is None
    assert decay_advice((), STEP) is None


def test_a_transformers_moe_layer_gets_the_librarys_own_checked_option() -> None:
    # HF Mixtral's "eager" experts find each expert's tokens with nonzero()/torch.where(mask);
    # the library's experts_implementation="batched_mm" runs on torch_xla with fixed shapes.
    from xprof.analysis.findings.library import library_advice
    from xprof.runfile import Site

    moe = Site(3, "nonzero", "/u/train.py", 17, "<module>", "transformers.models.mixtral.modeling_mixtral."
               "MixtralForCausalLM.forward", "out = model(input_ids=ids, labels=ids)",
               "transformers.models.mixtral.modeling_mixtral.MixtralExperts.forward")
    said = library_advice(moe.via or "", "train.py:17", moe.code, moe, "runs an op on the CPU")
    assert 'experts_implementation="batched_mm"' in said and "the same outputs" in said
    other = moe._replace(inner="transformers.masking_utils._ignore_causal_mask_sdpa")
    assert "batched_mm" not in library_advice(other.via or "", "train.py:17", other.code, other, "reads")


def test_the_causal_mask_check_is_named_at_the_module_the_user_called_with_its_own_flag() -> None:
    # nn.Transformer(src, tgt, tgt_mask=causal): the decoder checks tgt_mask every forward;
    # tgt_is_causal=True skips it (checked on torch_xla 2.9: 12 -> 6 executions in 6 steps, the
    # same loss). nn.TransformerEncoder(x, mask=causal) keeps its own flag, is_causal=True.
    from xprof.diagnosis.mechanisms import mechanism
    from xprof.runfile import Site

    check = "torch.nn.modules.transformer._detect_is_causal_mask"
    seq2seq = Site(0, "bool", "/u/train.py", 19, "<module>", "torch.nn.modules.transformer.Transformer.forward",
                   "out = model(src, tgt, tgt_mask=tgt_mask)", check)
    m = mechanism(seq2seq)
    assert m is not None and m.what == "nn.Transformer's causal-mask check" and "tgt_is_causal=True" in m.advice
    encoder = seq2seq._replace(via="torch.nn.modules.transformer.TransformerEncoder.forward")
    e = mechanism(encoder)
    assert e is not None and e.what == "nn.TransformerEncoder's causal-mask check" and "is_causal=True" in e.advice
    assert "tgt_is_causal" not in e.advice
