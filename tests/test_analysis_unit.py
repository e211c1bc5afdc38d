"""Fast unit tests of the analysis on exact, hand-built run files (no torch needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.verdicts import notices_outside
from xprof.analysis import analyze
from xprof.diagnosis.patterns import bucketing_what_if, describe_period, period
from xprof.diagnosis.rules.reads import sync_kind
from xprof.runfile import RunWriter, load_run

T0 = 1_000_000.0


class Builder:
    """Writes a run the way the recorder does: a step every 10 ms, compiles of 500 ms."""

    def __init__(self, path: Path) -> None:
        self.w = RunWriter(path, {"name": "unit", "started_unix": T0, "meta": {}})
        self.path = path
        self.i = 0
        self.t = T0
        self.sigs: dict[tuple[Any, ...], int] = {}
        self.dtype = "int64"
        """The dtype of every input the signatures record."""
        self.src = "batch"
        """Where every input came from (a DataLoader's batch; ``to``: moved by the loop)."""

    def step(self, shapes: dict[str, list[int]] | None = None, compile_ms: float = 0.0,
             nodes: int = 70, read: tuple[str, int, str] | None = None, read_compile_ms: float = 0.0,
             site: dict[str, Any] | None = None, read_ran: bool = True, opt: int | None = None,
             barrier_site: dict[str, Any] | None = None, fields: dict[str, Any] | None = None) -> None:
        """``read_compile_ms``: the read compiles a graph of its own, that long (it waits for it);
        ``site``: more fields of the read's site record (``via``, ``inner_at``); ``read_ran``:
        the read ran a graph (False: its value was ready, it only waited)."""
        t0 = self.t
        tb = t0 + 0.005 + read_compile_ms / 1e3
        if read is not None:
            kind, line, code = read
            self.w.write({"type": "site", "id": line, "kind": kind, "file": "/u/train.py", "line": line,
                          "func": "main", "via": None, "code": code, **(site or {})})
            r1 = t0 + 0.002 + read_compile_ms / 1e3
            sync: dict[str, Any] = {"type": "sync", "i": self.i, "site": line, "t0": t0 + 0.001, "t1": r1}
            if read_ran:
                sync["x"] = 1
                self.w.write({"type": "exec", "samples": [[r1 - 0.0002, 5e5]]})
            if read_compile_ms:
                sync["u"] = 1
                self.w.write({"type": "compile", "i": self.i, "t": r1 - 0.0005, "ns": read_compile_ms * 1e6,
                              "at": "step"})
            self.w.write(sync)
        t1 = tb + compile_ms / 1e3 + 0.001
        rec: dict[str, Any] = {"type": "step", "i": self.i, "t0": t0, "tb": tb, "t1": t1, "barrier": "mark_step",
                               "c": {"MarkStep": 1, "ExecuteComputation": 1 + bool(read_compile_ms)}}
        if read_compile_ms:
            rec["c"]["UncachedCompile"] = 1
        if opt is not None:
            rec["o"] = opt
        rec.update(fields or {})
        if barrier_site is not None:  # who asked for a barrier that compiled
            self.w.write({"type": "site", "id": 1000, "kind": "barrier", "file": "/u/train.py", "func": "main",
                          **barrier_site})
            rec["site"] = barrier_site.get("id", 1000)
        if compile_ms:
            rec["c"]["UncachedCompile"] = rec["c"].get("UncachedCompile", 0) + 1
            rec["bu"] = 1
            self.w.write({"type": "compile", "i": self.i, "t": tb + compile_ms / 1e3, "ns": compile_ms * 1e6,
                          "at": "barrier"})
        else:
            rec["c"]["CachedCompile"] = 1
            rec["bc"] = 1
        self.w.write({"type": "graph_sizes", "samples": [[t1 - 0.0005, nodes]]})
        if shapes is not None:
            key = tuple((k, tuple(v)) for k, v in shapes.items())
            if key not in self.sigs:
                self.sigs[key] = len(self.sigs)
                self.w.write({"type": "sig", "id": self.sigs[key], "inputs": [
                    {"name": k, "shape": v, "dtype": self.dtype, "src": self.src} for k, v in shapes.items()]})
            rec["sig"] = self.sigs[key]
        self.w.write(rec)
        self.w.write({"type": "exec", "samples": [[t1 + 0.002, 1e6]]})
        self.i += 1
        self.t = t1 + 0.004

    def done(self, tail: dict[str, int] | None = None, tail_opt: int = 0) -> Any:
        """``tail``: counter increases after the last barrier (the end record's); ``tail_opt``:
        optimizer steps after it."""
        end: dict[str, Any] = {"type": "end", "t": self.t, "status": "ok", "exception": None, "steps": self.i}
        if tail:
            end["tail"] = tail
        if tail_opt:
            end["tail_opt"] = tail_opt
        self.w.write(end)
        self.w.close()
        a = analyze(load_run(self.path))
        # One verdict, on every exact-record case: what the live notices say of these records
        # names findings the report has.
        outside = notices_outside(Path(self.path), {f.id for f in a.findings})
        assert not outside, outside
        return a


def test_padding_what_if_and_warmup(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    seen: set[int] = set()
    for n in [12, 17, 12, 23, 17, 30, 12]:
        b.step({"input_ids": [4, n]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    a = b.done()
    assert [f.kind for f in a.findings] == ["dynamic_padding"]
    f = a.findings[0]
    # Warm-up is steps 0 and 1 (lengths 12 and 17), whatever they compile: 23 and 30 recompile.
    assert f.compiles == 2 and a.totals.recompiles == 2 and a.totals.compiles == 4
    assert f.seconds == pytest.approx(1.0)
    rows = {r["strategy"]: r for r in f.what_if or []}
    assert rows["as recorded"]["graphs"] == 4
    # multiples of 8: 16 and 24 in warm-up, 32 after it: one recompile at 0.5 s a length
    assert rows["pad_to_multiple_of=8"]["graphs"] == 3
    assert rows["pad_to_multiple_of=8"]["compile_seconds"] == pytest.approx(0.5)
    assert rows["pad_to_multiple_of=16"]["compile_seconds"] == 0  # (16 and 32, both in warm-up)
    assert rows["pad_to_multiple_of=32"]["saved_seconds"] == pytest.approx(1.0)


def test_a_fixed_set_of_lengths_compiled_early_reads_as_settled(tmp_path: Path) -> None:
    # Four buckets, all seen by step 6, then 30 steps that compile nothing.
    lengths = [32, 32, 64, 32, 16, 32, 48] + [16, 32, 48, 64] * 8 + [32, 16]
    b = Builder(tmp_path / "r.json")
    seen: set[int] = set()
    for n in lengths:
        b.step({"ids": [8, n]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    f = b.done().findings[0]
    assert f.kind == "dynamic_padding" and f.compiles == 3
    assert f.title == "ids took 4 lengths of dim 1 (16, 32, 48, 64), all by step 6: 3 recompiles, 1.50 s"
    assert f.evidence[0].startswith("all 4 shapes by step 6: the 34 steps after compiled nothing")
    assert "one-off cost" in f.advice
    # The same lengths still arriving late in the run: not settled (buckets of 8, a graph each).
    b = Builder(tmp_path / "r2.json")
    seen.clear()
    for n in lengths[:20] + [24] + lengths[20:]:
        b.step({"ids": [8, n]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    f = b.done().findings[0]
    assert f.title.startswith("ids is padded to multiples of 8 (5 lengths of dim 1")
    assert not any(e.startswith("all ") for e in f.evidence) and "one-off" not in f.advice
    # Two lengths (pad_to_multiple_of=8 on short texts): a settled shape change, no what-if table.
    b = Builder(tmp_path / "r3.json")
    for k, n in enumerate([32, 32, 32, 24] + [24, 32] * 15):
        b.step({"ids": [8, n]}, compile_ms=500 if k in (0, 1, 3) else 0)
    f = b.done().findings[0]
    assert f.kind == "shape_change" and f.what_if is None
    assert f.title == "ids took 2 lengths of dim 1 (24, 32), all by step 3: 1 recompile, 0.50 s"
    assert "one-off cost" in f.advice and "what-if" not in f.advice


def test_a_compile_after_the_last_barrier_is_no_recompile(tmp_path: Path) -> None:
    # print(metric.compute()) after the loop: a read that compiles, in no step.
    b = Builder(tmp_path / "r.json")
    for k in range(6):
        b.step({"x": [8, 4]}, compile_ms=500 if k < 2 else 0)
    b.w.write({"type": "site", "id": 7, "kind": "format", "file": "/u/train.py", "line": 30, "func": "main",
               "via": None, "code": "print(acc.compute())"})
    b.w.write({"type": "compile", "i": 6, "t": b.t + 0.2, "ns": 3e8, "at": "step"})
    b.w.write({"type": "sync", "i": 6, "site": 7, "t0": b.t + 0.1, "t1": b.t + 0.3, "u": 1, "x": 1})
    b.t += 0.4
    a = b.done(tail={"UncachedCompile": 1, "ExecuteComputation": 1})
    assert (a.totals.compiles, a.totals.recompiles, a.findings) == (3, 0, [])
    assert ("1 host read after the last step barrier is not counted as findings (e.g. a final print), "
            "nor the 1 compile after it as recompiles.") in a.notes


def test_images_changing_height_and_width_are_a_size_not_padding(tmp_path: Path) -> None:
    # Multi-scale training: a new image size every 4 steps, from three.
    b = Builder(tmp_path / "r.json")
    seen: set[int] = set()
    for k in range(16):
        n = (24, 40, 24, 32)[k // 4]
        b.step({"images": [4, 3, n, n]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    (f,) = b.done().findings
    assert f.kind == "shape_change" and f.what_if is None
    assert f.title == "images changes size in dims 2, 3 (3 sizes: 24x24, 40x40, 32x32): 2 recompiles, 1.00 s"
    assert f.advice.startswith("Resize or crop to one fixed size") and "max_length" not in f.advice
    # One dim (a text line image's width, audio frames): a padded length, as before.
    b = Builder(tmp_path / "r2.json")
    seen.clear()
    for k in range(16):
        n = (24, 40, 24, 32)[k // 4]
        b.step({"lines": [4, 1, 32, n]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    assert b.done().findings[0].kind == "dynamic_padding"


def test_one_off_first_graph_is_warmup(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    b.step({"x": [8, 4]}, compile_ms=500, nodes=49)  # optimizer state created in here
    b.step({"x": [8, 4]}, compile_ms=500, nodes=70)
    for _ in range(5):
        b.step({"x": [8, 4]})
    a = b.done()
    assert a.findings == []
    assert a.totals.recompiles == 0 and a.totals.compiles == 2


def test_read_every_step_is_one_finding(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for k in range(8):
        b.step({"x": [8, 4]}, compile_ms=500 if k == 0 else 0, read=("item", 42, "losses.append(loss.item())"))
    a = b.done()
    assert len(a.findings) == 1
    f = a.findings[0]
    assert (f.cause, f.kind, f.line, f.count, f.pattern) == ("implicit_sync", "item", 42, 8, "every step")


def test_a_reads_cost_leaves_out_compiles_another_cause_owns(tmp_path: Path) -> None:
    # Step 0's read compiles the forward graph (warm-up); step 5's read compiles again for a
    # new input length (the padding finding's). Each read waits 1 ms besides compiling.
    b = Builder(tmp_path / "r.json")
    read = ("item", 42, "losses.append(loss.item())")
    b.step({"x": [8, 4]}, compile_ms=500, read=read, read_compile_ms=300)
    b.step({"x": [8, 4]}, compile_ms=500, read=read)
    for k in range(2, 10):
        n = 4 if k < 5 else 6
        b.step({"x": [8, n]}, compile_ms=500 if k == 5 else 0, read=read, read_compile_ms=200 if k == 5 else 0)
    a = b.done()
    item = next(f for f in a.findings if f.kind == "item")
    shape = next(f for f in a.findings if f.cause == "input_shape")
    assert item.count == 10 and item.compiles == 0
    # ten 1 ms waits; neither the warm-up compile nor the new shape's is counted again here
    assert item.seconds == pytest.approx(0.010, abs=1e-4)
    assert shape.compiles == 2 and shape.seconds == pytest.approx(0.7)
    assert "500.0 ms of that was 2 compiles counted under their own cause or warm-up, not here" in item.evidence


@pytest.mark.parametrize("code, lib_line, says", [
    ("clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)",
     "if error_if_nonfinite and (total_norm.isnan() or total_norm.isinf()):",
     "uses `error_if_nonfinite`, which you pass as `error_if_nonfinite=True`"),
    ("sched.step(loss)", "current = float(metrics)",
     "turns a tensor into a Python number (`current = float(metrics)`)"),
    ("sched.step(loss, epoch=None)", "if self.best is None or metrics < self.best:", None),
    # PyG's pooling works out the output size from the data: pass it in (size=), not less often
    ("x = global_add_pool(x, batch)", "dim_size = int(index.max()) + 1 if index.numel() > 0 else 0",
     "dim_size, a size the library works out from the data when it is not given. If the call takes it "
     "as an argument"),
    ("dist = Categorical(logits=policy(obs))", "if not torch._is_all_true(valid):",
     "It happens in a check of your inputs: libraries usually let you turn such checks off (validate_args=False"),
])
def test_library_read_advice_follows_the_librarys_line(tmp_path: Path, code: str, lib_line: str,
                                                       says: str | None) -> None:
    b = Builder(tmp_path / "r.json")
    site = {"via": "torch.lib.fn", "inner_at": ["/venv/site-packages/torch/lib.py", 51, lib_line]}
    for _ in range(6):
        b.step({"x": [8, 4]}, compile_ms=500 if b.i < 2 else 0, read=("bool", 17, code), site=site)
    f = b.done().findings[0]
    assert f.kind == "library_sync" and f"the library's line: lib.py:51: {lib_line}" in f.evidence
    assert f.advice.startswith("torch.lib.fn (called from train.py:17) reads a tensor's value on the host. ")
    if says is None:
        assert not any(w in f.advice for w in ("which you pass", "Python number", "a check of your inputs"))
    else:
        assert says in f.advice
    assert "learning rate" not in f.advice  # (a scheduler's patience: only where the call is one)


def test_a_value_dependent_op_inside_a_librarys_input_check_names_the_call(tmp_path: Path) -> None:
    # torchmetrics' update() validates its inputs with len(torch.unique(t)) every call.
    b = Builder(tmp_path / "r.json")
    site = {"via": "torchmetrics.classification.stat_scores.MulticlassStatScores.update",
            "inner": "torchmetrics.functional.classification.stat_scores._multiclass_stat_scores_tensor_validation",
            "inner_at": ["/v/site-packages/torchmetrics/stat_scores.py", 320, "n = len(torch.unique(t, dim=None))"]}
    for _ in range(6):
        b.step({"x": [8, 4]}, compile_ms=500 if b.i < 2 else 0, read=("unique", 24, "acc.update(pred, y)"), site=site)
    (f,) = b.done().findings
    assert f.cause == "data_dependent"
    assert f.title.startswith("torchmetrics.classification.stat_scores.MulticlassStatScores.update (called from "
                              "train.py:24) runs unique() on the CPU every step: 0 recompiles")
    assert "_multiclass_stat_scores_tensor_validation, a check of your inputs" in f.advice
    assert "ignore_index" not in f.advice  # the advice for a masked loss in the user's own code


def test_eval_graph_is_info(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    b.step({"x": [8, 4]}, compile_ms=500)
    b.step({"x": [8, 4]}, compile_ms=500)
    for k in range(2, 14):
        if k % 4 == 0:
            b.step({"x": [16, 4]}, compile_ms=500 if k == 4 else 0, nodes=16)
        else:
            b.step({"x": [8, 4]})
    a = b.done()
    assert [(f.kind, f.severity) for f in a.findings] == [("eval_pass", "info")]
    assert a.findings[0].line is None  # the user's own barrier: no line to name
    # Not "recompiles that a loop with fixed shapes and graphs would not pay" beside "nothing
    # costly": the overview and the exit summary call them expected.
    import json

    from xprof.recorder.live import LiveNotices
    from xprof.report.prose import headline

    assert "One of them was an evaluation pass's own graph, compiled after warm-up: expected, and cached after." \
        in headline(a)
    from xprof.report.prose import exit_lines

    assert exit_lines(a, "r.json")[2].startswith("xprof: first thing to change: nothing stands out")
    live = LiveNotices(T0, None)  # nor does a live notice name the eval pass's graph
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:-1]])
    assert live.said == []


def test_an_eval_graph_compiled_at_a_librarys_barrier_names_the_users_line(tmp_path: Path) -> None:
    # accelerate's gather_for_metrics calls xm.mark_step inside the eval loop.
    b = Builder(tmp_path / "r.json")
    b.step({"x": [8, 4]}, compile_ms=500)
    b.step({"x": [8, 4]}, compile_ms=500)
    gather = {"line": 33, "via": "accelerate.accelerator.Accelerator.gather_for_metrics",
              "code": "preds, labels = accelerator.gather_for_metrics((preds, ey))"}
    for k in range(2, 14):
        if k % 4 == 0:
            b.step({"x": [16, 4]}, compile_ms=500 if k == 4 else 0, nodes=16,
                   barrier_site=gather if k == 4 else None)
        else:
            b.step({"x": [8, 4]})
    f = b.done().findings[0]
    assert (f.kind, f.file, f.line) == ("eval_pass", "/u/train.py", 33)
    assert ("its barrier was asked for at train.py:33 (inside accelerate.accelerator.Accelerator.gather_for_metrics): "
            "preds, labels = accelerator.gather_for_metrics((preds, ey))") in f.evidence


def test_incomplete_run_is_noted(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    b.step({"x": [8, 4]}, compile_ms=500)
    b.w.close()  # no end record: the process died
    a = analyze(load_run(b.path))
    assert a.totals.status == "incomplete" and not a.totals.complete
    assert any("incomplete" in n for n in a.notes)


@pytest.mark.parametrize(("access", "code", "via", "kind"), [
    ("repr", "print(loss)", None, "print"),
    ("format", 'print(f"{loss:.3f}")', None, "print"),
    ("format", 'msg = f"{loss:.3f}"', None, "format"),
    ("bool", "if loss > 1.0:", None, "tensor_condition"),
    ("bool", "ok = bool(flag)", None, "scalar"),
    ("item", "x = loss.item()", None, "item"),
    ("item", "scaler.step(opt)", "torch.amp.grad_scaler.GradScaler.step", "grad_scaler"),
    ("cpu", "torch.save(model.state_dict(), p)", "torch.serialization.save", "checkpoint"),
    ("item", "trainer.train()", "transformers.trainer.Trainer._maybe_log_save_evaluate", "library_sync"),
])
def test_sync_kind(access: str, code: str, via: str | None, kind: str) -> None:
    assert sync_kind(access, code, via) == kind


def test_period_detection() -> None:
    assert period([3, 7, 11, 15]) == 4
    assert period([3, 7]) is None
    assert describe_period([1, 2, 3]) is None  # consecutive steps are not a period
    assert describe_period([2, 5, 8, 12, 14]) is None
    assert describe_period([0, 5, 10, 15, 21]) == "about every 5 steps"


def test_bucketing_rows() -> None:
    rows = bucketing_what_if([10, 20, 30], compile_s_each=1.0, current_seconds=2.0)
    by = {r["strategy"]: r for r in rows}
    assert by["as recorded"]["graphs"] == 3
    assert by["pad_to_multiple_of=16"]["graphs"] == 2  # 16, 32
    assert by["pad_to_multiple_of=64"]["graphs"] == 1
    assert by["pad_to_multiple_of=64"]["padding_waste"] == pytest.approx(192 / 60 - 1, abs=1e-3)


def test_orphan_compile_and_repeated_step_do_not_break_analysis(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    b.step({"x": [8, 4]}, compile_ms=500)
    b.step({"x": [8, 4]})
    # a repeated step index, and a compile whose step record never came (killed mid-write)
    b.w.write({"type": "step", "i": 1, "t0": b.t, "tb": b.t, "t1": b.t, "barrier": "sync"})
    b.w.write({"type": "compile", "i": 2, "t": b.t + 0.5, "ns": 5e8, "at": "barrier"})
    b.w.close()
    run = load_run(b.path)
    assert run.impossible == 1  # the repeated step: skipped at the door (issue 28)
    a = analyze(run)
    assert a.totals.barriers == 2 and a.totals.steps == 2
    assert len(a.compiles) == 1
    assert any("Ignored 1 compile record without their step" in n for n in a.notes)
    assert any(n.startswith("1 record with impossible values was skipped") for n in a.notes)


def test_finding_key_round_trips_through_its_id() -> None:
    from xprof.diagnosis.keys import FindingKey

    for key, text in [(FindingKey.sync(3), "sync:3"), (FindingKey.input("input_ids"), "input_ids"),
                      (FindingKey.fallback(["aten::nonzero", "aten::index"]), "aten::index,aten::nonzero"),
                      (FindingKey("eval"), "eval"), (FindingKey.graph(36), "36")]:
        assert FindingKey.parse(str(key)) == key
        assert str(key).endswith(text)
    assert FindingKey.sync(3).site == 3 and FindingKey.input("x").site is None
    assert FindingKey.parse("fallback:aten::index,aten::nonzero").ops == ["aten::index", "aten::nonzero"]
    assert FindingKey.input(None) == FindingKey("input", "?")


# -- torch.compile: why dynamo recompiled, from its guard failures ---------------------

# torch._dynamo's guard_failures for one function, as recorded from a tiny BERT under
# torch.compile(backend="openxla") with batches padded to 12, 17, 23, 30 (transformers 5.24,
# torch 2.9.0): every recompile re-checks each cached entry, so entry 0/0's stale failure
# repeats at every recompile after the first.
_BERT_GUARDS = [{"func": "wrapper", "file": "transformers/utils/generic.py", "line": 1030, "reasons": [
    "0/0: object.__getattribute__(self.config, 'problem_type') is None  # modeling_bert.py:1115",
    "0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 12, actual 17",
    "0/0: object.__getattribute__(self.config, 'problem_type') is None  # modeling_bert.py:1115",
    "0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 12, actual 23",
    "0/2: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 17, actual 23",
    "0/0: object.__getattribute__(self.config, 'problem_type') is None  # modeling_bert.py:1115",
    "0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 12, actual 30",
    "0/2: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 17, actual 30",
    "0/3: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 23, actual 30",
    "0/0: object.__getattribute__(self.config, 'problem_type') is None  # modeling_bert.py:1115",
]}]


def test_each_dynamo_recompile_is_explained_by_its_entrys_first_failure() -> None:
    from xprof.analysis.findings import commonest_guard, first_failures

    firsts = [r for _, r in first_failures(_BERT_GUARDS)]
    assert [r.split(":")[0] for r in firsts] == ["0/0", "0/1", "0/2", "0/3"]  # one per recompile
    assert firsts[1].endswith("expected 12, actual 17") and firsts[3].endswith("expected 23, actual 30")
    kind, example, count = commonest_guard(firsts)
    # the padding, not the one-off problem_type guard that is listed first and repeats
    assert count == 3 and "size mismatch at index #" in kind and example == firsts[3]
    # reasons without a compile id (older torch) are each kept
    assert [r for _, r in first_failures([{"reasons": ["a", "a", "b"]}])] == ["a", "a", "b"]


def test_a_size_no_other_input_shares_is_no_batch_size_and_no_tokenizer_padding(tmp_path: Path) -> None:
    # A graph per step: node features x [N, 8], an edge list [2, E], one target. No other
    # input has x's dim 0, so its changes are no batch size (no drop_last advice), and the
    # edge count is no tokenizer's padding (no max_length in the table).
    b = Builder(tmp_path / "r.json")
    sizes = [(20, 56), (28, 71), (20, 59), (28, 62), (20, 53), (24, 48), (20, 79), (24, 74)]
    for n, e in sizes:
        b.step({"x": [n, 8], "edges": [2, e], "y": [1]}, compile_ms=500, opt=1)
    a = b.done()
    kinds = {f.input: f for f in a.findings if f.cause == "input_shape"}
    assert {k: (f.kind, f.dim) for k, f in kinds.items()} == {"x": ("dynamic_size", 0), "edges": ("dynamic_size", 1)}
    assert kinds["edges"].title.startswith("edges' size changes (") and "values of dim 1: " in kinds["edges"].title
    assert "drop_last" not in kinds["x"].advice and "tokenize" not in kinds["x"].advice
    strategies = [r["strategy"] for r in kinds["edges"].what_if or []]
    assert strategies[1] == "a multiple of 8" and strategies[-1] == "the largest size (79)"
    # rows shared with another input: a batch size, as before
    b = Builder(tmp_path / "b.json")
    for n in (8, 8, 8, 5, 8, 6, 8, 7):
        b.step({"x": [n, 8], "y": [n]}, compile_ms=500, opt=1)
    shape = [(f.kind, f.input) for f in b.done().findings if f.cause == "input_shape"]
    assert shape == [("batch_size_change", "x")]


def test_a_read_compiling_again_within_a_warm_up_step_is_warm_up_but_told(tmp_path: Path) -> None:
    # An RL episode a step: .item() on each action, with no barrier between env steps, runs
    # a longer graph each time, and each compiles. All of them in step 0: warm-up's by the one
    # definition (every compile of the first two training steps, reads included), and the
    # read's finding still tells the growth, with the advice to sync after it.
    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    w.write({"type": "site", "id": 5, "kind": "item", "file": "/u/rl.py", "line": 20, "func": "main",
             "via": None, "code": "state, r, done = env_step(state, action.item())"})
    t = T0
    for i, reads in enumerate((6, 4, 3, 3)):
        t0 = t
        for r in range(reads):
            new = i == 0  # graphs 1-6 in step 0; the shorter episodes after reuse them
            w.write({"type": "sync", "i": i, "site": 5, "t0": t + 0.001, "t1": t + 0.2, "x": 1,
                     **({"u": 1} if new else {})})
            if new:  # each a longer graph: 25, 31, 37 ... nodes
                w.write({"type": "compile", "i": i, "t": t + 0.15, "ns": 1.5e8, "at": "step"})
                w.write({"type": "graph_sizes", "samples": [[t + 0.151, 25 + 6 * r]]})
            t += 0.25
        uncached = 6 if i == 0 else 0
        w.write({"type": "step", "i": i, "t0": t0, "tb": t, "t1": t + 0.01, "barrier": "mark_step", "o": 1, "bc": 1,
                 "c": {"MarkStep": 1, "ExecuteComputation": reads + 1, "CachedCompile": reads + 1 - uncached,
                       **({"UncachedCompile": uncached} if uncached else {})}})
        t += 0.02
    w.write({"type": "end", "t": t, "status": "ok", "steps": 4})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    assert a.totals.compiles == 6 and a.totals.recompiles == 0  # all in step 0: warm-up
    f = [f for f in a.findings if f.cause == "implicit_sync"]
    assert len(f) == 1 and f[0].compiles == 0
    assert any(e.startswith("it compiled 6 graphs within step 0 alone: each read in a step ran a longer graph")
               for e in f[0].evidence)
    assert "Put torch_xla.sync() right after the read" in f[0].advice
    # the overview says nothing recompiled after warm-up
    from xprof.report.prose import headline

    assert not any("were not warm-up" in line for line in headline(a))
    # the live notices count them the same way
    import json

    from xprof.recorder.live import LiveNotices

    live = LiveNotices(T0)
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:]])
    assert live._recompiles == 0


def test_a_checkpoint_saved_before_the_barrier_is_no_expected_cost(tmp_path: Path) -> None:
    # torch.save every 5 steps, before mark_step: reading the pending tensors compiled parts
    # of the step's graph. Not "expected": the first thing to change, with the fix to save
    # after the barrier. The same save after it (nothing compiled) stays info.
    def run(name: str, compile_ms: float) -> Any:
        b = Builder(tmp_path / name)
        for i in range(20):
            saves = i % 5 == 4
            b.step({"x": [8, 4]}, compile_ms=500 if i < 2 else 0, opt=1,
                   read=("cpu", 16, "torch.save(model.state_dict(), path)") if saves else None,
                   read_compile_ms=compile_ms if saves else 0.0,
                   site={"via": "torch.serialization.save"} if saves else None)
        return b.done()

    f = [f for f in run("mid.json", 300).findings if f.kind == "checkpoint"]
    assert len(f) == 1 and f[0].severity == "warning" and "(expected)" not in f[0].title
    assert "Save right after torch_xla.sync()" in f[0].advice
    after = [f for f in run("after.json", 0).findings if f.kind == "checkpoint"]
    assert len(after) == 1 and after[0].severity == "info" and "(expected)" in after[0].title


def test_a_partial_batch_under_the_hf_trainer_names_its_setting(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for i in range(12):
        logs = i % 4 == 3  # the Trainer's logging reads the loss (a site via transformers.trainer)
        b.step({"x": [8 if i % 6 == 5 else 16, 4]}, compile_ms=500 if i in (0, 1, 5) else 0, opt=1,
               read=("item", 40, "tr_loss_scalar = self._nested_gather(tr_loss).mean().item()") if logs else None,
               site={"via": "transformers.trainer.Trainer._maybe_log_save_evaluate"} if logs else None)
    f = [f for f in b.done().findings if f.kind == "partial_batch"]
    assert len(f) == 1 and "TrainingArguments(dataloader_drop_last=True), which leaves" in f[0].advice


def test_a_read_inside_a_user_function_names_the_call(tmp_path: Path) -> None:
    # torchvision's MetricLogger.update() reads .item(); called at line 32 before the barrier
    # (a site of its own, with the caller) it is the finding, and says which call.
    b = Builder(tmp_path / "r.json")
    for i in range(10):
        b.step({"x": [8, 4]}, compile_ms=500 if i < 2 else 0, opt=1, read=("item", 17, "v = v.item()"),
               site={"func": "update", "caller": ["/u/train.py", 32, "ml.update(loss=loss)"]})
    (f,) = b.done().findings
    assert f.title.startswith(".item() at train.py:17 (called from train.py:32) forces a host sync")
    assert "update() was called from train.py:32: ml.update(loss=loss)" in f.evidence


def test_one_line_read_through_two_calls_of_its_function_is_one_finding(tmp_path: Path) -> None:
    # minGPT's eval_split() reads int(t) at one line and is called for the train and the test
    # split (two sites, one per caller): one finding at the line, naming both calls.
    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    for sid, line, code in ((1, 193, "eval_split('train')"), (2, 194, "eval_split('test')")):
        w.write({"type": "site", "id": sid, "kind": "scalar", "file": "/u/adder.py", "line": 173,
                 "func": "eval_split", "via": None, "code": "print(int(t))", "caller": ["/u/adder.py", line, code]})
    for i in range(8):
        t = T0 + i
        for k, sid in enumerate((1, 2)):
            t0 = t + 0.1 * (k + 1)
            w.write({"type": "sync", "i": i, "site": sid, "t0": t0, "t1": t0 + 0.01, "x": 1})
        w.write({"type": "step", "i": i, "t0": t, "tb": t + 0.5, "t1": t + 0.6, "barrier": "sync",
                 "c": {"MarkStep": 1, "ExecuteComputation": 3}, "o": 1, "bw": 1})
    w.write({"type": "end", "t": T0 + 9, "status": "ok", "exception": None, "steps": 8})
    w.close()
    (f,) = analyze(load_run(tmp_path / "r.json")).findings
    assert f.count == 16 and "at adder.py:173 (called from adder.py:193 and :194)" in f.title, f.title
    assert sum("eval_split() was called from" in e for e in f.evidence) == 2


def test_steps_run_in_worker_processes_are_said(tmp_path: Path) -> None:
    # xprof run around a script that trains in torch_xla.launch workers: no step here, but
    # torch_xla's debug output (from the worker) counted compiles and executions.
    from xprof.report.prose import exit_lines, headline, next_step

    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    w.write({"type": "end", "t": T0 + 7, "status": "ok", "steps": 0})
    w.write({"type": "debug", "kind": "capture", "level": "2", "source": "PT_XLA_DEBUG_FILE",
             "compiles": 2, "executions": 21})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    assert headline(a)[1].startswith("Yet torch_xla's debug output counted 2 compiles and 21 executions")
    assert next_step(a)[0] == "Nothing to judge here."
    assert "worker processes" in exit_lines(a, "r.json")[2]


def test_a_graph_cut_mid_step_compiles_for_a_new_shape(tmp_path: Path) -> None:
    # A CTC loss on the CPU cuts each step: for a new input length the graph before the cut
    # compiles mid-step, outside any read, as the barrier's does; both are the shape's.
    b = Builder(tmp_path / "r.json")
    for i, n in enumerate((30, 30, 30, 37, 30, 44)):
        if i in (0, 3, 5):
            b.w.write({"type": "compile", "i": b.i, "t": b.t + 0.002, "ns": 2e8, "at": "step"})
        b.step({"x": [4, n, 20]}, compile_ms=500 if i in (0, 1, 3, 5) else 0, opt=1)
    a = b.done()
    assert not [f for f in a.findings if f.cause == "unknown"]
    (f,) = [f for f in a.findings if f.cause == "input_shape"]
    assert f.input == "x" and f.compiles == 4  # lengths 37 and 44: the cut graph and the barrier's


def test_a_curriculum_of_lengths_reads_as_stages_not_padding(tmp_path: Path) -> None:
    # sequence length 16 for 8 steps, then 32, then 48 (none back): a compile per stage
    b = Builder(tmp_path / "r.json")
    for i in range(24):
        b.step({"ids": [16, 16 * (1 + i // 8)]}, compile_ms=500 if i in (0, 1, 8, 16) else 0, opt=1)
    (f,) = b.done().findings
    assert f.title.startswith("ids took 3 sizes of dim 1 in stages (16 for 8 steps, 32 for 8 steps, 48 for 8 steps)")
    assert "pad every stage to the largest size" in f.advice and "tokenize" not in f.advice
    # lengths that come back (padding per batch) are no stages
    b = Builder(tmp_path / "p.json")
    for i, n in enumerate((16, 16, 16, 32, 16, 48, 32, 16, 48, 16)):
        b.step({"ids": [16, n]}, compile_ms=500 if i in (0, 1, 3, 5) else 0, opt=1)
    assert "stages" not in b.done().findings[0].title


def test_an_eval_pass_with_no_grad_around_its_forward_is_not_told_to_use_it(tmp_path: Path) -> None:
    # `with torch.no_grad(): out = model(x)` inside the eval loop: the barriers of the pass
    # saw grad turned off, but its last one (the loader's end, after the with block) did not.
    b = Builder(tmp_path / "r.json")
    for i in range(12):
        b.step({"x": [8, 4]}, compile_ms=500 if i < 2 else 0, opt=1)
        if i == 5:
            for k in range(3):
                b.step({"x": [8, 4]}, compile_ms=300 if k == 0 else 0,
                       fields={"ev": 1, **({"gd": 1} if k < 2 else {})})
    (f,) = [f for f in b.done().findings if f.kind == "eval_pass"]
    assert "under no_grad" in f.advice and "wrap it in torch.no_grad()" not in f.advice


def test_reads_made_inside_ops_are_counted_from_the_transfers(tmp_path: Path) -> None:
    # Adam with a tensor learning rate: addcdiv_(value=step_size) turns a tensor into a number
    # in C++, twice a step, running the graph before it; one hooked .item() a step besides.
    from xprof.report.prose import headline

    b = Builder(tmp_path / "r.json")
    for i in range(10):
        b.step({"x": [8, 4]}, compile_ms=500 if i < 2 else 0, opt=1, read=("item", 20, "print(loss.item())"),
               fields={"c": {"MarkStep": 1, "ExecuteComputation": 4, "CachedCompile": 4,
                             "aten::_local_scalar_dense": 3, "xla::_to_cpu": 3,
                             **({"UncachedCompile": 1} if i < 2 else {})}})
    text = " ".join(headline(b.done()))
    assert "About 20 more reads came from inside ops" in text and "tensor learning rate" in text


def test_two_value_dependent_shapes_in_the_same_steps_say_so() -> None:
    from xprof.analysis.findings import same_steps_value_shapes
    from xprof.analysis.model import Finding

    def dd(title: str, compiles: int) -> Finding:
        return Finding(id=title, cause="data_dependent", kind="data_dependent", title=title, count=10,
                       compiles=compiles, seconds=1.0, compile_seconds=1.0, execute_seconds=0.0, advice="",
                       evidence=[], steps=list(range(2, 12)))

    mask = dd("Boolean-mask indexing at det.py:22 gives a value-dependent shape every step: 13 recompiles", 13)
    nz = dd("nonzero() at det.py:23 gives a value-dependent shape every step: 0 recompiles", 0)
    same_steps_value_shapes([mask, nz])
    assert mask.evidence == ["nonzero() at det.py:23 has a value-dependent shape in the same steps: their "
                             "recompiles are counted here, but fixing this one alone leaves that one's"]
    assert nz.evidence[0].endswith("their recompiles are counted there; fix both")


def test_the_recorder_keeps_each_dynamo_entrys_first_failure() -> None:
    from xprof.analysis.findings import first_failures
    from xprof.recorder.hooks.dynamo import _first_per_entry

    # 8 recompiles re-check 1 + 2 + ... + 8 entries: 36 failures, 8 of them firsts
    raw = [f"0/{k}: tensor 'args[0]' size mismatch at index 0. expected {4 + k}, actual {5 + n}"
           for n in range(8) for k in reversed(range(n + 1))]
    kept = _first_per_entry(raw)
    assert len(raw) == 36 and [r.split(":")[0] for r in kept] == [f"0/{k}" for k in range(8)]
    # what the analysis reads from them is what it reads from the full list
    assert ([r for _, r in first_failures([{"reasons": kept}])]
            == [r for _, r in first_failures([{"reasons": raw}])])
    assert _first_per_entry(["a", "a"]) == ["a", "a"]  # (no compile id: each kept)


def test_a_size_guard_names_the_input_its_dim_and_the_sizes_it_took() -> None:
    from xprof.analysis.findings import commonest_guard, first_failures, size_guard

    firsts = [r for _, r in first_failures(_BERT_GUARDS)]
    _, example, _ = commonest_guard(firsts)
    assert size_guard(firsts, example) == ("input_ids", 1, [12, 17, 23, 30])
    # the one-off problem_type guard is no size; a positional argument keeps dynamo's name
    assert size_guard(firsts, firsts[0]) is None
    assert size_guard(["0/0: tensor 'args[0]' size mismatch at index 0. expected 8, actual 3"],
                       "0/0: tensor 'args[0]' size mismatch at index 0. expected 8, actual 3") == ("args[0]", 0, [8, 3])


def _no_barrier_run(path: Path, tail_graphs: int = 0, eager: bool = False) -> Any:
    """10 optimizer steps and no barrier; the loss read at steps 4 and 9 compiles 0.4 s, then
    0.7 s (each graph holds every step so far). ``tail_graphs``: graphs ran outside the
    reads; ``eager``: ops compiled one by one (eager mode: no barrier needed)."""
    w = RunWriter(path, {"name": "unit", "started_unix": T0, "meta": {}})
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/u/train.py", "line": 15, "func": "main",
             "via": None, "code": "print(loss.item())"})
    for t, ms in ((T0 + 1.0, 400.0), (T0 + 2.0, 700.0)):
        w.write({"type": "compile", "i": 0, "t": t + ms / 1e3, "ns": ms * 1e6, "at": "step"})
        w.write({"type": "sync", "i": 0, "site": 0, "t0": t, "t1": t + ms / 1e3 + 0.01, "u": 1, "x": 1})
    if eager:
        w.write({"type": "compile", "i": 0, "t": T0 + 2.8, "ns": 5e6, "at": "op"})
    end: dict[str, Any] = {"type": "end", "t": T0 + 3.0, "status": "ok", "exception": None, "steps": 0,
                           "tail": {"UncachedCompile": 2, "ExecuteComputation": 2}, "tail_opt": 10}
    if tail_graphs:
        end["tail_graphs"] = tail_graphs
    w.write(end)
    w.close()
    return analyze(load_run(path))


def test_optimizer_steps_that_never_reach_a_barrier_are_the_finding(tmp_path: Path) -> None:
    a = _no_barrier_run(tmp_path / "r.json")
    (f,) = a.findings
    assert (f.cause, f.count, f.compiles, f.line) == ("no_barrier", 10, 2, 15)
    assert f.title == ("No step barrier: 10 optimizer steps ran without one, so each graph held every step "
                       "since the start: 2 compiles, 1.12 s")
    assert "the graphs grew with the steps they held: compiles of 400.0 ms to 700.0 ms" in f.evidence
    assert "torch_xla.sync()" in f.advice
    # the compiles after the last barrier are timed, not dropped as orphans
    assert a.totals.compile_seconds == pytest.approx(1.1) and not any("Ignored" in n for n in a.notes)
    assert (a.totals.compiles, a.totals.recompiles) == (2, 0)
    # eager mode runs each op as it comes: no barrier needed, no finding
    eager = _no_barrier_run(tmp_path / "e.json", tail_graphs=30, eager=True)
    assert not [g for g in eager.findings if g.cause == "no_barrier"]
    # a lazy loop whose library op falls back to the CPU (boolean-mask indexing in a graph
    # library) materializes a few graphs outside the reads: still a missing barrier
    fallback = _no_barrier_run(tmp_path / "f.json", tail_graphs=2)
    assert [g.count for g in fallback.findings if g.cause == "no_barrier"] == [10]
    assert fallback.totals.steps == 0 and not any("after the last barrier" in n for n in fallback.notes)


def test_padding_what_if_counts_graphs_with_the_other_padded_input(tmp_path: Path) -> None:
    # A seq2seq batch: input_ids and labels each padded to their own longest.
    b = Builder(tmp_path / "r.json")
    seen: set[tuple[int, int]] = set()
    for n, m in [(12, 5), (17, 5), (12, 6), (23, 5), (17, 6), (30, 6), (12, 5), (23, 6)]:
        b.step({"input_ids": [4, n], "labels": [4, m]}, compile_ms=0 if (n, m) in seen else 500)
        seen.add((n, m))
    a = b.done()
    pad = next(f for f in a.findings if f.input == "input_ids")
    assert pad.kind == "dynamic_padding"
    rows = {r["strategy"]: r for r in pad.what_if or []}
    # Distinct (input_ids, labels) shapes after warm-up: (17,5) (12,6) (23,5) (17,6) (30,6) (12,5) (23,6).
    assert rows["as recorded"]["graphs"] == 7
    # The table pads labels the same way (the advice asks for it): to 30 and labels to their
    # largest (6), or both to a multiple of 32: one graph.
    assert rows["padding='max_length' (max_length=30)"]["graphs"] == 1
    assert rows["pad_to_multiple_of=32"]["graphs"] == 1
    # pad_to_multiple_of=8: 12 and 17 -> 16 and 24, 23 -> 24, 30 -> 32; labels' 5 and 6 -> 8.
    assert rows["pad_to_multiple_of=8"]["graphs"] == len({(16, 8), (24, 8), (32, 8)})
    # One more graph costs the finding's seconds over its recorded graphs after warm-up's (12
    # and 17 ran in steps 0 and 1); padded, warm-up has 16 and 24, so 32 is the one graph more.
    each = pad.seconds / 5
    assert rows["pad_to_multiple_of=8"]["compile_seconds"] == pytest.approx(each, abs=1e-3)
    assert rows["pad_to_multiple_of=8"]["saved_seconds"] == pytest.approx(pad.seconds - each, abs=1e-3)
    # Padding input_ids alone would leave labels' two lengths: two graphs.
    assert pad.evidence[0] == ("labels changes shape on its own: padding input_ids alone leaves at least 2 graphs; "
                               "pad it the same way (the table does, each to its own multiple or largest size)")
    # An attention mask padded with the ids by the same collate call: padded alike, one graph.
    b = Builder(tmp_path / "r2.json")
    for n in [12, 17, 12, 23, 17, 30]:
        b.step({"input_ids": [4, n], "attention_mask": [4, n], "labels": [4]}, compile_ms=500)
    f = next(f for f in b.done().findings if f.input == "input_ids")
    graphs = {r["strategy"]: r["graphs"] for r in f.what_if or []}
    assert graphs["as recorded"] == 4 and graphs["padding='max_length' (max_length=30)"] == 1
    assert not any("on its own" in e or "too" in e for e in f.evidence)


def test_token_budget_batches_change_rows_and_length(tmp_path: Path) -> None:
    # Batches filled up to 64 tokens: fewer rows when they are longer.
    b = Builder(tmp_path / "r.json")
    shapes = [(8, 8), (4, 16), (8, 8), (2, 30), (5, 12), (4, 16), (2, 31), (5, 12), (8, 8), (3, 20)]
    seen: set[tuple[int, int]] = set()
    for rows_, n in shapes:
        b.step({"src": [rows_, n]}, compile_ms=0 if (rows_, n) in seen else 500)
        seen.add((rows_, n))
    f = b.done().findings[0]
    assert f.kind == "dynamic_padding" and f.dim == 1
    assert "and its batch size changes with it (5 sizes: 2, 3, 4, 5, 8)" in f.title
    assert "token budget" in f.advice
    rows = {r["strategy"]: r for r in f.what_if or []}
    # Padding the length alone to the longest leaves one graph per number of rows.
    assert rows["as recorded"]["graphs"] == 6 and rows["padding='max_length' (max_length=31)"]["graphs"] == 5
    assert rows["padding='max_length' (max_length=31)"]["compile_seconds"] > 0
    assert f.evidence[0].startswith("its batch size changes too (5 sizes: 2, 3, 4, 5, 8): padding dim 1 alone "
                                    "leaves at least 5 graphs")


def test_read_advice_follows_what_the_reads_did(tmp_path: Path) -> None:
    # Forced every step: the graph ran early; advice to log in a closure, or read less often.
    b = Builder(tmp_path / "every.json")
    for _ in range(12):
        b.step(read=("item", 42, "print(loss.item())"))
    f = b.done().findings[0]
    assert "forces a host sync every step" in f.title
    assert f.advice.endswith("Or read it only every N steps.") and "add_step_closure" in f.advice
    # Forced every 5 steps: it already reads less often, so that is not the advice.
    b = Builder(tmp_path / "every5.json")
    for k in range(21):
        b.step(read=("item", 42, "print(loss.item())") if k % 5 == 3 else None)
    f = b.done().findings[0]
    assert f.pattern == "every 5 steps" and f.advice.endswith("It already reads every 5 steps.")
    assert "every N steps" not in f.advice
    # Right after the barrier, the value computed there: nothing ran early, the host waited.
    b = Builder(tmp_path / "ready.json")
    for _ in range(12):
        b.step(read=("to_cpu", 20, "print(loss.cpu().item())"), read_ran=False)
    f = b.done().findings[0]
    assert f.title.startswith(".cpu() / .to('cpu') at train.py:20 waits for the device every step: 12 reads")
    assert f.advice.startswith("It ran no graph early") and "run_async=True" in f.advice
    assert "mid-step runs its graph early" not in f.advice
    # A decision on a ready value (a graph break's branch inside torch.compile): still made on
    # the host, so a step closure is no answer: keep it on the device.
    b = Builder(tmp_path / "cond.json")
    for _ in range(12):
        b.step(read=("bool", 13, "if h.mean() > 0.3:"), read_ran=False)
    f = b.done().findings[0]
    assert "waits for the device" in f.title and "torch.where" in f.advice and "run_async" not in f.advice


def test_a_boolean_mask_assignment_gets_the_where_advice(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for _ in range(10):
        b.step({"ids": [8, 32]}, compile_ms=400, read=("mask_assign", 24, "labels[~masked] = -100"))
    f = b.done().findings[0]
    assert f.cause == "data_dependent" and f.title.startswith(
        "Boolean-mask assignment (t[mask] = v) at train.py:24 gives a value-dependent shape every step")
    assert "masked_fill_" in f.advice and "torch.where(mask, v, t)" in f.advice


def test_a_new_graph_every_step_is_not_called_cached(tmp_path: Path) -> None:
    # A random crop with Python offsets: same input shapes, a new graph each step.
    b = Builder(tmp_path / "r.json")
    for _ in range(10):
        b.step({"x": [16, 3, 32, 32]}, compile_ms=500, nodes=65)  # the same ops, other constants
    f = b.done().findings[0]
    assert f.kind == "graph_every_step"
    assert f.title == ("The graph changed at every step with the same input shapes: 8 new graphs in 8 steps, "
                       "none reused, 4.00 s")
    assert "cached" not in f.title and "device tensors" in f.advice
    # Two variants taking turns from step 3: compiled once each, cached afterwards.
    b = Builder(tmp_path / "r2.json")
    for k in range(12):
        b.step({"x": [16, 3, 32, 32]}, compile_ms=500 if k in (0, 3) else 0, nodes=70 if k < 3 or k % 2 else 71)
    f = b.done().findings[0]
    assert f.kind == "graph_change" and f.title.endswith("once, cached afterwards")


def test_a_sync_every_4_optimizer_steps_and_the_3_left_pending(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for k in range(10):
        b.step({"x": [16, 32]}, compile_ms=500 if k < 2 else 0, opt=1 if k == 0 else 4)
    a = b.done(tail_opt=3)
    assert a.totals.steps == 10 and a.totals.optimizer_steps == 40
    from xprof.report.prose import headline, next_step

    assert any(line.startswith("Each step barrier closed about 4 optimizer steps (37 in all)") for line in headline(a))
    f = a.findings[0]
    assert (f.kind, f.minor) == ("never_ran", False)
    assert f.title.startswith("The last 3 optimizer steps never ran: no step barrier after them")
    assert next_step(a)[0].startswith("Change this first: The last 3 optimizer steps never ran")
    # A read after the loop runs them (a final loss.item(), xm.save): not this finding.
    b = Builder(tmp_path / "r2.json")
    for k in range(10):
        b.step({"x": [16, 32]}, compile_ms=500 if k < 2 else 0, opt=1)
    a = b.done(tail_opt=1)
    assert a.totals.optimizer_steps == 11 and not any(line.startswith("Each step barrier") for line in headline(a))
    assert [f.kind for f in a.findings] == ["never_ran"]


def test_a_size_guard_is_quoted_over_a_grad_mode_guard_on_a_tie() -> None:
    from xprof.analysis.findings import commonest_guard

    reasons = ["0/0: tensor 'x' size mismatch at index 0. expected 16, actual 6",
               "0/1: GLOBAL_STATE changed: grad_mode "]
    assert "size mismatch" in commonest_guard(reasons)[1]
    assert "size mismatch" in commonest_guard(list(reversed(reasons)))[1]
    # More grad-mode failures than size ones: the count still decides.
    assert "grad_mode" in commonest_guard([*reasons, "0/2: GLOBAL_STATE changed: grad_mode "])[1]


def test_a_short_accumulation_window_is_named_as_such(tmp_path: Path) -> None:
    # 10 batches an epoch, 4 micro-batches a step: windows of 4, 4, 2 (HF Trainer with
    # gradient_accumulation_steps=4). Same shapes throughout; the 2-window graph is its own.
    b = Builder(tmp_path / "r.json")
    full = {"input_ids": [4, 16], "input_ids#2": [4, 16], "input_ids#3": [4, 16], "input_ids#4": [4, 16]}
    short = {"input_ids": [4, 16], "input_ids#2": [4, 16]}
    for k in range(9):
        b.step(short if k % 3 == 2 else full, compile_ms=500 if k in (0, 1, 2) else 0)
    f = b.done().findings[0]
    assert (f.cause, f.kind, f.input) == ("input_shape", "micro_batches", "input_ids")
    assert f.title == ("Steps accumulating 2 micro-batches instead of 4 compiled graphs of their own: "
                       "1 recompile, 0.50 s")
    assert "gradient_accumulation_steps" in f.advice and "?" not in f.title


def test_a_graph_that_lost_an_input_names_the_baked_in_scalar(tmp_path: Path) -> None:
    # A cosine schedule near its end: 1 - lr * weight_decay rounds to 1.0 in float32 and
    # torch_xla bakes it in as a constant: one graph input fewer, same input shapes.
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step({"x": [4, 16]}, compile_ms=500 if k in (0, 1, 9) else 0, nodes=1209 if k == 9 else 1210)
    for n_inputs in (100, 100, 99):
        b.w.write({"type": "debug", "kind": "compile", "cause": "user torch_xla.sync", "cause_kind": "barrier",
                   "inputs": n_inputs, "frames": [], "user_frames": []})
    f = b.done().findings[0]
    assert f.kind == "graph_change"
    assert any(e.startswith("torch_xla's debug records: the new graph takes 99 inputs where the step's graph "
                            "took 100") and "0 and 1" in e for e in f.evidence)
    assert "1 - lr * weight_decay rounds to 1.0" in f.advice


def test_a_guard_on_a_python_number_gets_the_tensor_advice() -> None:
    import pandas as pd

    from xprof.analysis.findings import dynamo_finding, first_failures
    from xprof.diagnosis.cause import Cause
    from xprof.diagnosis.keys import FindingKey

    # As torch 2.9 words it: the guard, then the guarded source as a comment.
    # Each recompile re-checks every cached entry, newest first: 0/0; 0/1, 0/0; 0/2, 0/1, 0/0 ...
    guards = [{"func": "forward", "file": "/u/train.py", "line": 11, "reasons": [
        f"0/{k}: step == {k}                                    "
        "# scale = 1.0 + 0.01 * step  # u/train.py:15 in forward"
        for k_max in range(1, 7) for k in reversed(range(k_max))]}]
    firsts = [r for _, r in first_failures(guards)]
    assert firsts[-1] == "0/5: step == 5"  # the source comment left out
    rows = pd.DataFrame({"ms": [350.0], "step": [9]})
    f = dynamo_finding(FindingKey("dynamo"), Cause("dynamo", FindingKey("dynamo")), rows, pd.DataFrame(), guards)
    assert "6 of 6 dynamo retraces: 0/5: step == 5)" in f.title
    assert "specialized on the Python number step" in f.advice and "torch.tensor(value" in f.advice


def test_torch_compile_giving_up_in_warm_up_is_a_finding_of_its_own(tmp_path: Path) -> None:
    # dynamo hit its recompile limit (set to 1) in the second step: its retraces were all
    # warm-up, so no dynamo finding takes the mark; each new size compiles at the barrier.
    b = Builder(tmp_path / "r.json")
    for k in range(8):
        if k == 1:
            b.w.write({"type": "debug", "kind": "dynamo_limit", "i": 1, "t": b.t, "limit": "recompile_limit",
                       "value": 1, "func": "inner", "file": "/x/torch/_dynamo/external_utils.py", "line": 66,
                       "reason": "0/0: tensor 'args[0]' size mismatch at index 0. expected 4, actual 5"})
        b.step({"x": [4 + k, 8]}, compile_ms=500, opt=1)
    a = b.done()
    dyn = [f for f in a.findings if f.cause == "dynamo"]
    assert len(dyn) == 1 and dyn[0].kind == "dynamo_limit" and not dyn[0].minor and dyn[0].seconds == 0
    assert dyn[0].title == ("torch.compile gave up on the compiled module's forward at step 1 "
                            "(torch._dynamo.config.recompile_limit = 1) and runs it uncompiled from then on")
    assert "(6 compiles after step 1, counted in the other findings)" in dyn[0].evidence[0]
    assert any(f.cause == "input_shape" and f.input == "x" and f.compiles == 6 for f in a.findings)
    from xprof.report.prose import costly

    assert dyn[0] in costly(a)  # wanted, though its time is not measured


def test_a_loop_that_raised_before_its_first_step_is_not_called_clean(tmp_path: Path) -> None:
    from xprof.report.prose import next_step

    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    w.write({"type": "end", "t": T0 + 0.01, "status": "error", "exception": "RuntimeError: fused=True", "steps": 0})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    first, how = next_step(a)
    assert first == "Nothing to judge yet." and "raised before its first step" in how
    # the exit lines of xprof run and of watch() (the same function, on the same file)
    from xprof.diagnosis.terms import NOTHING_TO_JUDGE
    from xprof.report.prose import exit_lines

    assert exit_lines(a, "r.json")[2] == NOTHING_TO_JUDGE


def test_a_read_in_the_forward_that_raised_is_not_the_first_thing_to_change(tmp_path: Path) -> None:
    # GPT-2 with torch.utils.checkpoint on XLA: the model's mask check reads once, then the
    # checkpoint raises before the first barrier. The error is what to fix.
    from xprof.diagnosis.terms import NOTHING_TO_JUDGE
    from xprof.recorder.live import LiveNotices
    from xprof.report.prose import exit_lines, next_step

    site = {"type": "site", "id": 0, "kind": "bool", "file": "/u/train.py", "line": 12, "func": "<module>",
            "via": "torch.nn.modules.module.Module._wrapped_call_impl", "code": "out = model(input_ids=x)"}
    read = {"type": "sync", "i": 0, "site": 0, "t0": T0 + 0.1, "t1": T0 + 0.15, "u": 1, "x": 1}
    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    w.write(site)
    w.write({"type": "compile", "i": 0, "t": T0 + 0.14, "ns": 5e7, "at": "step"})
    w.write(read)
    w.write({"type": "end", "t": T0 + 1.2, "status": "error", "steps": 0,
             "exception": "AttributeError: module 'torch' has no attribute 'xla'"})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    assert a.findings and next_step(a)[0] == "Nothing to judge yet."
    lines = exit_lines(a, "r.json")
    assert lines[2] == NOTHING_TO_JUDGE and "in 1.20 s, then the loop raised AttributeError; " in lines[0]
    live = LiveNotices(started=T0)
    live.feed([site, read])
    assert live.said == []  # (a read in the step that raised is said at no barrier)


def test_a_read_compiling_for_an_eval_batch_is_the_eval_passs(tmp_path: Path) -> None:
    # A model's mask check reads in every forward; in the eval pass (batch 8 against 4) it
    # compiles again for the new shape: the pass's compile, not a training input's change.
    b = Builder(tmp_path / "r.json")
    train = {"o": 1, "bw": 1}
    for k in range(12):
        if k in (6, 7):
            b.step({"input_ids": [8, 16]}, compile_ms=300 if k == 6 else 0, nodes=40, fields={"ev": 1},
                   read=("item", 30, "if (mask == 0).any():"), read_compile_ms=100 if k == 6 else 0)
        else:
            b.step({"input_ids": [4, 16]}, compile_ms=500 if k < 2 else 0, fields=train,
                   read=("item", 30, "if (mask == 0).any():"), read_compile_ms=100 if k < 2 else 0)
    a = b.done()
    # (the read runs the device early every step: a share of every step, not minor)
    assert [f.kind for f in a.findings if not f.minor] == ["eval_pass", "item"]
    assert a.findings[0].compiles == 2 and not any(f.cause == "input_shape" for f in a.findings)


def test_a_read_compiling_in_an_eval_pass_with_training_shapes_is_the_passs(tmp_path: Path) -> None:
    # The same mask check, eval batches of the training shape (fixed padding): the read still
    # compiles in the pass (its graph runs with grad off). The compile is the pass's, as the
    # pass's barrier compiles are; the read keeps its waits (rule read_in_eval_pass).
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        ev = k in (6, 7)
        b.step({"input_ids": [4, 16]}, compile_ms=300 if k in (0, 1, 6) else 0, nodes=40 if ev else 70,
               fields={"ev": 1} if ev else {"o": 1, "bw": 1},
               read=("item", 30, "if (mask == 0).any():"), read_compile_ms=100 if k in (0, 6) else 0)
    a = b.done()
    passes = [f for f in a.findings if f.kind == "eval_pass"]
    assert len(passes) == 1 and passes[0].compiles == 2  # the barrier's and the read's
    assert not any(f.kind == "item" and f.compiles for f in a.findings)
    assert a.compiles.loc[a.compiles["at"] == "step", "cause"].tolist() == ["warmup", "graph_change"]


def test_graphs_that_trade_an_input_for_a_constant_either_way_name_the_scalars(tmp_path: Path) -> None:
    # A KL weight ramped 0 -> 1 (beta = min(1, step / 10)): it meets Adam's 1 - 0.9 at step 1
    # (one input for both), is its own input at step 2, meets the model's 0.5 at step 5 and
    # becomes the constant 1 at step 10. Same ops throughout (201 nodes), inputs 30, 31, 30, 30
    # (recorded: a VAE under xprof run, PT_XLA_DEBUG_LEVEL=2 saying only "user torch_xla.sync").
    b = Builder(tmp_path / "r.json")
    for k in range(14):
        b.step({"x": [32, 32]}, compile_ms=500 if k in (0, 1, 2, 5, 10) else 0, nodes=211 if k == 0 else 201)
    for n_inputs in (18, 30, 31, 30, 30):
        b.w.write({"type": "debug", "kind": "compile", "cause": "user torch_xla.sync", "cause_kind": "barrier",
                   "inputs": n_inputs, "frames": [], "user_frames": []})
    f = b.done().findings[0]
    assert f.kind == "graph_change" and f.advice.startswith("A value the step's graph took as an input is a constant")
    assert ("torch_xla's debug records: the step's graph took 30 inputs, then 31 at step 2, 30 at step 5 and "
            "30 at step 10, with the same ops") in " ".join(f.evidence)
    # Other ops at each change (a graph that changed for another reason): no scalar evidence.
    b = Builder(tmp_path / "r2.json")
    for k in range(14):
        b.step({"x": [32, 32]}, compile_ms=500 if k in (0, 1, 2, 5, 10) else 0,
               nodes=201 + 10 * ((k >= 2) + (k >= 5) + (k >= 10)))
    for n_inputs in (18, 30, 31, 30, 30):
        b.w.write({"type": "debug", "kind": "compile", "cause": "user torch_xla.sync", "cause_kind": "barrier",
                   "inputs": n_inputs, "frames": [], "user_frames": []})
    f = b.done().findings[0]
    assert f.kind == "graph_change" and not any("debug records" in e for e in f.evidence)


def test_two_tasks_taking_turns_say_the_first_step_had_the_shape(tmp_path: Path) -> None:
    # Multi-task training: an image batch x [16, 64] and a tabular one x [32, 12] take turns.
    # Each task's second step compiles its steady graph (the first step's is a one-off), so
    # step 2's shape is not new: only step 0 had it (recorded: a shared trunk, Adam).
    import json

    from xprof.recorder.live import LiveNotices

    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step({"x": [16, 64] if k % 2 == 0 else [32, 12]}, compile_ms=500 if k < 4 else 0)
    a = b.done()
    f = a.findings[0]
    assert (f.cause, f.input) == ("input_shape", "x")
    assert ("step 2: x [32, 12] -> [16, 64]; these inputs ran before only in the one-off first step, whose "
            "graph differs") in f.evidence
    said: list[str] = []
    live = LiveNotices(T0, said.append)
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:-1]])
    assert said[0].startswith("xprof: step 2 recompiled: x took shape [16, 64], which only the one-off first "
                              "step had; 1 recompile so far")


def test_a_graph_change_in_steps_that_read_a_tensor_condition_names_the_condition(tmp_path: Path) -> None:
    # `if loss > THR: loss = loss * 0.5` every step: the loss fell below the threshold at
    # step 7, the step ran other ops, a new graph compiled (recorded: 200 steps, step 115).
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step({"x": [64, 64]}, compile_ms=500 if k in (0, 1, 7) else 0, nodes=65 if k >= 7 else 70,
               read=("bool", 20, "if loss > THR:"))
    f = next(f for f in b.done().findings if f.cause == "graph_change")
    assert f.evidence[0] == ("a Python condition on a tensor was read in that step: train.py:20: if loss > THR:; "
                             "which ops the step runs depends on its outcome, so a new outcome is a new graph")
    assert (f.file, f.line) == ("/u/train.py", 20) and "torch.where" in f.advice
    import json

    from xprof.recorder.live import LiveNotices

    said: list[str] = []
    LiveNotices(T0, said.append).feed(
        [json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:-1]])
    assert said[-1].startswith("xprof: step 7 recompiled: same input shapes, different graph; the condition on a "
                               "tensor at train.py:20, read in this step, picks its ops")
    # no condition read in the step that compiled: the generic advice
    b = Builder(tmp_path / "r2.json")
    for k in range(12):
        b.step({"x": [64, 64]}, compile_ms=500 if k in (0, 1, 7) else 0, nodes=65 if k >= 7 else 70,
               read=("bool", 20, "if loss > THR:") if k != 7 else None)
    f = next(f for f in b.done().findings if f.cause == "graph_change")
    assert f.file is None and "torch.where" not in f.advice


def test_two_dim_0_sizes_changing_on_their_own_are_a_structure_not_a_batch(tmp_path: Path) -> None:
    # Node classification on random graphs: x [N, 8] and y [N] share N, src [E] and dst [E]
    # share E, and N and E change on their own every step. Neither is a DataLoader batch
    # (drop_last would not help): pad both counts (recorded: 12 graphs of 20-24 nodes, 40-44 edges).
    b = Builder(tmp_path / "r.json")
    seen: set[tuple[int, int]] = set()
    for n, e in [(21, 42), (22, 42), (22, 40), (20, 40), (20, 43), (24, 43), (24, 41), (23, 41), (23, 44),
                 (21, 42), (22, 40), (24, 41)]:
        b.step({"x": [n, 8], "y": [n], "src": [e], "dst": [e]}, compile_ms=0 if (n, e) in seen else 500)
        seen.add((n, e))
    kinds = {f.input: f.kind for f in b.done().findings}
    assert kinds == {"x": "dynamic_size", "src": "dynamic_size"}
    # One batch of rows (input_ids and labels share B) beside a box count of its own: the batch
    # that is short once an epoch stays a partial batch.
    b = Builder(tmp_path / "r2.json")
    for k in range(12):
        rows = 4 if k % 6 == 5 else 8
        b.step({"images": [rows, 3, 16, 16], "labels": [rows], "boxes": [10 + k % 5, 4]},
               compile_ms=500 if k < 6 else 0)
    kinds = {f.input: f.kind for f in b.done().findings}
    assert kinds.get("images") == "partial_batch"


def test_torch_xla_compile_barriers_are_explained(tmp_path: Path) -> None:
    # torch_xla.compile(step_fn): a sync entering the function (nothing pending: no graph)
    # and its graph at the exit, two barriers a step.
    from xprof.report.prose import headline

    b = Builder(tmp_path / "r.json")
    for k in range(6):
        b.step(None, fields={"barrier": "compile_entry", "bc": 0, "c": {"MarkStep": 1}})
        b.step({"x": [4, 8]}, compile_ms=500 if k == 0 else 0, opt=1, fields={"barrier": "compile"})
    a = b.done()
    assert (a.totals.steps, a.totals.barriers) == (6, 12)
    assert headline(a)[0].startswith("This run trained 6 steps (12 barriers: torch_xla.compile syncs on entering "
                                     "the compiled function and runs its graph on leaving it)")


def test_a_minor_cost_is_not_the_exit_summarys_first_thing_to_change(tmp_path: Path) -> None:
    # Two short recompiles (50 ms each) in a run whose first graph took most of its 100 s
    # (an XLA CPU compile of minutes): under 1% of the run, the analysis folds the finding
    # away, and the exit summary does not lead with it either.
    import json


    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step({"tgt": [4, (6, 9, 7)[k // 4]]}, compile_ms=90_000 if k == 0 else 50 if k in (4, 8) else 0)
    b.t = T0 + 100.0
    a = b.done()
    assert [f.minor for f in a.findings] == [True]
    from xprof.report.prose import exit_lines

    assert exit_lines(a, "r.json")[2].startswith("xprof: first thing to change: nothing stands out")
    # the same recompiles in a 5 s run lead
    short = (tmp_path / "r.json").read_text().splitlines()
    end = json.loads(short[-1])
    (tmp_path / "short.json").write_text("\n".join([*short[:-1], json.dumps(dict(end, t=T0 + 5.0))]) + "\n")
    line = exit_lines(analyze(load_run(tmp_path / "short.json")), "short.json")[2]
    assert line.startswith("xprof: first thing to change: tgt "), line


def test_the_exit_summary_gives_a_partial_batch_the_analysis_advice(tmp_path: Path) -> None:
    # DataLoader(drop_last=False): 16 rows, and 4 in each epoch's last batch. The exit summary
    # said "pad it to a few fixed sizes" where the analysis says drop_last=True.
    import json

    from xprof.recorder.live import LiveNotices

    b = Builder(tmp_path / "r.json")
    for k in range(15):
        b.step({"batch[0]": [4 if k % 5 == 4 else 16, 8]}, compile_ms=500 if k in (0, 1, 4) else 0)
    a = b.done()
    assert a.findings[0].kind == "partial_batch" and "drop_last=True" in a.findings[0].advice
    from xprof.report.prose import exit_lines

    assert exit_lines(a, "r.json")[2] == f"xprof: first thing to change: {a.findings[0].title}"
    live = LiveNotices(T0, None)
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:-1]])
    assert [key for key, _ in live.said] == [a.findings[0].id]


def test_a_new_shape_at_the_users_barrier_in_a_step_dynamo_traced_is_noticed_as_a_shape(tmp_path: Path) -> None:
    # `out = torch.compile(m)(x)` under no_grad beside an eager `m(x)` the loss trains: at
    # step 7 x grows, dynamo traces again (a compile mid-step) and the user's barrier compiles
    # the eager graph for the new shape. The analysis blames x for the barrier's compile and
    # dynamo for its own; the live notices said nothing and put both on dynamo.
    import json

    from xprof.recorder.live import LiveNotices

    b = Builder(tmp_path / "r.json")
    for k in range(12):
        traced = k in (0, 7)
        if traced:
            b.w.write({"type": "compile", "i": b.i, "t": b.t + 0.002, "ns": 6e7, "at": "step"})
        b.step({"x": [4, 14 if k >= 7 else 10, 16]}, compile_ms=300 if k in (0, 1, 7) else 0, opt=1,
               fields={"dz": 1} if traced else None)
    a = b.done()
    assert next((f.cause, f.input) for f in a.findings if f.severity != "info") == ("input_shape", "x")
    said: list[str] = []
    live = LiveNotices(T0, said.append)
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:-1]])
    assert said == ["xprof: step 7 recompiled: x took shape [4, 14, 16] (first seen); 2 recompiles so far, 0.36 s"]


def test_a_graph_that_gained_inputs_is_compared_with_its_own_signature(tmp_path: Path) -> None:
    # A loss weight ramped from 0: the graph takes one input more, then one more again.
    # A compile for another input shape in between (its own graph, 7 inputs) is not the
    # graph they are compared with.
    b = Builder(tmp_path / "r.json")
    compiled = {0: 30, 1: 30, 4: 7, 6: 31, 9: 32}
    for k in range(12):
        b.step({"x": [2, 16]} if k == 4 else {"x": [4, 16]}, compile_ms=500 if k in compiled else 0, nodes=200)
    for n_inputs in compiled.values():
        b.w.write({"type": "debug", "kind": "compile", "cause": "user torch_xla.sync", "cause_kind": "barrier",
                   "inputs": n_inputs, "frames": [], "user_frames": []})
    f = next(f for f in b.done().findings if f.kind == "graph_change")
    said = [e for e in f.evidence if e.startswith("torch_xla's debug records")]
    assert said and said[0].startswith("torch_xla's debug records: the step's graph took 30 inputs, then 31 at "
                                       "step 6 and 32 at step 9, with the same ops")


def test_a_graph_new_every_step_with_nothing_from_the_host_is_state_that_grows(tmp_path: Path) -> None:
    from xprof.report.prose import headline

    # Greedy decoding with a KV cache grown by torch.cat: after the prompt, no input comes from
    # the host; the same 208-node graph compiles anew at every step, none reused.
    b = Builder(tmp_path / "r.json")
    b.step({"prompt": [1, 6]}, compile_ms=500, nodes=300, fields={"ng": True})
    for _ in range(8):
        b.step(None, compile_ms=400, nodes=208, fields={"ng": True})
    a = b.done()
    f = a.findings[0]
    assert (f.kind, f.cause) == ("graph_every_step", "graph_change")
    assert f.title.startswith("The graph changed at every step with no new input from the host: "
                              "7 new graphs in 7 steps")
    assert "KV cache" in f.advice and "index_copy_" in f.advice
    assert not [g for g in a.findings if g.kind == "unknown"]
    assert headline(a)[0].startswith("This run ran 9 steps with no backward pass or optimizer step (inference)")


def test_lengths_padded_to_buckets_are_said_as_buckets(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    seen: set[int] = set()
    for n in [16, 32, 16, 48, 32, 16, 48, 32]:
        b.step({"input_ids": [8, n]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    f = b.done().findings[0]
    assert f.title.startswith("input_ids is padded to multiples of 16 (3 lengths of dim 1: 16, 32, 48), a graph each")
    assert "price of bucketing" in f.advice
    # Lengths padded to the longest of each batch share no such step.
    b = Builder(tmp_path / "s.json")
    for n in [16, 21, 16, 27, 21, 16, 30]:
        b.step({"input_ids": [8, n]}, compile_ms=500)
    assert "multiples" not in b.done().findings[0].title


def test_an_inference_runs_last_partial_batch_is_padded_not_dropped_nor_stages(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for k in range(8):
        b.step({"x": [32 if k < 7 else 26, 16]}, compile_ms=500 if k in (0, 7) else 0, fields={"ng": True})
    f = b.done().findings[0]
    assert f.kind == "partial_batch" and "stages" not in f.title
    assert f.advice.startswith("Pad the last batch to the full batch size") and "drop_last" not in f.advice


def test_a_run_that_reached_no_barrier_is_judged_by_its_reads(tmp_path: Path) -> None:
    from xprof.report.prose import headline

    # model.generate(): no torch_xla.sync(), every graph runs (and compiles) at a host read.
    w = RunWriter(tmp_path / "r.json", {"name": "gen", "started_unix": T0, "meta": {}})
    w.write({"type": "site", "id": 0, "kind": "bool", "file": "/u/gen.py", "line": 10, "func": "<module>",
             "via": "transformers.generation.utils.GenerationMixin.generate", "code": "out = model.generate(ids)"})
    for k in range(6):
        t = T0 + k
        w.write({"type": "compile", "i": 0, "t": t + 0.4, "ns": 4e8, "at": "step"})
        w.write({"type": "sync", "i": 0, "site": 0, "t0": t, "t1": t + 0.5, "u": 1, "x": 1})
    w.write({"type": "debug", "kind": "capture", "level": "2", "compiles": 6, "executions": 6})
    w.write({"type": "end", "t": T0 + 7, "status": "ok", "exception": None, "steps": 0,
             "tail": {"UncachedCompile": 6, "ExecuteComputation": 6}})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    said = headline(a)
    assert said[0].startswith("This run reached no step barrier")
    assert not any("worker" in line for line in said)
    (f,) = a.findings
    assert (f.cause, f.kind, f.file, f.line, f.compiles) == ("no_barrier", "reads_only", "/u/gen.py", 10, 6)
    assert f.title.startswith("No step barrier: the graphs ran at host reads: 6 compiles at 6 reads")
    assert "6 reads at gen.py:10 (inside transformers.generation.utils.GenerationMixin.generate)" in f.evidence[0]
    assert 'cache_implementation="static"' in f.advice


def test_a_graph_change_on_device_state_is_not_blamed_on_a_condition_read_in_its_steps(tmp_path: Path) -> None:
    # Sampling with `tokens = torch.cat([tokens, nxt], 1)` and `if finished.all(): break` read
    # every step: the same ops each step (same size), so the condition did not pick them.
    b = Builder(tmp_path / "r.json")
    b.step({"prompt": [1, 4]}, compile_ms=500, nodes=300, fields={"ng": True})
    for k in range(6):
        b.step(None, compile_ms=400 if k % 2 == 0 else 0, nodes=220, fields={"ng": True},
               read=("bool", 20, "if finished.all():"))
    f = next(f for f in b.done().findings if f.cause == "graph_change")
    assert not any("condition" in e for e in f.evidence) and f.line is None
    assert "KV cache" in f.advice


def test_a_second_loaders_short_last_batch_is_a_partial_batch(tmp_path: Path) -> None:
    # Semi-supervised: a labelled batch of 8 and an unlabelled one of 16 a step; the
    # unlabelled loader's last batch of each epoch has 4 rows. No other input shares xu's rows.
    b = Builder(tmp_path / "r.json")
    seen: set[int] = set()
    for k in range(21):
        rows = 4 if k % 7 == 6 else 16
        b.step({"xl": [8, 16], "yl": [8], "xu": [rows, 16]}, compile_ms=0 if rows in seen and k != 1 else 500)
        seen.add(rows)
    f = b.done().findings[0]
    assert (f.kind, f.input) == ("partial_batch", "xu")
    assert "drop_last=True" in f.advice


def test_a_barrier_graph_grown_by_ops_left_pending_says_so(tmp_path: Path) -> None:
    # After an evaluation pass with no barrier of its own, whose loss is read (the read runs
    # what it needs), the next training step's barrier compiles a larger graph: the pass's
    # leftover ops joined it.
    b = Builder(tmp_path / "r.json")
    for k in range(10):
        read = ("item", 46, "sched.step(val_loss)") if k == 6 else None
        b.step({"x": [8, 16]}, compile_ms=500 if k in (0, 1, 6) else 0, nodes=122 if k == 6 else 87, read=read,
               read_compile_ms=200 if k == 6 else 0)
    f = next(f for f in b.done().findings if f.line == 46)
    said = next(e for e in f.evidence if "at a step barrier" in e)
    assert "122 nodes against the training step's 87" in said and "torch_xla.sync() after them" in said


def test_a_read_that_compiles_after_a_value_dependent_op_passes_the_compile_to_it(tmp_path: Path) -> None:
    # `acc = (pred == labels)[labels != -100].float().mean().item()` every step: the mask's
    # count changes, so the graph `.item()` runs takes a new shape. The compiles are the mask
    # index's (a closure around the read leaves them all), in the analysis and the exit summary.


    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    code = "acc = (pred == labels)[labels != -100].float().mean().item()"
    w.write({"type": "site", "id": 3, "kind": "mask_index", "file": "/u/t.py", "line": 16, "func": "main",
             "via": None, "code": code})
    w.write({"type": "site", "id": 1, "kind": "item", "file": "/u/t.py", "line": 16, "func": "main",
             "via": None, "code": code})
    w.write({"type": "sig", "id": 0, "inputs": [{"name": "x", "shape": [4, 8], "dtype": "int64", "src": "batch"}]})
    t = T0
    for k in range(10):
        new_count = k in (0, 1, 3, 4, 6, 8)
        w.write({"type": "sync", "i": k, "site": 3, "t0": t + 0.001, "t1": t + 0.002, "x": 1})
        r0, r1 = t + 0.003, t + (0.403 if new_count else 0.004)
        if new_count:
            w.write({"type": "compile", "i": k, "t": r1 - 0.001, "ns": 4e8, "at": "step"})
        w.write({"type": "sync", "i": k, "site": 1, "t0": r0, "t1": r1, "x": 1, **({"u": 1} if new_count else {})})
        t1 = r1 + 0.01 + (0.5 if k < 2 else 0)
        if k < 2:
            w.write({"type": "compile", "i": k, "t": t1 - 0.001, "ns": 5e8, "at": "barrier"})
        w.write({"type": "step", "i": k, "t0": t, "tb": r1 + 0.005, "t1": t1, "barrier": "mark_step", "o": 1,
                 "bw": 1, "sig": 0, ("bu" if k < 2 else "bc"): 1,
                 "c": {"ExecuteComputation": 3, "UncachedCompile": (k < 2) + new_count, "aten::nonzero": 1}})
        t = t1
    w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": 10})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    f = a.findings[0]
    assert (f.cause, f.compiles) == ("data_dependent", 4) and f.seconds > 1.5
    assert not any(g.kind == "item" and g.compiles for g in a.findings)
    from xprof.report.prose import exit_lines

    assert exit_lines(a, "r.json")[2].startswith("xprof: first thing to change: Boolean-mask indexing at t.py:16")


def test_a_pattern_whose_every_occurrence_compiles_is_a_new_graph_each_time(tmp_path: Path) -> None:
    # CutMix every other step with Python-int box bounds: the mixing steps' graphs (95 nodes)
    # compile every time, the others reuse theirs: not a few variants cached once.
    b = Builder(tmp_path / "r.json")
    for k in range(14):
        mix = k >= 2 and k % 2 == 1
        b.step({"x": [8, 3, 16, 16]}, compile_ms=500 if k < 2 or mix else 0, nodes=95 if mix else 87)
    f = b.done().findings[0]
    assert f.kind == "graph_every_step"
    assert f.title.startswith("The step graph changes every 2 steps, a new graph each time with the same input "
                              "shapes: 6 new graphs, none reused")
    # Variants that come back are cached: a few graphs, once.
    b = Builder(tmp_path / "s.json")
    for k in range(14):
        mix = k >= 2 and k % 2 == 1
        b.step({"x": [8, 3, 16, 16]}, compile_ms=500 if k < 2 or k == 3 else 0, nodes=95 if mix else 87)
    f = b.done().findings[0]
    assert f.kind == "periodic_graph" and "cached afterwards" in f.title


def test_another_pass_run_inside_a_training_step_is_said_so(tmp_path: Path) -> None:
    # An evaluation every 6 steps with no barrier of its own: its batches (vx, vy) and ops
    # join the next training step's graph, 112 nodes against 84.
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        joined = k == 6
        shapes = {"x": [16, 8], "y": [16]} | ({"vx": [32, 8], "vy": [32]} if joined else {})
        b.step(shapes, compile_ms=500 if k < 2 or joined else 0, nodes=112 if joined else 84)
    f = b.done().findings[0]
    assert (f.cause, f.kind) == ("graph_change", "pass_joined")
    assert "vx, vy" in f.evidence[0] and "112 nodes against the training step's 84" in f.evidence[0]
    assert "torch_xla.sync()" in f.advice


def test_an_input_moved_in_some_steps_only_is_named(tmp_path: Path) -> None:
    # `box` moved to the device only in the steps that mix: a step without it is another graph.
    b = Builder(tmp_path / "r.json")
    for k in range(10):
        shapes = {"x": [8, 16]} | ({"box": [4]} if k % 3 == 1 else {})
        b.step(shapes, compile_ms=500 if k in (0, 1, 2) else 0)
    f = b.done().findings[0]
    assert f.title.startswith("box is an input of some steps and not others")
    assert f.input == "box" and "same inputs every step" in f.advice


def test_values_padded_per_batch_get_no_tokenizer_advice(tmp_path: Path) -> None:
    # Detection boxes padded to the most boxes in each batch: float values, no tokenizer.
    b = Builder(tmp_path / "r.json")
    b.dtype = "float32"
    seen: set[int] = set()
    for n in [6, 7, 6, 8, 7, 5, 6, 8]:
        b.step({"boxes": [4, n, 4]}, compile_ms=0 if n in seen else 500)
        seen.add(n)
    f = b.done().findings[0]
    assert f.kind == "dynamic_padding" and "tokenize" not in f.advice and "mask what was padded" in f.advice
    assert not any("padding=" in str(r["strategy"]) for r in f.what_if or [])


def test_a_graph_taking_other_device_tensors_gets_the_input_set_story(tmp_path: Path) -> None:
    # BatchNorm put in eval mode and the backbone frozen at step 8, data made on the device:
    # nothing from the host; torch_xla's debug records show 31 graph inputs, then 20.
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step(None, compile_ms=500 if k in (0, 1, 8) else 0, nodes=51 if k >= 8 else 70, opt=1, fields={"bw": 1})
    for n_inputs in (25, 31, 20):
        b.w.write({"type": "debug", "kind": "compile", "cause": "user torch_xla.sync", "cause_kind": "barrier",
                   "inputs": n_inputs, "frames": [], "user_frames": []})
    f = b.done().findings[0]
    assert f.title.startswith("The graph changed with no new input from the host")
    assert any("takes 20 inputs, the one before it 31: another set of tensors" in e for e in f.evidence)
    assert "frozen or unfrozen" in f.advice and "index_copy_" not in f.advice


def test_a_read_that_ran_nothing_did_not_change_the_barrier_graph(tmp_path: Path) -> None:
    """An epoch's running sum read after its last barrier (the value ready: nothing ran), then
    reset with torch.zeros(device=...): the next step's new graph is the reset's, not the
    read's (a read can only take ops out of the graph by running them)."""
    def run(read_ran: bool) -> Any:
        b = Builder(tmp_path / f"r{read_ran}.json")
        for i in range(12):
            b.step({"x": [16, 32]}, compile_ms=500 if i in (0, 1, 6) else 0, nodes=63 if i == 6 else 65, opt=1,
                   read=("item", 20, "print(running.item())") if i == 6 else None, read_ran=read_ran)
        return b.done()

    ready = run(False)
    (f,) = [f for f in ready.findings if not f.minor]
    assert (f.cause, f.kind, f.line) == ("graph_change", "graph_change", None)
    # The same read running the pending graph early cut it from the barrier's: its cause.
    ran = run(True)
    assert next((f.cause, f.line) for f in ran.findings if not f.minor) == ("implicit_sync", 20)


def test_a_graph_larger_each_time_it_changes_is_state_that_grows(tmp_path: Path) -> None:
    """losses.append(loss) every step, torch.stack(losses).mean().item() every 10: the step
    graphs with the read take 10 more kept tensors each time (50, 60, 70 nodes against 39),
    each compiled once. Not three unrelated graph changes, nor the read's (it ran a graph)."""
    b = Builder(tmp_path / "r.json")
    for i in range(30):
        grown = (i + 1) % 10 == 0
        b.step({"x": [16, 32]}, compile_ms=500 if i in (0, 1) or grown else 0,
               nodes=39 + (i + 1) if grown else 39, opt=1,
               read=("item", 16, "print(torch.stack(losses).mean().item())") if grown else None,
               read_compile_ms=100 if grown else 0)
    a = b.done()
    grows = next(f for f in a.findings if f.kind == "graph_grows")
    assert grows.title == ("The step graph grows: 3 new graphs from the same inputs, each larger than the last "
                           "(49, 59, 69 nodes), none reused, 1.50 s")
    assert grows.steps == [9, 19, 29] and "a host read ran in each of these steps: train.py:16" in grows.evidence[2]
    # Two larger graphs are not yet a trend: each stays a graph change of its own.
    b = Builder(tmp_path / "two.json")
    for i in range(20):
        b.step({"x": [16, 32]}, compile_ms=500 if i in (0, 1, 9, 19) else 0,
               nodes=39 + (i + 1) if i in (9, 19) else 39, opt=1)
    assert "graph_grows" not in {f.kind for f in b.done().findings}


def test_a_new_graph_in_most_steps_with_some_reuse_is_a_baked_number(tmp_path: Path) -> None:
    """A random crop x[:, :, i:i+L] with i from Python's random: a new graph in most steps, a
    few offsets drawn again (their graph cached). Not 'changed once, cached afterwards'."""
    b = Builder(tmp_path / "r.json")
    offsets = [0, 0, 5, 9, 2, 5, 14, 7, 9, 3, 11, 8, 2, 6]
    seen: set[int] = set()
    for i, off in enumerate(offsets):
        new = i < 2 or off not in seen
        b.step({"x": [16, 4, 64]}, compile_ms=500 if new else 0, opt=1, nodes=72)
        if i >= 2:
            seen.add(off)
    (f,) = b.done().findings
    assert f.kind == "graph_every_step"
    assert f.title == ("The graph changed in 9 of 12 steps with the same input shapes: 9 new graphs, "
                       "3 steps reused one, 4.50 s")
    assert "slice bound" in f.advice


def test_a_library_calls_own_barrier_after_an_eval_pass_is_the_calls(tmp_path: Path) -> None:
    """xm.mesh_reduce after an evaluation: its rendezvous syncs compile graphs of their own
    (torch_xla's debug output: 'user torch_xla.sync' at the mesh_reduce line), which are the
    call's, not the evaluation's; the eval loader's barriers stay the pass's."""
    b = Builder(tmp_path / "r.json")
    loader = {"line": 28, "via": "torch_xla.distributed.parallel_loader.PerDeviceLoader.__next__",
              "code": "for x, y in test_dl:"}
    reduce = {"id": 1001, "line": 32, "via": "torch_xla.core.xla_model.mesh_reduce",
              "code": "acc = xm.mesh_reduce('acc', correct.item() / total, np.mean)"}
    for epoch in range(2):
        for i in range(6):
            b.step({"x": [16, 20]}, compile_ms=500 if epoch == 0 and i < 2 else 0, opt=1, fields={"bw": 1})
        for i in range(3):
            b.step({"x": [16, 20]} if i < 2 else {"x": [2, 20]}, compile_ms=300 if epoch == 0 and i != 1 else 0,
                   barrier_site=loader if epoch == 0 and i != 1 else None, fields={"ev": 1, "ng": 1})
        b.step(compile_ms=100 if epoch == 0 else 0, barrier_site=reduce if epoch == 0 else None,
               fields={"ev": 1, "ng": 1})
    a = b.done()
    by_kind = {f.kind: f for f in a.findings}
    assert by_kind["eval_pass"].compiles == 2
    own = by_kind["library_sync"]
    assert own.title == ("torch_xla.core.xla_model.mesh_reduce (called from train.py:32) asked for a barrier of its "
                         "own: 1 compile, 0.10 s")
    assert (own.line, a.totals.compiles) == (32, 5)
    from xprof.report.prose import exit_lines  # the exit summary names the call too

    assert exit_lines(a, "r.json")[2].startswith(
        "xprof: first thing to change: torch_xla.core.xla_model.mesh_reduce (called from train.py:32)")


def test_a_library_sync_that_runs_the_eval_batch_is_the_passs_barrier(tmp_path: Path) -> None:
    """accelerate's gather_for_metrics inside the eval loop: its xm.mark_step is where each eval
    batch's forward runs (the batch's inputs come in its step; the loader's barriers around it
    run nothing). Without it the same graph would compile at the next barrier: the compiles are
    the evaluation's, once, not a cost of the call (seen on six of accelerate's examples)."""
    b = Builder(tmp_path / "r.json")
    gather = {"id": 1001, "line": 41, "via": "accelerate.accelerator.Accelerator.gather_for_metrics",
              "code": "predictions, references = accelerator.gather_for_metrics((predictions, labels))"}
    for epoch in range(3):
        for i in range(4):
            b.step({"x": [16, 20]}, compile_ms=500 if epoch == 0 and i < 2 else 0, opt=1, fields={"bw": 1})
        for i in range(2):
            b.step({"x": [16, 20]} if i == 0 else {"x": [4, 20]}, compile_ms=300 if epoch == 0 else 0,
                   barrier_site=gather, fields={"ev": 1, "ng": 1})
    a = b.done()
    kinds = [f.kind for f in a.findings]
    assert "library_sync" not in kinds
    (pass_,) = [f for f in a.findings if f.kind == "eval_pass"]
    assert pass_.compiles == 2 == a.totals.recompiles
    from xprof.report.prose import headline

    assert ("2 of them were an evaluation pass's own graphs, compiled after warm-up: expected, and cached "
            "after.") in headline(a)


def test_a_packed_batchs_node_count_is_no_batch_size(tmp_path: Path) -> None:
    """A graph batch (PyG's Batch): node features x [N, 7] and the node-to-graph map batch [N]
    share a dim 0 that is the batch's graphs' nodes together, a new N every step, while the
    labels y [6] and offsets ptr [7] keep the batch's six rows. Not a batch size (drop_last
    would change nothing): a size of its own, padded like a graph's nodes and edges."""
    b = Builder(tmp_path / "r.json")
    nodes = [115, 125, 132, 121, 114, 125, 118, 132, 127, 115, 121, 140]
    for k, n in enumerate(nodes):
        b.step({"data.x": [n, 7], "data.edge_index": [2, 2 * n + k], "data.y": [6], "data.batch": [n],
                "data.ptr": [7]}, compile_ms=500 if k < 2 or n not in nodes[:k] else 0, opt=1, fields={"bw": 1})
    a = b.done()
    f = a.findings[0]
    assert (f.kind, f.input) == ("dynamic_size", "data.x")
    assert "padding node" in f.advice and "drop_last" not in f.advice


def test_a_real_batch_size_change_stays_one(tmp_path: Path) -> None:
    """The same sizes, the labels changing with the rows: a batch size that changes."""
    b = Builder(tmp_path / "r.json")
    rows = [16, 12, 9, 16, 12, 9, 16, 7, 12, 9, 16, 7]
    for k, n in enumerate(rows):
        b.step({"x": [n, 7], "y": [n]}, compile_ms=500 if k < 2 or n not in rows[:k] else 0, opt=1,
               fields={"bw": 1})
    f = b.done().findings[0]
    assert (f.kind, f.input) == ("batch_size_change", "x")


@pytest.mark.parametrize("src, sizes, kind", [
    ("to", [8] * 9 + [6] + [8] * 6, "batch_size_change"),  # once, mid-run, no loader: no epoch said
    ("batch", [8] * 9 + [6] + [8] * 6, "partial_batch"),  # a DataLoader's: a short last batch
    ("to", ([8] * 3 + [6]) * 4, "partial_batch"),  # recurring: each epoch of a list of batches
    ("to", [8] * 15 + [6], "partial_batch"),  # at the very end of the run
])
def test_a_short_batch_is_an_epochs_last_only_with_evidence(tmp_path: Path, src: str, sizes: list[int],
                                                            kind: str) -> None:
    b = Builder(tmp_path / "r.json")
    b.src = src
    seen: set[int] = set()
    for i, n in enumerate(sizes):
        b.step({"x": [n, 16], "y": [n]}, compile_ms=500 if i < 2 or n not in seen else 0, opt=1)
        if i >= 1:
            seen.add(n)
    (f,) = b.done().findings
    assert f.kind == kind
    assert ("drop_last" in f.advice) and (f.pattern is None) == (kind == "batch_size_change")


def test_generate_inside_the_trainers_evaluation_is_its_own_finding(tmp_path: Path) -> None:
    """Seq2SeqTrainer(predict_with_generate=True): generate() reads its stop condition every
    token, and torch.isin on the CPU cuts a graph just before each read. Those compiles, in
    the reads and between them (a model's mask check on one side), are generate()'s, not the
    evaluation pass's (torch_xla's debug output puts them at stopping_criteria and
    generation/utils)."""
    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    evaluate = "transformers.trainer_seq2seq.Seq2SeqTrainer.evaluate"
    outer = ["transformers.generation.utils.GenerationMixin.generate",
             "transformers.trainer_seq2seq.Seq2SeqTrainer.prediction_step",
             "transformers.trainer.Trainer.evaluation_loop", evaluate]
    for sid, inner, extra in [(10, "transformers.generation.utils.GenerationMixin._has_unfinished_sequences", []),
                              (12, "transformers.masking_utils._ignore_bidirectional_mask_sdpa",
                               ["transformers.models.t5.modeling_t5.T5Stack.forward"])]:
        w.write({"type": "site", "id": sid, "kind": "bool", "file": "/u/train.py", "line": 17, "func": "<module>",
                 "via": evaluate, "code": "print(trainer.evaluate())", "inner": inner,
                 "chain": [inner, *extra, *outer]})
    t = T0
    for i in range(3):  # training steps
        w.write({"type": "compile", "i": i, "t": t + 0.5, "ns": 5e8, "at": "barrier"} if i < 2 else
                {"type": "graph_sizes", "samples": []})
        w.write({"type": "step", "i": i, "t0": t, "tb": t + 0.1, "t1": t + 1, "barrier": "mark_step", "o": 1,
                 "bw": 1, "c": {"MarkStep": 1}, **({"bu": 1} if i < 2 else {"bc": 1})})
        t += 1
    for _ in range(4):  # one eval step, four tokens: mask check, a cut graph, the stop check
        w.write({"type": "sync", "i": 3, "site": 12, "t0": t, "t1": t + 0.01})
        w.write({"type": "compile", "i": 3, "t": t + 0.05, "ns": 3e8, "at": "step"})
        w.write({"type": "compile", "i": 3, "t": t + 0.15, "ns": 2e8, "at": "step"})
        w.write({"type": "sync", "i": 3, "site": 10, "t0": t + 0.1, "t1": t + 0.3, "u": 1, "x": 1})
        t += 1
    w.write({"type": "compile", "i": 3, "t": t + 0.5, "ns": 4e8, "at": "barrier"})
    w.write({"type": "step", "i": 3, "t0": 3 + T0, "tb": t, "t1": t + 1, "barrier": "mark_step", "ng": 1, "ev": 1,
             "gd": 1, "bu": 1, "c": {"MarkStep": 1, "UncachedCompile": 9}})
    w.write({"type": "end", "t": t + 1, "status": "ok", "exception": None, "steps": 4})
    w.close()
    by_kind = {f.kind: f for f in analyze(load_run(tmp_path / "r.json")).findings}
    assert by_kind["hf_generate"].compiles == 8 and by_kind["hf_generate"].title.startswith("model.generate() ")
    assert by_kind["hf_trainer_eval"].compiles == 1  # the pass's own barrier graph


def test_a_read_running_the_device_every_step_is_judged_against_the_steps_not_warm_up(tmp_path: Path) -> None:
    """print(f"{norm:.3f}") after clip_grad_norm_ every step: each read runs the device early
    (2 ms a 10 ms step) in a run whose warm-up compiles take most of the wall time. Against the
    whole run it is under 1%; against the steps it is a fifth of each. A ready read (nothing
    run) of the same length stays minor."""
    def read_finding(ran: bool) -> Any:
        b = Builder(tmp_path / f"r{ran}.json")
        for i in range(20):
            b.step({"x": [16, 32]}, compile_ms=3000 if i < 2 else 0, opt=1, read_ran=ran,
                   read=("format", 16, 'print(f"norm {norm:.3f}")'))
        return next(f for f in b.done().findings if f.line == 16)

    forced = read_finding(True)
    assert forced.pattern == "every step" and forced.seconds < 0.01 * 6.3 and not forced.minor
    assert read_finding(False).minor


def test_eager_ops_before_a_compiled_call_compile_for_the_calls_inputs(tmp_path: Path) -> None:
    """Eager mode with @torch_xla.compile: x = (x - x.mean()) / x.std() runs op by op before
    the call, and one 6-row batch at step 9 compiles those ops again at the call's entry
    sync. They are the batch size's (7 with the call's graph), reported at step 9, not a
    graph change with nothing from the host; an op first run for logging at step 5 is an
    eager op's first compile (info). The live notices agree."""
    from xprof.recorder.live import LiveNotices

    recs: list[dict[str, Any]] = []
    sig = {8: 0, 6: 1}
    for n in (8, 6):
        recs.append({"type": "sig", "id": sig[n], "inputs": [{"name": "x", "shape": [n, 16], "dtype": "float32",
                                                              "src": "to"}]})
    t, i = T0, 0
    for step in range(16):
        rows = 6 if step == 9 else 8
        ops = 6 if step in (0, 9) else 1 if step == 5 else 0
        for _ in range(ops):
            recs.append({"type": "compile", "i": i, "t": t + 0.01, "ns": 2e7, "at": "op"})
        recs.append({"type": "step", "i": i, "t0": t, "tb": t + 0.02, "t1": t + 0.03, "barrier": "compile_entry",
                     "mg": 8, "c": {"MarkStep": 1}})
        i, t = i + 1, t + 0.03
        new = step in (0, 1, 9)
        if new:
            recs.append({"type": "compile", "i": i, "t": t + 0.01, "ns": 1.5e8, "at": "barrier"})
        recs.append({"type": "step", "i": i, "t0": t, "tb": t + 0.01, "t1": t + 0.2, "barrier": "compile", "o": 1,
                     "bw": 1, "sig": sig[rows], "c": {"MarkStep": 1}, **({"bu": 1} if new else {"bc": 1})})
        i, t = i + 1, t + 0.2
    w = RunWriter(tmp_path / "r.json", {"name": "unit", "started_unix": T0, "meta": {}})
    for r in recs:
        w.write(r)
    w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": i})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    by_kind = {f.kind: f for f in a.findings}
    assert set(by_kind) == {"batch_size_change", "eager_op"}
    assert by_kind["batch_size_change"].compiles == 7 and by_kind["batch_size_change"].steps == [9]
    assert by_kind["eager_op"].steps == [5] and by_kind["eager_op"].severity == "info"
    said: list[str] = []
    live = LiveNotices(T0, said.append)
    live.feed(recs)
    assert said == ["xprof: step 9 recompiled: x took shape [6, 16] (first seen); 8 recompiles so far, 0.29 s"]


def test_a_varying_number_of_micro_batches_is_not_another_pass(tmp_path: Path) -> None:
    """Gradient accumulation over 1-3 micro-batches (a token budget): the step with three ran
    x#3 and a larger graph, which read as another pass's inputs joining the step. Every shape
    was seen: it is the accumulation window's length."""
    b = Builder(tmp_path / "r.json")
    seen: set[int] = set()
    for i, n in enumerate([1, 2, 3, 2, 1, 3, 2, 2, 1, 3]):
        shapes = {"x": [4, 16]}
        shapes.update({f"x#{k}": [4, 16] for k in range(2, n + 1)})
        b.step(shapes, compile_ms=500 if i < 2 or n not in seen else 0, nodes=60 + 45 * n, opt=1,
               fields={"bw": n})
        if i >= 1:
            seen.add(n)
    (f,) = b.done().findings
    assert (f.kind, f.compiles) == ("micro_batches", 2)
    assert "torch_xla.sync() after its backward" in f.advice


def test_a_condition_read_where_the_graph_lost_an_input_names_the_condition(tmp_path: Path) -> None:
    """`if logit_scale > 4.6: logit_scale.fill_(4.6)`, taken in some steps: the graph of those
    steps takes one input fewer (the filled value), which alone reads as a baked scalar. The
    condition read in that step is named first, as the live notice does."""
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step({"x": [8, 16]}, compile_ms=500 if k in (0, 1, 6) else 0, nodes=90, opt=1,
               read=("bool", 25, "if logit_scale > 4.6:"))
    for n_inputs in (30, 30, 29):
        b.w.write({"type": "debug", "kind": "compile", "cause": "user torch_xla.sync", "cause_kind": "barrier",
                   "inputs": n_inputs, "frames": [], "user_frames": []})
    f = next(f for f in b.done().findings if f.cause == "graph_change")
    assert f.line == 25 and f.evidence[0].startswith("a Python condition on a tensor was read in that step")
    assert f.advice.startswith("A Python `if` on a tensor's value picks which ops the step runs")
    assert "If its outcome never changed, a Python number that became 0 or 1" in f.advice


def test_a_no_grad_pass_before_every_update_is_part_of_the_step(tmp_path: Path) -> None:
    """Distillation: the teacher's forward under no_grad with a sync of its own before each
    student update. Not 16 evaluation passes with a graph 'compiled after warm-up': the
    teacher's barrier belongs to the step it leads to, and its first graph is warm-up."""
    b = Builder(tmp_path / "r.json")
    for k in range(12):
        b.step({"x": [8, 16]}, compile_ms=300 if k == 0 else 0, nodes=20, fields={"ng": 1, "ev": 1, "gd": 1})
        b.step({"y": [8]}, compile_ms=500 if k < 2 else 0, nodes=80, opt=1, fields={"bw": 1})
    a = b.done()
    assert (a.totals.steps, a.totals.barriers, a.totals.recompiles, a.totals.eval_passes) == (12, 24, 0, 0)
    assert not a.findings
    from xprof.recorder.live import LiveNotices

    said: list[str] = []
    live = LiveNotices(T0, said.append)
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:]
               if json.loads(line).get("type") != "end"])
    assert said == [] and live._recompiles == 0
    # An evaluation every 4 updates stays an evaluation.
    b = Builder(tmp_path / "every4.json")
    for k in range(12):
        if k % 4 == 3:
            b.step({"x": [32, 16]}, compile_ms=300 if k == 3 else 0, nodes=20, fields={"ng": 1, "ev": 1})
        b.step({"x": [8, 16]}, compile_ms=500 if k < 2 else 0, nodes=80, opt=1, fields={"bw": 1})
    assert b.done().totals.eval_passes == 3


def test_tasks_taking_turns_are_kinds_of_batches_not_shapes_to_pad(tmp_path: Path) -> None:
    """Two heads, classification targets [16] and regression targets [16, 3], every other
    step: each task's first two steps compile (its head's Adam state at the first update),
    then both graphs stay cached. Not 'pad y', nor a graph change every 2 steps."""
    b = Builder(tmp_path / "r.json")
    for k in range(20):
        y = [16] if k % 2 == 0 else [16, 3]
        b.step({"x": [16, 20], "y": y}, compile_ms=500 if k < 4 else 0, nodes=90 + (k % 2) * 3 + (k in (2, 3)),
               opt=1, fields={"bw": 1})
    (f,) = b.done().findings
    assert f.kind == "input_kinds" and f.severity == "info" and f.compiles == 2
    assert f.title.startswith("y comes in 2 kinds ([16] int64, [16, 3] int64): batches of different kinds")
    assert "run every head every step" in f.advice


def test_the_logging_module_formatting_a_tensor_is_the_users_read(tmp_path: Path) -> None:
    """logger.info("loss %s", loss) every step: the read happens inside logging.Logger.info,
    which is no library with an XLA option: the user's own read at their line, with closure
    advice, and a live notice like an f-string's."""
    from xprof.recorder.live import LiveNotices

    b = Builder(tmp_path / "r.json")
    site = {"via": "logging.Logger.info", "inner_at": ["/usr/lib/python3.11/logging/__init__.py", 377,
                                                     "msg = msg % self.args"]}
    for _ in range(8):
        b.step({"x": [8, 4]}, compile_ms=500 if b.i < 2 else 0, read=("repr", 12, 'logger.info("loss %s", loss)'),
               site=site)
    (f,) = b.done().findings
    assert f.kind == "log" and f.title.startswith("logging a tensor at train.py:12 forces a host sync every step")
    assert "xm.add_step_closure(lambda t: logger.info" in f.advice
    said: list[str] = []
    live = LiveNotices(T0, said.append)
    live.feed([json.loads(line) for line in (tmp_path / "r.json").read_text().splitlines()[1:]
               if json.loads(line).get("type") != "end"])
    assert said == ["xprof: step 2: logging a tensor at train.py:12 (via logging.Logger.info) forces a host sync "
                    "(every step so far)"]


def test_mid_step_executions_under_torch_compile_are_said_as_its_bridges() -> None:
    """torch.compile's XLA bridge syncs the compiled graph's inputs when it runs it: graphs
    executed mid-step, outside any host read. The overview says where they come from."""
    import tempfile

    from xprof.report.prose import headline

    with tempfile.TemporaryDirectory() as tmp:
        b = Builder(Path(tmp) / "r.json")
        for k in range(8):
            c = {"MarkStep": 1, "ExecuteComputation": 2, "CachedCompile" if k >= 2 else "UncachedCompile": 1}
            b.step({"x": [8, 4]}, compile_ms=500 if k < 2 else 0, opt=1, fields={"c": c, "dz": int(k < 2)})
        said = " ".join(headline(b.done()))
    assert "executions ran mid-step, inside torch.compile's XLA bridge" in said


def test_a_small_reads_cost_is_titled_in_milliseconds(tmp_path: Path) -> None:
    b = Builder(tmp_path / "r.json")
    for _ in range(6):
        b.step({"x": [8, 4]}, compile_ms=500 if b.i < 2 else 0, read=("item", 14, "total += loss.item()"))
    (f,) = b.done().findings
    assert f.title.endswith(" ms") and "0.00 s" not in f.title


def test_no_barrier_keeps_the_mechanisms_adding_it_leaves_and_names_the_loops_read(tmp_path: Path) -> None:
    # A device-only port (no barrier): the model's causal-mask check reads first, inside its
    # forward, then the loop's own loss.item(); GAT's softmax runs aten::scatter_reduce.two on
    # the CPU. The missing barrier is named at the loop's read; the mask check and the fallback
    # stay findings of their own (adding the barrier leaves them).
    w = RunWriter(tmp_path / "r.json", {"name": "port", "started_unix": T0, "meta": {}})
    w.write({"type": "site", "id": 0, "kind": "bool", "file": "/u/model.py", "line": 5, "func": "forward",
             "via": "torch.nn.modules.transformer.TransformerEncoder.forward", "code": "x = self.enc(x, self.mask)",
             "inner": "torch.nn.modules.transformer._detect_is_causal_mask"})
    w.write({"type": "site", "id": 1, "kind": "item", "file": "/u/train.py", "line": 15, "func": "main",
             "via": None, "code": "total += loss.item()"})
    for k in range(6):
        t = T0 + k
        w.write({"type": "compile", "i": 0, "t": t + 0.3, "ns": 3e8, "at": "step"})
        w.write({"type": "sync", "i": 0, "site": k % 2, "t0": t, "t1": t + 0.4, "u": 1, "x": 1})
    w.write({"type": "end", "t": T0 + 7, "status": "ok", "exception": None, "steps": 0, "tail_opt": 3,
             "tail": {"UncachedCompile": 6, "ExecuteComputation": 6, "aten::scatter_reduce.two": 12}})
    w.close()
    a = analyze(load_run(tmp_path / "r.json"))
    assert [f.cause for f in a.findings] == ["no_barrier", "library", "cpu_fallback"], [f.title for f in a.findings]
    assert a.findings[0].line == 15
    assert a.findings[1].kind == "causal_mask_check" and not a.findings[1].minor
    fallback = a.findings[2]
    assert fallback.count == 12 and "aten::scatter_reduce.two" in fallback.title and not fallback.minor


def test_a_missing_barrier_is_placed_at_the_loops_read_not_a_setup_read() -> None:
    """pytorch/examples' GAT: ``labels.max().item()`` sizes the model once, before any step,
    then ``loss.item()`` in the loop ran every later graph. The finding names the loop's line;
    with no line read twice, the first read that ran a graph stands."""
    import pandas as pd

    from xprof.analysis.findings.barriers import _loop_read

    def reads(sites: list[int]) -> Any:
        return pd.DataFrame({"site": sites, "line": sites, "file": "/u/main.py", "executions": 1,
                             "via": pd.Series([None] * len(sites), dtype=object), "access": "item"})

    assert int(_loop_read(reads([356, 286, 286, 286, 371]))["line"]) == 286
    assert int(_loop_read(reads([356, 286, 371]))["line"]) == 356
