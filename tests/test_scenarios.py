"""The diagnosis against ground truth: each scenario loop has one known problem (or none).

Every scenario runs once on real torch_xla (CPU) under ``xprof.watch()``; the tests
check the cause, the kind, the input name or the source line, and the counts.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from xprof.analysis import Analysis, analyze
from xprof.runfile import load_run

pytestmark = pytest.mark.xla

_CACHE: dict[str, tuple[Analysis, dict[str, int]]] = {}
_NOTICES: dict[str, Any] = {}
"""The live notices each scenario's watch() printed (``LiveNotices``)."""
SCENARIOS = ("accumulate_eval_plateau", "checkpoint", "clean_closure", "closure_argmax", "closure_nan_check",
             "compile_fn_partial", "compile_step_padding", "cpu_fallback", "dynamo_eval", "dynamo_limit",
             "dynamo_partial_batch", "eager_compiled_step", "eager_loop", "eager_padding", "eval_mode_left_on",
             "eval_pass", "every_n_steps", "item_every_step", "length_buckets", "library_checks", "mask_loss",
             "masked_select_loss", "no_barrier", "padding_collate_loader", "slice_bound", "padding_dict",
             "partial_batch", "stray_print", "tensor_condition", "two_causes")
COUNTERS = ("UncachedCompile", "CachedCompile", "ExecuteComputation", "MarkStep")


def record(name: str, device: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, dict[str, int]]:
    """Run scenario ``name`` under watch() once per session; return its analysis and the
    deltas of torch_xla's own counters over the same loop."""
    if name not in _CACHE:
        import torch_xla.debug.metrics as met

        import xprof

        mod = importlib.import_module(f"tests.scenarios.{name}")
        path = tmp_path_factory.mktemp("scenarios") / f"{name}.json"
        before = {c: met.counter_value(c) or 0 for c in COUNTERS}
        with xprof.watch(path, live=True) as w:
            mod.train(device)
        _NOTICES[name] = w.notices
        after = {c: met.counter_value(c) or 0 for c in COUNTERS}
        _CACHE[name] = (analyze(load_run(path)), {c: after[c] - before[c] for c in COUNTERS})
    return _CACHE[name]


def marker_line(name: str, kind: str) -> int:
    mod = importlib.import_module(f"tests.scenarios.{name}")
    lines = inspect.getsource(mod).splitlines()
    hits = [n for n, text in enumerate(lines, 1) if f"# expect: {kind}" in text]
    assert len(hits) == 1, f"{name} should mark one line with '# expect: {kind}'"
    return hits[0]


