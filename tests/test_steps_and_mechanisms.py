"""Fast unit tests on exact data (no torch needed): which barriers are
training steps, counters that go down, sites grouped by library mechanism."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from xprof.analysis import analyze
from xprof.analysis import steps as steps_mod
from xprof.diagnosis.mechanisms import group_key, mechanism
from xprof.recorder.metrics import delta, increase
from xprof.runfile import RunWriter, Site, load_run


def _table(rows: list[tuple[str, bool, int, bool]]) -> pd.DataFrame:
    """(barrier kind, ran a graph, optimizer steps, grad off) per barrier."""
    return pd.DataFrame({
        "barrier": [r[0] for r in rows], "work": [r[1] for r in rows],
        "opt": [r[2] for r in rows], "nograd": [r[3] for r in rows],
    })


def test_a_barrier_belongs_to_the_step_whose_optimizer_step_precedes_it() -> None:
    df = _table([
        ("loader", True, 0, False),      # graphs before the first optimizer step: step 0
        ("loader", True, 1, False),      # closes step 0
        ("mark_step", True, 1, False),   # closes step 1
        ("sync", True, 0, False),        # logging after step 1: still step 1
        ("sync", False, 0, False),       # empty
        ("mark_step", True, 0, True),    # eval: grad off, no optimizer step
        ("dynamo", True, 0, True),       # torch.compile's own sync
        ("loader", True, 1, False),      # closes step 2
    ])
    steps_mod.assign(df)
    assert df["phase"].tolist() == ["train", "train", "train", "train", "empty", "eval", "dynamo", "train"]
    assert df["ordinal"].tolist() == [0, 0, 1, 1, -1, -1, -1, 2]
    assert df["user_step"].tolist() == [0, 0, 1, 1, 1, 1, 1, 2]
    assert steps_mod.training_steps(df) == 3 and steps_mod.eval_steps(df) == 1


def test_without_an_optimizer_every_barrier_that_ran_a_graph_is_a_step() -> None:
    df = _table([("sync", True, 0, True), ("sync", False, 0, True), ("sync", True, 0, True),
                 ("dynamo", True, 0, True)])
    steps_mod.assign(df)
    assert df["ordinal"].tolist() == [0, -1, 1, -1]
    assert steps_mod.training_steps(df) == 2 and steps_mod.eval_steps(df) == 0


def test_a_counter_that_went_down_was_reset() -> None:
    assert increase(7, 5) == 2
    assert increase(3, 40) == 3  # dynamo's bridge cleared the counters: count from 0
    assert delta({"UncachedCompile": 2, "MarkStep": 50}, {"UncachedCompile": 9, "MarkStep": 49}) == {
        "UncachedCompile": 2, "MarkStep": 1}


def _site(sid: int, access: str, via: str | None, inner: str | None = None, chain: tuple[str, ...] = (),
          line: int = 10) -> Site:
    return Site(sid, access, "/u/train.py", line, "main", via, "trainer.train()", inner, chain)


def test_sites_group_by_mechanism() -> None:
    log_chain = ("transformers.trainer_pt_utils.nested_xla_mesh_reduce",
                 "transformers.trainer.Trainer._maybe_log_save_evaluate", "transformers.trainer.Trainer.train")
    a = _site(1, "item", "transformers.trainer.Trainer.train", log_chain[0], log_chain)
    b = _site(2, "cpu", "transformers.trainer.Trainer.train", log_chain[1], log_chain[1:])
    assert mechanism(a) is not None and mechanism(a) == mechanism(b)
    assert group_key(1, a) == group_key(2, b) == "lib:hf_trainer_logging"
    # An unknown library: the call at that line, or, when the training loop runs inside it
    # (its line asked for step barriers), its own innermost function; a plain read: its site.
    other = _site(3, "item", "somelib.fit", "somelib.metrics.mean")
    assert group_key(3, other) == "lib:somelib.fit@/u/train.py:10"
    assert group_key(3, other, frozenset({("/u/train.py", 10)})) == "lib:somelib.metrics.mean@/u/train.py:10"
    assert group_key(4, _site(4, "item", None)) == "sync:4"
    # Two value-dependent ops on one line are one finding; torch.compile's reads are dynamo's.
    assert group_key(5, _site(5, "mask_index", None)) == group_key(6, _site(6, "unique", None))
    assert group_key(7, _site(7, "repr", "torch._dynamo.eval_frame.OptimizedModule.__call__")) == "dynamo"


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    w = RunWriter(path, {"name": "u", "started_unix": 1000.0, "meta": {}})
    for r in records:
        w.write(r)
    w.write({"type": "end", "t": 1010.0, "status": "ok", "steps": 0, "syncs": 0, "errors": 0})
    w.close()


def _steps(n: int, t: float = 1000.0, **extra: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        rec = {"type": "step", "i": i, "t0": t + i, "tb": t + i + 0.5, "t1": t + i + 0.9, "barrier": "mark_step",
               "c": {"MarkStep": 1, "ExecuteComputation": 1, "CachedCompile": 1}, "bc": 1}
        rec.update({k: v(i) if callable(v) else v for k, v in extra.items()})
        out.append(rec)
    return out


def test_old_files_without_optimizer_evidence_still_read(tmp_path: Path) -> None:
    _write(tmp_path / "old.json", _steps(5))
    run = load_run(tmp_path / "old.json")
    assert [(s.opt, s.nograd, s.dynamo_graphs, s.site) for s in run.steps] == [(0, False, 0, None)] * 5
    assert analyze(run).totals.steps == 5


def test_eval_barriers_are_counted_apart(tmp_path: Path) -> None:
    # Training steps with an optimizer step each; every 3rd barrier is an eval (grad off).
    recs = _steps(9, o=lambda i: 0 if i % 3 == 2 else 1, ng=lambda i: 1 if i % 3 == 2 else 0)
    for r in recs:
        if not r["o"]:
            del r["o"]
        if not r["ng"]:
            del r["ng"]
    _write(tmp_path / "r.json", recs)
    t = analyze(load_run(tmp_path / "r.json")).totals
    assert (t.steps, t.eval_steps, t.barriers) == (6, 3, 9)


def test_a_barriers_own_execution_is_not_the_next_reads() -> None:
    # Barrier 0 (t 10.0) launched its graph asynchronously; it started at 10.5, inside the
    # window of a read early in the next step (10.4-11.0), which then ran its own graph at
    # 10.8. Barrier 1 (t 12.0) ran nothing. Only the 10.8 execution is the read's.
    import numpy as np

    from xprof.analysis.tables import sync_executions

    ms = 1_000_000  # ns
    executions = np.asarray([(10.5 + 0.2, 200 * ms), (10.8 + 0.01, 10 * ms)])
    syncs = pd.DataFrame({"t0": [10.4], "t1": [11.0]})
    steps = pd.DataFrame({"tb": [10.0, 12.0], "work": [True, False]})
    exec_ms, n = sync_executions(executions, syncs, steps)
    assert n.tolist() == [1]
    assert abs(float(exec_ms[0]) - 10.0) < 1e-6
    # Without the barriers, both executions fall in the read's window.
    assert sync_executions(executions, syncs)[1].tolist() == [2]


def _phase_table(rows: list[tuple[int, bool, bool, int]]) -> pd.DataFrame:
    """(optimizer steps, grad off, model in eval mode, backward passes) per barrier that ran a graph."""
    return pd.DataFrame({
        "barrier": ["mark_step"] * len(rows), "work": [True] * len(rows),
        "opt": [r[0] for r in rows], "nograd": [r[1] for r in rows],
        "eval_mode": [r[2] for r in rows], "backward": [r[3] for r in rows],
    })


def test_eval_mode_marks_eval_barriers_a_backward_pass_keeps_training() -> None:
    df = _phase_table([
        (1, False, False, 1),   # a training step
        (0, False, True, 0),    # the HF Trainer's eval barrier: grad on, but model.eval()
        (0, False, True, 0),
        (1, False, False, 1),   # model.train() again
        (0, False, True, 1),    # gradient accumulation with dropout off (model.eval()): training,
        (1, False, True, 1),    # a micro-batch of the update after it
        (0, False, False, 0),   # the Trainer's logging after a step: training, not eval
    ])
    steps_mod.assign(df)
    assert df["phase"].tolist() == ["train", "eval", "eval", "train", "train", "train", "train"]
    assert df["ordinal"].tolist() == [0, -1, -1, 1, 2, 2, 2]
    assert steps_mod.eval_steps(df) == 2 and steps_mod.eval_passes(df) == 1


def test_micro_batches_belong_to_the_update_their_gradients_feed() -> None:
    # A barrier per micro-batch, 4 a step: the optimizer step's barrier closes each window.
    # A logging barrier after an update (no backward) stays with it; the micro-batches of
    # a last window that never reached its optimizer step stay with the last step.
    window = [(0, False, False, 1)] * 3 + [(1, False, False, 1)]
    df = _phase_table(window + window + [(0, False, False, 0)] + window + [(0, False, False, 1)] * 2)
    steps_mod.assign(df)
    assert df["ordinal"].tolist() == [0] * 4 + [1] * 4 + [1] + [2] * 4 + [2, 2]
    assert steps_mod.training_steps(df) == 3


def test_eval_passes_count_runs_of_eval_barriers() -> None:
    df = pd.DataFrame({"phase": ["train", "eval", "empty", "eval", "train", "eval", "train", "empty"]})
    assert steps_mod.eval_passes(df) == 2


def test_an_eval_pass_driven_by_the_trainer_owns_its_compiles(tmp_path: Path) -> None:
    # 4 training steps; after step 2 an eval pass (model.eval(), grad on at its barriers) whose
    # loader barrier goes through Trainer.evaluation_loop, and which compiles a forward graph
    # for a batch shape training never had. Then training goes on with a new length.
    eval_chain = ["transformers.trainer.Trainer.evaluation_loop", "transformers.trainer.Trainer.evaluate",
                  "transformers.trainer.Trainer.train"]
    recs: list[dict[str, Any]] = [
        {"type": "site", "id": 0, "kind": "barrier", "file": "/u/t.py", "line": 9, "func": "main",
         "via": "transformers.trainer.Trainer.train", "code": "trainer.train()",
         "inner": eval_chain[0], "chain": eval_chain},
        {"type": "sig", "id": 0, "inputs": [{"name": "input_ids", "shape": [4, 8], "dtype": "int64",
                                                "src": "loader"}]},
        {"type": "sig", "id": 1, "inputs": [{"name": "input_ids", "shape": [4, 5], "dtype": "int64",
                                                "src": "loader"}]},
        {"type": "sig", "id": 2, "inputs": [{"name": "input_ids", "shape": [4, 12], "dtype": "int64",
                                                "src": "loader"}]},
    ]
    t = 1000.0
    plan = [  # (o, ev, bw, sig, compiles at the barrier, site)
        (1, 0, 1, 0, 1, None), (1, 0, 1, 0, 1, None), (1, 0, 1, 0, 0, None),
        (0, 1, 0, 1, 1, 0),  # the eval pass: a forward graph for [4, 5]
        (0, 1, 0, None, 0, 0),
        (1, 0, 1, 2, 1, None),  # training with a new length: the padding's
    ]
    for i, (o, ev, bw, sig, bu, site) in enumerate(plan):
        rec: dict[str, Any] = {"type": "step", "i": i, "t0": t + i, "tb": t + i + 0.5, "t1": t + i + 0.9,
                               "barrier": "loader", "c": {"MarkStep": 1, "ExecuteComputation": 1,
                                                          "UncachedCompile" if bu else "CachedCompile": 1}}
        rec["bu" if bu else "bc"] = 1
        for key, value in (("o", o), ("ev", ev), ("bw", bw)):
            if value:
                rec[key] = value
        for key, value in (("sig", sig), ("site", site)):
            if value is not None:
                rec[key] = value
        recs.append(rec)
        if bu:
            recs.append({"type": "compile", "i": i, "t": t + i + 0.7, "ns": 500_000_000, "at": "barrier"})
    _write(tmp_path / "r.json", recs)
    a = analyze(load_run(tmp_path / "r.json"))
    # (one eval step: the pass's second barrier took no batch)
    assert (a.totals.steps, a.totals.eval_steps, a.totals.eval_passes) == (4, 1, 1)
    by_kind = {f.kind: f for f in a.findings}
    assert by_kind["hf_trainer_eval"].compiles == 1  # the eval's shape is the evaluation's
    assert "graph_change" not in {f.cause for f in a.findings}
    # The training step with a new length is the input's, not the evaluation's.
    shape = next(f for f in a.findings if f.cause == "input_shape")
    assert (shape.input, shape.compiles, shape.steps) == ("input_ids", 1, [3])


def test_a_stopped_run_says_how_long_its_last_step_ran(tmp_path: Path) -> None:
    # One step, then SIGTERM 150 s after its barrier (the next step was compiling).
    w = RunWriter(tmp_path / "r.json", {"name": "u", "started_unix": 1000.0, "meta": {}})
    for r in _steps(1):
        w.write(r)
    w.write({"type": "end", "t": 1000.9 + 150.0, "status": "interrupted", "exception": "SIGTERM",
             "steps": 1, "syncs": 0, "errors": 0})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    assert any("stopped (SIGTERM)" in n for n in a.notes)
    assert any("2.5 min passed after the last barrier (step 0)" in n for n in a.notes), a.notes
    from xprof.report.prose import headline

    assert any("too few to judge recompiles" in line for line in headline(a))


# -- eager mode, on exact records ---------------------------------------------------------

def _eager_steps(n: int, graphs: int = 30, at_barrier: int = 0) -> list[dict[str, Any]]:
    """``n`` training steps whose ops ran one by one (``mg``), nothing left for the barrier;
    step 0 compiled every op once (``compile`` records ``at: op``)."""
    recs: list[dict[str, Any]] = []
    for i in range(n):
        t = 1000.0 + i
        if i == 0:
            recs += [{"type": "compile", "i": 0, "t": t + 0.01 * (k + 1), "ns": 5e6, "at": "op"} for k in range(graphs)]
        c = {"MarkStep": 1, "ExecuteComputation": graphs + at_barrier,
             "UncachedCompile" if i == 0 else "CachedCompile": graphs}
        if at_barrier:
            c["CachedCompile"] = c.get("CachedCompile", 0) + at_barrier
        rec = {"type": "step", "i": i, "t0": t, "tb": t + 0.5, "t1": t + 0.9, "barrier": "mark_step",
               "c": c, "o": 1, "bw": 1, "mg": graphs}
        if at_barrier:
            rec["bc"] = at_barrier
        recs.append(rec)
    return recs


def test_steps_that_ran_op_by_op_are_steps_and_a_finding(tmp_path: Path) -> None:
    _write(tmp_path / "eager.json", _eager_steps(6))
    a = analyze(load_run(tmp_path / "eager.json"))
    assert a.totals.steps == 6 and a.totals.recompiles == 0  # all 30 op compiles in step 0
    assert a.totals.compile_seconds == 30 * 0.005
    assert a.totals.execute_ms_median is None  # not recorded for ops run one by one
    assert [(f.cause, f.count, f.steps, f.minor) for f in a.findings] == [("eager_mode", 4, [2, 3, 4, 5], False)]
    assert "30 graphs a step" in a.findings[0].title and "torch_xla.compile" in a.findings[0].advice


def test_a_step_compiled_at_its_barrier_is_no_eager_step(tmp_path: Path) -> None:
    # eager mode on, but each step's graph ran at its barrier (torch_xla.compile): the few
    # ops run eagerly around it are not a finding
    _write(tmp_path / "compiled.json", _eager_steps(6, graphs=2, at_barrier=1))
    a = analyze(load_run(tmp_path / "compiled.json"))
    assert a.totals.steps == 6 and a.findings == []
    # an old file (no mg): the barriers ran nothing, so no step is a step and nothing is eager
    old = [{k: v for k, v in r.items() if k != "mg"} for r in _eager_steps(6)]
    _write(tmp_path / "old.json", old)
    a = analyze(load_run(tmp_path / "old.json"))
    assert not any(f.cause == "eager_mode" for f in a.findings)


def test_a_last_step_run_op_by_op_after_the_last_barrier_is_counted(tmp_path: Path) -> None:
    def run_with(end_extra: dict[str, Any]) -> Any:
        path = tmp_path / f"tail{len(end_extra)}.json"
        w = RunWriter(path, {"name": "u", "started_unix": 1000.0, "meta": {}})
        for r in _eager_steps(5):
            w.write(r)
        w.write({"type": "end", "t": 1010.0, "status": "ok", "steps": 5, "syncs": 0, "errors": 0,
                 "tail": {"CachedCompile": 30, "ExecuteComputation": 30}, **end_extra})
        w.close()
        return analyze(load_run(path))

    a = run_with({"tail_opt": 1, "tail_graphs": 30})  # eager: the 6th step's ops ran, no barrier after
    assert a.totals.steps == 6 and any("after the last barrier" in n for n in a.notes)
    # a lazy loop's last step without a barrier never ran (its ops are pending): not a step
    a = run_with({"tail_opt": 1})
    assert a.totals.steps == 5 and not any("after the last barrier" in n for n in a.notes)


def test_a_fallback_whose_later_calls_compile_nothing_says_so(tmp_path: Path) -> None:
    # aten::isin runs on the CPU from step 4 on (twice a step); the graphs it cut compiled
    # in step 4 only (a generate() call's first run, say): later calls hit the cache.
    recs = _steps(9, o=1)
    for r in recs[4:]:
        r["c"]["aten::isin.Tensor_Tensor"] = 2
    recs[4]["c"]["UncachedCompile"] = 2
    compiles = [{"type": "compile", "i": 4, "t": 1004.1 + 0.1 * k, "ns": 3e8, "at": "step"} for k in range(2)]
    _write(tmp_path / "f.json", recs[:4] + compiles + recs[4:])
    a = analyze(load_run(tmp_path / "f.json"))
    f = next(f for f in a.findings if f.cause == "cpu_fallback")
    assert f.compiles == 2 and f.count == 10
    assert "(all compiles by step 4; the 8 calls after compiled nothing)" in f.title
    assert any("later calls compiled nothing" in e for e in f.evidence)


def _generate_run(tmp_path: Path, second_line: int) -> Any:
    """Step 4 calls a library's generate() at line 23, which reads its stop condition twice;
    between the two reads an op it ran on the CPU cut a graph, compiled outside any read.
    ``second_line``: the user line of the second read."""
    recs = _steps(7, o=1)
    for r in recs[4:]:
        r["c"]["aten::isin.Tensor_Tensor"] = 1
    recs[4]["c"]["UncachedCompile"] = 1
    sites = [{"type": "site", "id": k, "kind": "bool", "file": "/u/t.py", "line": line, "func": "main",
              "via": "lib.Model.generate", "code": "out = model.generate(x)", "inner": "lib.StopCheck.__call__",
              "chain": ["lib.StopCheck.__call__", "lib.Model.generate"]} for k, line in ((0, 23), (1, second_line))]
    reads = [{"type": "sync", "i": 4, "site": k, "t0": t, "t1": t + 0.01, "x": 1}
             for k, t in ((0, 1004.10), (1 if second_line != 23 else 0, 1004.30))]
    reads.append({"type": "sync", "i": 5, "site": 0, "t0": 1005.10, "t1": 1005.11, "x": 1})  # cached now
    compile_ = {"type": "compile", "i": 4, "t": 1004.25, "ns": 1e8, "at": "step"}
    path = tmp_path / f"gen{second_line}.json"
    _write(path, recs[:4] + sites + reads + [compile_] + recs[4:])
    return analyze(load_run(path))


def test_a_compile_between_two_reads_of_one_library_call_is_the_calls(tmp_path: Path) -> None:
    a = _generate_run(tmp_path, second_line=23)
    f = a.findings[0]
    assert f.cause == "implicit_sync" and f.via == "lib.Model.generate" and f.compiles == 1
    assert f.seconds >= 0.1  # the compile (outside the reads' waits) is in its cost
    assert any("all of them by step 4: the 1 read after compiled nothing" in e for e in f.evidence)
    assert a.compiles["cause"].tolist() == ["implicit_sync"]
    assert not any(g.cause == "cpu_fallback" and g.compiles for g in a.findings)
    # reads from two different user lines do not bracket it: the op on the CPU keeps it
    a = _generate_run(tmp_path, second_line=30)
    assert a.compiles["cause"].tolist() == ["cpu_fallback"]


def _library_reads_run(tmp_path: Path, loop_line: int) -> Any:
    """Every step, a library call at user line 23 reads through two inner functions (3 reads
    in a stop check, 1 in a special-tokens check). ``loop_line``: the user line the step
    barriers were asked for from (23: the training loop runs inside that call, a Trainer)."""
    recs = _steps(8, o=1)
    recs[0]["c"]["UncachedCompile"], recs[0]["bu"], recs[0]["site"] = 1, 1, 9
    sites = [{"type": "site", "id": 9, "kind": "barrier", "file": "/u/t.py", "line": loop_line, "func": "main",
              "via": None, "code": "xm.mark_step()"}]
    for k, inner, lib_line in ((0, "lib.StopCheck.__call__", 396), (1, "lib.Model._prepare_special_tokens", 2413)):
        sites.append({"type": "site", "id": k, "kind": "bool", "file": "/u/t.py", "line": 23, "func": "main",
                      "via": "lib.Model.generate", "code": "out = model.generate(x)", "inner": inner,
                      "chain": [inner, "lib.Model.generate"],
                      "inner_at": ["/v/site-packages/lib.py", lib_line, "if x:"]})
    out = sites + recs[:1]
    for i, r in enumerate(recs[1:], start=1):
        out += [{"type": "sync", "i": i, "site": 0 if j < 3 else 1, "t0": 1000 + i + 0.1 * j,
                 "t1": 1000 + i + 0.1 * j + 0.01, "x": 1} for j in range(4)]
        out.append(r)
    path = tmp_path / f"lib{loop_line}.json"
    _write(path, out)
    return analyze(load_run(path))


def test_a_library_calls_reads_are_one_finding_unless_the_loop_runs_inside_it(tmp_path: Path) -> None:
    a = _library_reads_run(tmp_path, loop_line=20)
    (f,) = a.findings
    assert f.title.startswith("lib.Model.generate (called from t.py:23) forces a host sync every step: 28 reads")
    assert ("its reads, by the library function that made them: 21 in StopCheck.__call__ (lib.py:396: if x:); "
            "7 in Model._prepare_special_tokens (lib.py:2413: if x:)") in f.evidence
    # the training loop runs inside the call (trainer.train()): one finding per inner function
    a = _library_reads_run(tmp_path, loop_line=23)
    assert sorted((f.title.split(" (")[0], f.count) for f in a.findings) == [
        ("lib.Model._prepare_special_tokens", 7), ("lib.StopCheck.__call__", 21)]


def _generate_barrier_run(tmp_path: Path, op_alone_at: int | None) -> Any:
    """generate() at line 23 in steps 4 and 7 (its reads), with aten::isin on the CPU in those
    steps; step 4's barrier compiles a new graph with the same inputs. ``op_alone_at``: a
    step where the op also runs without generate()."""
    recs = _steps(9, o=1, sig=0)
    recs[0]["c"]["UncachedCompile"], recs[0]["bu"] = 1, 1
    recs[4]["c"]["UncachedCompile"], recs[4]["bu"], recs[4]["bc"] = 1, 1, 0
    for i in [4, 7] + ([op_alone_at] if op_alone_at is not None else []):
        recs[i]["c"]["aten::isin.Tensor_Tensor"] = 9
    out: list[dict[str, Any]] = [
        {"type": "sig", "id": 0, "inputs": [{"name": "ids", "shape": [4, 32], "dtype": "int64", "src": "batch"}]},
        {"type": "site", "id": 9, "kind": "barrier", "file": "/u/t.py", "line": 20, "func": "main", "via": None,
         "code": "xm.mark_step()"},
        {"type": "site", "id": 0, "kind": "bool", "file": "/u/t.py", "line": 23, "func": "main",
         "via": "lib.Model.generate", "code": "out = model.generate(x)", "inner": "lib.StopCheck.__call__"}]
    for i, r in enumerate(recs):
        if i in (4, 7):
            out.append({"type": "sync", "i": i, "site": 0, "t0": 1000 + i + 0.1, "t1": 1000 + i + 0.11, "x": 1})
        if i in (0, 4):
            out.append({"type": "compile", "i": i, "t": 1000 + i + 0.8, "ns": 2e9, "at": "barrier"})
        out.append(r)
    path = tmp_path / f"genb{op_alone_at}.json"
    _write(path, out)
    return analyze(load_run(path))


def test_a_barrier_recompile_after_a_library_calls_first_run_is_the_calls(tmp_path: Path) -> None:
    # aten::isin ran only in the steps that called generate(): it is the call's, and so is the
    # barrier graph that changed in its first step.
    a = _generate_barrier_run(tmp_path, None)
    (f,) = [g for g in a.findings if g.compiles]
    assert f.via == "lib.Model.generate" and f.compiles == 1 and f.seconds >= 2.0
    assert any("1 of them at a step barrier (step 4: same inputs as before, but lib.Model.generate at t.py:23 "
               "ran in this step (with aten::isin.Tensor_Tensor on the CPU" in e for e in f.evidence)
    # the op also ran in a step without generate(): the training step's own, as before
    a = _generate_barrier_run(tmp_path, 6)
    assert a.compiles["cause"].tolist()[1:] == ["cpu_fallback"]


def test_torch_compiles_own_syncs_while_tracing_the_first_steps_are_warm_up(tmp_path: Path) -> None:
    """torch.compile's bridge syncs (barrier "dynamo") while it traces a step's forward: a
    graph compiled there before the first training step is warm-up, one before the third
    training step is not (seen on a model with a data-dependent branch: a graph break)."""
    recs = _steps(8, o=1)
    for i in (0, 1, 4):
        recs[i].update(barrier="dynamo", o=0, ng=1)
    for i in (0, 4):
        recs[i]["c"]["UncachedCompile"] = 1
    out: list[dict[str, Any]] = []
    for r in recs:
        if r["i"] in (0, 4):
            out.append({"type": "compile", "i": r["i"], "t": r["t0"] + 0.3, "ns": 5e7, "at": "step"})
        out.append(r)
    _write(tmp_path / "dz.json", out)
    a = analyze(load_run(tmp_path / "dz.json"))
    assert a.compiles["cause"].tolist() == ["warmup", "dynamo"]
    assert a.totals.recompiles == 1


def test_an_eval_batch_with_two_barriers_is_one_eval_step() -> None:
    # accelerate's gather_for_metrics syncs beside the loader's own sync: two eval barriers a
    # batch, the batch's inputs at one of them.
    df = _phase_table([(1, False, False, 1)] + [(0, True, True, 0)] * 8)
    df["sig"] = pd.array([0] + [0, None] * 4, dtype="Int64")
    steps_mod.assign(df)
    assert steps_mod.eval_steps(df) == 4 and steps_mod.eval_passes(df) == 1
    df["sig"] = pd.array([None] * 9, dtype="Int64")  # no inputs recorded: every eval barrier
    assert steps_mod.eval_steps(df) == 8