@pytest.fixture
def scenario(device: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return lambda name: record(name, device, tmp_path_factory)


def test_clean_loop_has_no_findings(scenario: Any) -> None:
    a, counters = scenario("clean_closure")
    assert a.findings == []
    assert a.totals.recompiles == 0
    assert a.totals.syncs == 0
    assert a.totals.deferred_reads == 10  # the step-closure reads, recorded as deferred
    assert a.totals.steps == 10
    assert a.totals.compiles == counters["UncachedCompile"]


def test_padding_to_longest_in_dict_batches(scenario: Any) -> None:
    a, counters = scenario("padding_dict")
    assert [(f.cause, f.kind, f.input) for f in a.findings] == [("input_shape", "dynamic_padding", "input_ids")]
    f = a.findings[0]
    assert f.dim == 1
    assert f.compiles == 2  # lengths 23 and 30: 12 and 17 came in warm-up (steps 0 and 1)
    assert sorted({s[1] for s in f.shapes or []}) == [12, 17, 23, 30]
    assert f.what_if is not None
    rows = {r["strategy"]: r for r in f.what_if}
    assert rows["pad_to_multiple_of=8"]["graphs"] == 3  # 16, 24, 32
    assert rows["pad_to_multiple_of=32"]["graphs"] == 1
    assert any(r["graphs"] == 1 and "max_length" in str(r["strategy"]) for r in f.what_if)
    # The run agrees with torch_xla's own counters over the same loop.
    assert a.totals.compiles == counters["UncachedCompile"] == 4
    assert a.totals.cached_compiles == counters["CachedCompile"]
    assert a.totals.barriers == counters["MarkStep"] == 12


def test_padding_in_collate_behind_mp_device_loader(scenario: Any) -> None:
    a, counters = scenario("padding_collate_loader")
    assert [(f.cause, f.kind, f.input) for f in a.findings] == [("input_shape", "dynamic_padding", "input_ids")]
    assert a.findings[0].compiles == 2  # batch maxima 9 and 11 in warm-up, then 20 and 18
    # MpDeviceLoader syncs at the start and the end of the epoch as well: 2 empty barriers.
    assert a.totals.steps == 10
    assert a.totals.barriers == 12 == counters["MarkStep"]
    assert a.totals.compiles == counters["UncachedCompile"]


def test_item_every_step(scenario: Any) -> None:
    a, _ = scenario("item_every_step")
    assert [(f.cause, f.kind) for f in a.findings] == [("implicit_sync", "item")]
    f = a.findings[0]
    assert (Path(f.file or "").name, f.line) == ("item_every_step.py", marker_line("item_every_step", "item"))
    assert f.count == 10
    assert f.pattern == "every step"
    assert a.totals.extra_executions == 10


def test_stray_print(scenario: Any) -> None:
    a, _ = scenario("stray_print")
    assert [(f.cause, f.kind) for f in a.findings] == [("implicit_sync", "print")]
    f = a.findings[0]
    assert f.line == marker_line("stray_print", "print")
    assert f.count == 1
    assert f.steps == [5]
    assert f.compiles >= 1


def test_last_partial_batch(scenario: Any) -> None:
    a, _ = scenario("partial_batch")
    assert [(f.cause, f.kind) for f in a.findings] == [("input_shape", "partial_batch")]
    f = a.findings[0]
    assert f.input == "x" and f.dim == 0  # named as `for x, y in loader:` unpacks the batch
    assert f.shapes == [[8, 8], [4, 8]]
    assert f.compiles == 1  # compiled once, cached in the next two epochs
    assert "last batch of each epoch" in (f.pattern or "")
    assert "drop_last=True" in f.advice


def test_a_slice_bound_read_from_the_device_sets_shapes(scenario: Any) -> None:
    a, counters = scenario("slice_bound")
    (f,) = [g for g in a.findings if g.compiles]
    assert (f.cause, f.kind, f.line) == ("data_dependent", "data_dependent", marker_line("slice_bound", "bound"))
    assert f.title.startswith("A tensor used as a slice bound at slice_bound.py:")
    # the bounds 24, 16 and 12 after warm-up's 20: three recompiles, each the value's
    assert f.compiles == a.totals.recompiles == 3 and counters["UncachedCompile"] >= 5
    assert f.advice.startswith("Keep shapes static: slice to the fixed padded length")
    assert not [g for g in a.findings if g.cause == "graph_change"]


def test_a_loop_without_a_step_barrier(scenario: Any) -> None:
    a, counters = scenario("no_barrier")
    f = a.findings[0]
    assert (f.cause, f.count, f.line) == ("no_barrier", 10, marker_line("no_barrier", "read"))
    assert f.title.startswith("No step barrier: 10 optimizer steps ran without one")
    # both reads compiled the whole history: their compiles are recorded and timed
    assert f.compiles == counters["UncachedCompile"] == a.totals.compiles == 2
    assert a.totals.compile_seconds > 0 and f.seconds > 0
    assert any("torch_xla.sync()" in line for _, line in _NOTICES["no_barrier"].said)


def test_reads_inside_torchs_own_library_calls(scenario: Any) -> None:
    a, _ = scenario("library_checks")
    by_line = {f.line: f for f in a.findings}
    clip, plateau = by_line[marker_line("library_checks", "clip")], by_line[marker_line("library_checks", "plateau")]
    assert (clip.kind, clip.via, clip.count) == ("library_sync", "torch_xla._patched_functions.clip_grad_norm_", 24)
    assert any(e.startswith("the library's line: _patched_functions.py:") and "error_if_nonfinite" in e
               for e in clip.evidence)
    assert "which you pass as `error_if_nonfinite=True`" in clip.advice
    assert plateau.via == "torch.optim.lr_scheduler.ReduceLROnPlateau.step"
    assert "turns a tensor into a Python number (`current = float(metrics)`)" in plateau.advice
    assert "its patience then counts fewer calls" in plateau.advice  # a scheduler: said as one
    # The first reads waited for warm-up's compiles: counted there, not in the reads' cost.
    assert any("warm-up compile" in e for e in clip.evidence)
    assert clip.compiles == 0 and clip.seconds < a.totals.compile_seconds


def test_length_buckets_read_as_settled(scenario: Any) -> None:
    a, _ = scenario("length_buckets")
    (f,) = a.findings
    # named by the tuple assignment that moved it (ids, mask, labels = ids.to(device), ...)
    assert (f.cause, f.kind, f.input, f.dim, f.compiles) == ("input_shape", "dynamic_padding", "ids", 1, 2)
    assert f.title.startswith("ids took 3 lengths of dim 1 (16, 24, 32), all by step 6, and mask with it: 2 recompiles")
    assert f.evidence[0].startswith("all 3 shapes by step 6: the 24 steps after compiled nothing")
    assert "one-off cost" in f.advice


def test_control_flow_every_n_steps(scenario: Any) -> None:
    a, _ = scenario("every_n_steps")
    assert [(f.cause, f.kind) for f in a.findings] == [("graph_change", "periodic_graph")]
    assert a.findings[0].pattern == "every 4 steps"
    assert a.findings[0].compiles == 1


def test_tensor_in_condition(scenario: Any) -> None:
    a, _ = scenario("tensor_condition")
    assert [(f.cause, f.kind) for f in a.findings] == [("implicit_sync", "tensor_condition")]
    f = a.findings[0]
    assert f.line == marker_line("tensor_condition", "tensor_condition")
    assert f.count == 10


def test_interleaved_eval_pass(scenario: Any) -> None:
    a, _ = scenario("eval_pass")
    assert [(f.cause, f.kind) for f in a.findings] == [("graph_change", "eval_pass")]
    f = a.findings[0]
    assert f.pattern == "every 4 training steps"
    assert f.severity == "info"
    # Eval barriers (grad disabled, no optimizer step) are counted apart from training steps.
    assert a.totals.steps == 12
    assert a.totals.eval_steps == 3 * 2
    assert a.totals.barriers == 12 + 3 * 2


def test_two_causes_are_two_findings(scenario: Any) -> None:
    a, _ = scenario("two_causes")
    got = sorted((f.cause, f.kind, f.input, f.line) for f in a.findings)
    assert got == sorted([
        ("input_shape", "dynamic_padding", "input_ids", None),
        ("implicit_sync", "item", None, marker_line("two_causes", "item")),
    ])
    summary = a.summary()
    assert {f["cause"] for f in summary["findings"]} == {"input_shape", "implicit_sync"}
    assert all(f["seconds"] > 0 for f in summary["findings"])


def test_cpu_fallback_op(scenario: Any) -> None:
    a, _ = scenario("cpu_fallback")
    # Nothing compiles after warm-up, but every step's graph is cut at the op (the graph
    # before it runs early so its input can go to the host): wanted, though not timed.
    assert [(f.cause, f.kind) for f in a.findings] == [("cpu_fallback", "graph_cut")]
    f = a.findings[0]
    assert "aten::histc" in f.title and f.count == 8 and f.pattern == "every step"
    assert f.title.endswith("each step cut at it (1 graph run early a step)") and not f.minor
    assert any(e.startswith("6 graphs ran before the barrier, outside any host read, in the 6 steps after warm-up")
               for e in f.evidence)
    assert a.totals.fallback_ops == {"aten::histc": 8}
    assert [key for key, _ in _NOTICES["cpu_fallback"].said] == [f.id]


def test_infrequent_checkpoint_is_info(scenario: Any) -> None:
    a, _ = scenario("checkpoint")
    assert [(f.cause, f.kind, f.severity) for f in a.findings] == [("implicit_sync", "checkpoint", "info")]
    f = a.findings[0]
    assert f.line == marker_line("checkpoint", "checkpoint")
    assert f.via == "torch.serialization.save"
    assert f.pattern == "every 5 steps"
    assert "expected" in f.title


# -- the live notices say what the report says --------------------------------------------

@pytest.mark.parametrize("name", SCENARIOS)
def test_live_notices_agree_with_the_analysis(scenario: Any, name: str) -> None:
    """Every notice printed while the loop ran names a finding (its id) that the analysis of
    the finished run also has, once; a loop with a problem after warm-up says so while it runs."""
    a, _ = scenario(name)
    notices = _NOTICES[name]
    keys = [key for key, _ in notices.said]
    assert len(keys) == len(set(keys)), f"a finding was noticed twice: {notices.said}"
    ids = {f.id for f in a.findings}
    assert set(keys) <= ids, (notices.said, sorted(ids))
    problems = [f for f in a.findings if f.severity != "info"]
    if any(f.cause in ("input_shape", "cpu_fallback") or f.kind in ("item", "tensor_condition")
           for f in problems):
        assert notices.said, f"{name}: no live notice for {[f.title for f in problems]}"


# -- eager mode: ops compiled and run one by one, the barrier left with nothing to run ----

def test_eager_mode_loop_is_found_running_op_by_op(scenario: Any) -> None:
    a, counters = scenario("eager_loop")
    assert [(f.cause, f.kind) for f in a.findings] == [("eager_mode", "eager_mode")]
    f = a.findings[0]
    assert f.steps == list(range(2, 10)) and not f.minor
    assert a.totals.steps == 10 and a.totals.recompiles == 0
    # every op's compile is timed (EagerOpCompileTime), at "op", none at a barrier
    assert len(a.compiles) == a.totals.compiles == counters["UncachedCompile"] > 0
    assert set(a.compiles["at"]) == {"op"} and a.totals.compile_seconds > 0
    # the graphs ran between barriers, none at them: torch_xla's own counters over the loop
    steps = a.steps
    assert int(steps["mid_graphs"].sum()) == counters["UncachedCompile"] + counters["CachedCompile"]
    assert int((steps["barrier_uncached"] + steps["barrier_cached"]).sum()) == 0
    assert f"{int(steps['mid_graphs'].iloc[-1])} graphs a step" in f.title
    # the inputs moved in each step are that step's, though its barrier ran nothing
    assert steps["sig"].notna().all() and a.inputs["shape"].map(tuple).tolist() == [(8, 8), (8, 1)]
    assert a.totals.execute_ms_median is None  # not recorded for ops run one by one, not 0
    notices = _NOTICES["eager_loop"]
    assert [key for key, _ in notices.said] == [f.id]
    assert "step 2 ran op by op" in notices.said[0][1]


def test_eager_mode_with_a_compiled_step_is_a_clean_loop(scenario: Any) -> None:
    """The step compiled with torch_xla.compile runs as one graph; the closure's isnan runs
    eagerly after a barrier, and is the closure's, not a graph of the next step."""
    a, _ = scenario("eager_compiled_step")
    assert a.findings == []
    assert a.totals.steps == 10 and a.totals.recompiles == 0
    steps = a.steps
    graph = steps[steps["barrier"] == "compile"]
    assert int(graph["mid_graphs"].sum()) == 0  # (the moves before each call ran eagerly: not the step's)
    # every step's inputs are its compiled graph's, not taken by the entry sync's eager ops
    assert len(graph) == 10 and graph["sig"].notna().all() and steps["sig"].notna().sum() == 10
    assert (graph["ordinal"].tolist() == list(range(10)))
    assert a.totals.deferred_reads == 3


def test_padding_in_eager_mode_is_blamed_on_the_input(scenario: Any) -> None:
    """A new length compiles the ops it reaches again, mid-step and one by one: the same
    padding finding as a lazy loop's, then the eager mode itself."""
    a, counters = scenario("eager_padding")
    assert [(f.cause, f.kind, f.input) for f in a.findings] == [
        ("input_shape", "dynamic_padding", "input_ids"), ("eager_mode", "eager_mode", None)]
    f = a.findings[0]
    assert sorted({s[1] for s in f.shapes or []}) == [12, 17, 23, 30]
    assert f.steps == [3, 5]  # lengths 23, 30: the first time each is seen after warm-up (12, 17)
    assert f.compiles == a.totals.recompiles == int((a.compiles["step"] >= 2).sum())
    assert f.compiles == counters["UncachedCompile"] - int((a.compiles["step"] < 2).sum())
    notices = _NOTICES["eager_padding"]
    assert "input:input_ids" in [key for key, _ in notices.said]


# -- issue 11: the step the user knows, one right cause for every compile ----------------

def _by_cause(a: Analysis) -> list[tuple[str, str]]:
    return [(f.cause, f.kind) for f in a.findings]


def test_item_every_step_recompiles_nothing_after_warm_up(scenario: Any) -> None:
    a, counters = scenario("item_every_step")
    # The .item() graph compiles in the first two steps (warm-up covers host reads too).
    assert a.totals.recompiles == 0
    assert a.totals.compiles == counters["UncachedCompile"] == 2
    assert a.findings[0].compiles == 0


def test_compile_decorated_step_padded_inputs(scenario: Any) -> None:
    a, counters = scenario("compile_step_padding")
    s = a.summary()
    # One step per call; torch_xla.compile's entry and exit syncs are barriers, not steps.
    assert (s["steps"], s["barriers"]) == (8, 16) and counters["MarkStep"] == 16
    assert [(f["cause"], f["kind"], f["input"], f["dim"]) for f in s["findings"]] == [
        ("input_shape", "dynamic_padding", "input_ids", 1)]
    f = s["findings"][0]
    assert f["compiles"] == s["recompiles"] == 2  # lengths 12 and 5 after warm-up's 7 and 9
    assert f["steps"] == [3, 7]  # training steps, not barrier indices
    assert s["compiles"] == counters["UncachedCompile"]


def test_compile_fn_inputs_named_by_parameter(scenario: Any) -> None:
    a, counters = scenario("compile_fn_partial")
    s = a.summary()
    assert (s["steps"], s["barriers"]) == (12, 24)
    assert [(f["cause"], f["kind"], f["input"]) for f in s["findings"]] == [
        ("input_shape", "partial_batch", "features")]
    assert s["findings"][0]["shapes"] == [[8, 8], [5, 8]]
    assert s["compiles"] == counters["UncachedCompile"] == 2


@pytest.mark.parametrize("name,marker,op", [("mask_loss", "mask", "Boolean-mask indexing"),
                                            ("masked_select_loss", "masked_select", "masked_select()")])
def test_data_dependent_shapes(scenario: Any, name: str, marker: str, op: str) -> None:
    a, counters = scenario(name)
    s = a.summary()
    assert s["steps"] == 8
    assert {f["cause"] for f in s["findings"]} == {"data_dependent"}  # no graph_change, no fallback
    f = next(f for f in s["findings"] if not f["minor"])
    assert (f["kind"], f["line"]) == ("data_dependent", marker_line(name, marker))
    assert f["title"].startswith(op)
    assert "ignore_index" in f["advice"] and "torch.where" in f["advice"]
    # Every recompile after warm-up is this line's: the inputs never change shape.
    assert f["compiles"] == s["recompiles"] >= 3
    assert s["compiles"] == counters["UncachedCompile"]
    assert s["extra_executions"] == counters["ExecuteComputation"] - counters["MarkStep"] > 0
    assert "No implicit host read" not in " ".join(s["notes"])


@pytest.mark.parametrize("name", ["closure_nan_check", "closure_argmax"])
def test_step_closure_compile_is_a_deferred_note(scenario: Any, name: str) -> None:
    a, counters = scenario(name)
    s = a.summary()
    assert s["steps"] == 12 and s["syncs"] == 0
    assert [(f["cause"], f["kind"], f["severity"], f["line"]) for f in s["findings"]] == [
        ("step_closure", "deferred_read", "info", marker_line(name, "closure"))]
    assert s["findings"][0]["compiles"] == s["recompiles"] == 1
    assert s["compiles"] == counters["UncachedCompile"]


def test_torch_compile_partial_batch(scenario: Any) -> None:
    a, _ = scenario("dynamo_partial_batch")
    s = a.summary()
    # dynamo's own syncs are barriers, not steps; 2 epochs of 6 batches.
    assert s["steps"] == 12 and s["barriers"] > 12
    assert [(f["cause"], f["kind"]) for f in s["findings"] if not f["minor"]] == [("dynamo", "dynamo_recompile")]
    f = s["findings"][0]
    assert f["compiles"] == s["recompiles"]
    # The guard that failed, as torch._dynamo recorded it: the batch size 8 -> 3 of the
    # compiled module's first argument (called positionally: dynamo names it args[0]).
    assert (f["input"], f["dim"]) == ("args[0]", 0) and "args[0] dim 0 took 2 sizes: 8, 3" in f["title"]
    assert any("size mismatch at index 0. expected 8, actual 3" in e for e in f["evidence"])
    assert "drop_last=True" in f["advice"] and "mark_dynamic does not help on XLA" in f["advice"]
    assert not any(f["cause"] == "unknown" for f in s["findings"])
    # torch.compile's own reads while tracing are not the user's host reads.
    assert not any(f["cause"] == "implicit_sync" for f in s["findings"])


@pytest.mark.parametrize("name", SCENARIOS)
def test_columnar_reader_gives_the_same_analysis(scenario: Any, name: str) -> None:
    """Every scenario's run read by DuckDB into columns analyses exactly as the record reader's."""
    from tests.test_columns import assert_same_analysis, assert_same_run
    from xprof.runcolumns import load_columns

    a, _ = scenario(name)
    cols = load_columns(a.run.path, engine="duckdb")
    assert_same_run(cols, load_run(a.run.path))
    assert_same_analysis(analyze(cols), a)


def test_dynamo_giving_up_at_its_recompile_limit_is_said(scenario: Any) -> None:
    """torch.compile stops compiling the module at dynamo's recompile limit: the dynamo
    finding says where, the sizes after it compile at the barrier as x's own shape finding,
    and mark_dynamic (which does not spare XLA a compile per size) is not advised."""
    a, counters = scenario("dynamo_limit")
    s = a.summary()
    dyn = [f for f in s["findings"] if f["cause"] == "dynamo"]
    assert len(dyn) == 1
    f = dyn[0]
    assert f["title"].endswith("then it gave up on the compiled module's forward at step 4 and runs it uncompiled")
    limit = [e for e in f["evidence"] if "hit config.recompile_limit (2)" in e]
    assert len(limit) == 1 and "runs as plain lazy tensor ops" in limit[0]
    assert "(4 compiles after step 4, counted in the other findings)" in limit[0]
    assert "recompile_limit only postpones this" in f["advice"] and "does not help on XLA" in f["advice"]
    # the sizes after the limit: the inputs of the tuple assignment are x and y by name
    shape = [f for f in s["findings"] if f["cause"] == "input_shape"]
    assert len(shape) == 1 and shape[0]["input"] == "x" and shape[0]["compiles"] == 4  # sizes 6-9
    assert not any(f["cause"] == "unknown" for f in s["findings"])
    assert a.totals.compiles == counters["UncachedCompile"]
    said = [line for key, line in _NOTICES["dynamo_limit"].said if key == "dynamo"]
    assert said == ["xprof: step 4: torch.compile gave up on the compiled module's forward at its recompile limit "
                    "(torch._dynamo.config.recompile_limit = 2): it runs uncompiled from now on, and XLA compiles "
                    "a graph for each new shape"]


def test_training_left_in_eval_mode_is_named(scenario: Any) -> None:
    a, counters = scenario("eval_mode_left_on")
    train = [f for f in a.findings if f.cause == "graph_change" and f.kind != "eval_pass"]
    assert [(f.kind, f.compiles) for f in train] == [("eval_mode_training", 1)]
    assert train[0].title.startswith("5 training steps from step 5 ran with the model in eval mode")  # 5-9
    assert "model.train()" in train[0].advice
    assert a.totals.compiles == counters["UncachedCompile"]
    said = [line for key, line in _NOTICES["eval_mode_left_on"].said if key == train[0].id]
    assert len(said) == 1 and "it trains with the model in eval mode" in said[0]


def test_dynamo_grad_mode_retrace_is_a_one_off(scenario: Any) -> None:
    a, _ = scenario("dynamo_eval")
    s = a.summary()
    assert (s["steps"], s["eval_passes"]) == (12, 3)
    dyn = [f for f in s["findings"] if f["cause"] == "dynamo"]
    assert len(dyn) == 1
    # torch._dynamo's own words for the failed guard: grad mode, not a size.
    assert any("grad_mode" in e for e in dyn[0]["evidence"])
    assert dyn[0]["severity"] == "info" and "mark_dynamic" not in dyn[0]["advice"]
    assert not any(f["cause"] in ("unknown", "implicit_sync", "input_shape") for f in s["findings"])
    ev = [f for f in s["findings"] if f["kind"] == "eval_pass"]
    assert len(ev) == 1 and ev[0]["pattern"] == "every 4 training steps"
    assert "wrap it in torch.no_grad()" not in ev[0]["advice"]  # the pass already runs under it


def test_accumulation_eval_and_a_scheduler_read(scenario: Any) -> None:
    a, counters = scenario("accumulate_eval_plateau")
    s = a.summary()
    # 3 epochs x 3 optimizer steps; each epoch's eval pass is 3 batches.
    assert (s["steps"], s["eval_steps"], s["eval_passes"]) == (9, 9, 3)
    assert s["barriers"] == 3 * (12 + 3)
    ev = next(f for f in s["findings"] if f["kind"] == "eval_pass")
    assert ev["pattern"] == "every 3 training steps"
    assert ev["steps"] == [2]  # the first pass compiles both of its shapes (16 and 8 rows), after step 2
    # its forwards run under no_grad, though their barriers do not: no advice to add it
    assert "wrap it in torch.no_grad()" not in ev["advice"] and "under no_grad" in ev["advice"]
    evals = a.steps[a.steps["phase"] == "eval"]
    assert evals["grad_off"].all() and not evals["nograd"].any()
    read = next(f for f in s["findings"] if f["line"] == marker_line("accumulate_eval_plateau", "plateau"))
    assert (read["cause"], read["kind"]) == ("implicit_sync", "library_sync")
    assert "ReduceLROnPlateau.step" in read["title"]
    assert read["count"] == 2  # one per eval; the last epoch's comes after the last barrier (a note)
    # Every recompile is the eval pass's or the scheduler read's (its own graph and the
    # training graph it changed); none is put on the micro-batch graphs.
    assert ev["compiles"] + read["compiles"] == s["recompiles"]
    assert not any(f["cause"] in ("unknown", "graph_change") and f["kind"] != "eval_pass" for f in s["findings"])
    assert a.totals.compiles == counters["UncachedCompile"]
