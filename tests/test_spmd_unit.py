"""SPMD analysis on exact, hand-built run files (no torch needed): ExecuteReplicated counts,
the ``spmd`` layout, the sharding-change cause, the live notice, and compare's shape diff
with shardings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import xprof.cli.commands  # noqa: F401  (registers the commands)
from tests.corpus.verdicts import notices_outside
from tests.fake_metrics import Counters
from xprof.analysis import analyze
from xprof.cli.app import app
from xprof.comparison.graphs import diff_shapes
from xprof.recorder.live import LiveNotices
from xprof.runfile import RunWriter, load_run

T0 = 2_000_000.0
SHARDED = "{devices=[4,1]0,1,2,3}"
REPL = "{replicated}"

Inputs = list[tuple[str, list[int], str | None]]


class SpmdBuilder:
    """A run as the recorder writes it under SPMD: executions in ExecuteReplicated, one
    optimizer step a barrier."""

    def __init__(self, path: Path, meta: dict[str, Any] | None = None) -> None:
        self.w = RunWriter(path, {"name": path.stem, "started_unix": T0, "meta": meta or {}})
        self.path = path
        self.i = 0
        self.t = T0
        self.sigs: dict[tuple[Any, ...], int] = {}
        self.records: list[dict[str, Any]] = []

    def _write(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        self.w.write(record)

    def step(self, inputs: Inputs, compile_ms: float = 0.0, nodes: int = 70) -> None:
        t0, tb = self.t, self.t + 0.005
        t1 = tb + compile_ms / 1e3 + 0.001
        rec: dict[str, Any] = {"type": "step", "i": self.i, "t0": t0, "tb": tb, "t1": t1, "barrier": "sync",
                               "c": {"MarkStep": 1, "ExecuteReplicated": 1}, "o": 1}
        if compile_ms:
            rec["c"]["UncachedCompile"] = 1
            rec["bu"] = 1
            self._write({"type": "compile", "i": self.i, "t": tb + compile_ms / 1e3, "ns": compile_ms * 1e6,
                         "at": "barrier"})
        else:
            rec["c"]["CachedCompile"] = 1
            rec["bc"] = 1
        self._write({"type": "graph_sizes", "samples": [[t1 - 0.0005, nodes]]})
        key = tuple((n, tuple(s), sp) for n, s, sp in inputs)
        if key not in self.sigs:
            self.sigs[key] = len(self.sigs)
            entries = []
            for n, s, sp in inputs:
                e: dict[str, Any] = {"name": n, "shape": s, "dtype": "int64", "src": "to"}
                if sp is not None:
                    e["sharding"] = sp
                entries.append(e)
            self._write({"type": "sig", "id": self.sigs[key], "inputs": entries})
        rec["sig"] = self.sigs[key]
        self._write(rec)
        self._write({"type": "exec", "samples": [[t1 + 0.002, 1e6]]})
        self.i += 1
        self.t = t1 + 0.004

    def write(self, record: dict[str, Any]) -> None:
        self._write(record)

    def done(self) -> Any:
        self.w.write({"type": "end", "t": self.t, "status": "ok", "steps": self.i, "syncs": 0, "errors": 0})
        self.w.close()
        run = load_run(self.path)
        # One verdict: the live notices of these records name findings the report has.
        outside = notices_outside(Path(self.path), {f.id for f in analyze(run).findings})
        assert not outside, outside
        return run


def batch(ids: str | None, length: int = 16, mask: str | None = SHARDED) -> Inputs:
    return [("input_ids", [8, length], ids), ("attention_mask", [8, length], mask)]


def resharded_run(path: Path) -> SpmdBuilder:
    b = SpmdBuilder(path)
    b.step(batch(SHARDED), compile_ms=400)  # one-off first graph
    b.step(batch(SHARDED), compile_ms=300)  # steady graph
    for _ in range(4):
        b.step(batch(SHARDED))
    b.step(batch(REPL), compile_ms=250)     # step 6: input_ids replicated: a new graph
    b.step(batch(SHARDED))
    b.step(batch(REPL))                     # step 8: cached, still the odd sharding
    return b


def test_a_sharding_change_with_the_same_shapes_is_input_sharding(tmp_path: Path) -> None:
    a = analyze(resharded_run(tmp_path / "r.json").done())
    assert a.totals.executions == 9  # ExecuteReplicated counted as executions
    assert a.totals.extra_executions == 0
    assert abs(a.totals.execute_seconds - 9e-3) < 1e-9  # the exec samples, placed by step
    assert [(f.cause, f.kind, f.input) for f in a.findings] == [("input_sharding", "sharding_change", "input_ids")]
    f = a.findings[0]
    assert f.compiles == 1 and abs(f.compile_seconds - 0.25) < 1e-9
    assert f.steps == [6, 8]
    assert f.shardings == [SHARDED, REPL]  # the usual one first
    assert f.shapes == [[8, 16]]
    assert f.evidence[0] == f"step 6: input_ids sharded {REPL}, at step 0 {SHARDED}; same shapes"
    assert f.evidence[1] == f"input_ids was not sharded the usual way ({SHARDED}) at steps 6, 8"
    assert "MpDeviceLoader" in f.advice and "input_sharding=xs.ShardingSpec" in f.advice
    assert a.compiles["cause"].tolist() == ["warmup", "warmup", "input_sharding"]
    assert a.summary()["findings"][0]["shardings"] == [SHARDED, REPL]


def test_several_inputs_changing_sharding_name_the_first_and_the_others(tmp_path: Path) -> None:
    b = SpmdBuilder(tmp_path / "r.json")
    b.step(batch(SHARDED), compile_ms=400)
    b.step(batch(SHARDED), compile_ms=300)
    b.step(batch(SHARDED))
    b.step(batch("", mask=""), compile_ms=250)  # mark_sharding left out for the whole batch
    a = analyze(b.done())
    f = a.findings[0]
    assert (f.cause, f.input) == ("input_sharding", "input_ids")
    assert "input_ids (and attention_mask) sharded no sharding (replicated)" in f.evidence[0]


def test_shape_and_sharding_changing_together_stay_a_shape_change(tmp_path: Path) -> None:
    b = SpmdBuilder(tmp_path / "r.json")
    b.step(batch(SHARDED), compile_ms=400)
    b.step(batch(SHARDED), compile_ms=300)
    b.step(batch(SHARDED))
    b.step(batch(REPL, length=24), compile_ms=250)
    a = analyze(b.done())
    assert [(f.cause, f.input) for f in a.findings] == [("input_shape", "input_ids")]
    assert a.findings[0].shardings is None


def test_a_sharding_seen_only_in_warmup_is_not_a_finding(tmp_path: Path) -> None:
    b = SpmdBuilder(tmp_path / "r.json")
    b.step(batch(REPL), compile_ms=400, nodes=90)  # a one-off first graph (optimizer state)
    b.step(batch(SHARDED), compile_ms=300)
    for _ in range(3):
        b.step(batch(SHARDED))
    a = analyze(b.done())
    assert a.findings == []
    assert a.totals.recompiles == 0


def test_a_sharding_change_in_warm_up_is_warm_up(tmp_path: Path) -> None:
    """Every compile of the first two steps is warm-up, a new sharding's at step 1 too; the same
    change after them is the sharding's."""
    b = SpmdBuilder(tmp_path / "r.json")
    b.step(batch(REPL), compile_ms=400)
    b.step(batch(SHARDED), compile_ms=300)
    for _ in range(3):
        b.step(batch(SHARDED))
    a = analyze(b.done())
    assert a.findings == [] and a.totals.recompiles == 0
    b = SpmdBuilder(tmp_path / "r2.json")
    b.step(batch(REPL), compile_ms=400)
    b.step(batch(REPL))
    b.step(batch(SHARDED), compile_ms=300)
    for _ in range(3):
        b.step(batch(SHARDED))
    a = analyze(b.done())
    # (its steps: where the input was not sharded the usual way)
    assert [(f.cause, f.input, f.steps) for f in a.findings] == [("input_sharding", "input_ids", [0, 1])]
    assert a.findings[0].evidence[0].startswith(f"step 2: input_ids sharded {SHARDED}, at step 0 {REPL}")


def test_runs_without_shardings_read_as_before(tmp_path: Path) -> None:
    b = SpmdBuilder(tmp_path / "r.json")
    b.step(batch(None, mask=None), compile_ms=400)
    b.step(batch(None, mask=None), compile_ms=300)
    b.step(batch(None, mask=None, length=20), compile_ms=300)
    run = b.done()
    assert run.spmd is None
    assert all(i.sharding is None for sig in run.signatures.values() for i in sig)
    a = analyze(run)
    assert a.inputs["sharding"].isna().all()
    assert [f.cause for f in a.findings] == ["input_shape"]
    assert a.findings[0].shardings is None
    assert a.summary()["spmd"] is None


def test_spmd_layout_from_the_header_and_later_records(tmp_path: Path) -> None:
    b = SpmdBuilder(tmp_path / "r.json", meta={"spmd": {"devices": 8, "local_devices": 4, "process_index": 1,
                                                        "process_count": 2}})
    b.step(batch(SHARDED), compile_ms=400)
    b.write({"type": "spmd", "mesh_shape": [4, 2], "axis_names": ["data", "model"]})
    b.step(batch(SHARDED), compile_ms=300)
    b.write({"type": "spmd", "mesh_shape": [8, 1], "axis_names": ["fsdp", None]})
    b.write({"type": "spmd", "mesh_shape": "bad", "devices": True})  # wrong types: not known
    run = b.done()
    spmd = run.spmd
    assert spmd is not None
    assert (spmd.devices, spmd.local_devices, spmd.process_index, spmd.process_count) == (None, 4, 1, 2)
    assert spmd.mesh_shape is None and spmd.axis_names == ("fsdp", None)
    from xprof.report import prose

    assert prose.spmd_line(run) == "SPMD: process 1 of 2"


def test_spmd_found_late_and_the_mesh_in_the_summary(tmp_path: Path) -> None:
    """``xprof run``: no ``meta.spmd`` in the header, an ``spmd`` record at the first barrier."""
    b = SpmdBuilder(tmp_path / "r.json")
    b.write({"type": "spmd", "devices": 4, "local_devices": 4, "process_index": 0, "process_count": 1})
    b.step(batch(SHARDED), compile_ms=400)
    b.write({"type": "spmd", "mesh_shape": [4, 1], "axis_names": ["data", "model"]})
    b.step(batch(SHARDED), compile_ms=300)
    run = b.done()
    assert run.spmd is not None and run.spmd.mesh_shape == (4, 1)
    summary = analyze(run).summary()
    assert summary["spmd"]["mesh_shape"] == (4, 1) and summary["spmd"]["devices"] == 4
    res = CliRunner().invoke(app, ["summary", str(run.path)], env={"COLUMNS": "120"})
    assert res.exit_code == 0 and "SPMD: 4 devices, mesh 4x1 (data, model)" in res.output
    doc = json.loads(CliRunner().invoke(app, ["summary", str(run.path), "--json"]).output)
    assert doc["spmd"]["axis_names"] == ["data", "model"]


def test_compare_shape_diff_tells_shardings_apart(tmp_path: Path) -> None:
    def run(name: str, odd: str | None, plain: bool = False) -> Any:
        b = SpmdBuilder(tmp_path / f"{name}.json")
        for k in range(4):
            spec = odd if k == 3 else SHARDED
            b.step(batch(None if plain else spec, mask=None if plain else SHARDED), compile_ms=300 if k < 2 else 0)
        return analyze(b.done())

    base, new = run("base", SHARDED), run("new", REPL)
    changes = [(s.side, s.input, s.shape, s.sharding, s.steps) for s in diff_shapes(base, new)]
    assert changes == [("new", "input_ids", [8, 16], REPL, 1)]
    # A run without shardings (not SPMD) is compared on shapes alone.
    plain = run("plain", None, plain=True)
    assert diff_shapes(plain, new) == [] and diff_shapes(new, plain) == []
    md = CliRunner().invoke(app, ["compare", str(base.run.path), str(new.run.path), "--markdown"]).output
    assert f"`input_ids`[8, 16] `int64` `{REPL}` (1 steps)" in md


def test_live_notice_for_a_sharding_change(tmp_path: Path) -> None:
    """The live notices say what the analysis says, from the same records."""
    b = resharded_run(tmp_path / "r.json")
    said: list[str] = []
    live = LiveNotices(T0, said.append)
    live.feed(b.records)
    assert said == [f"xprof: step 6 recompiled: input_ids sharded {REPL} (before: {SHARDED}), same shapes; "
                    "1 recompile so far, 0.25 s"]
    assert [key for key, _ in live.said] == ["sharding:input_ids"]
    assert analyze(b.done()).findings[0].id == "sharding:input_ids"


def test_sharding_strings_from_the_file_are_shown_not_obeyed(tmp_path: Path) -> None:
    from tests.test_untrusted import _live_markup

    evil = "{devices=[4,1]}\x1b[2J\x1b]8;;http://evil\x07 @octo/team <img src=x onerror=1>"
    b = SpmdBuilder(tmp_path / "r.json", meta={"spmd": {"devices": 4, "mesh_shape": [4],
                                                        "axis_names": ["d\x1b[31mata"]}})
    b.step(batch(SHARDED), compile_ms=400)
    b.step(batch(SHARDED), compile_ms=300)
    b.step(batch(SHARDED))
    b.step(batch(evil), compile_ms=250)
    run = b.done()
    assert analyze(run).findings[0].shardings == [SHARDED, evil]
    out = CliRunner().invoke(app, ["summary", str(run.path)], env={"COLUMNS": "140"}).output
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)
    assert "\\x1b[2J" in out and "d\\x1b[31mata" in out
    base = SpmdBuilder(tmp_path / "base.json")
    for k in range(3):
        base.step(batch(SHARDED), compile_ms=300 if k < 2 else 0)
    base.done()
    md = CliRunner().invoke(app, ["compare", str(tmp_path / "base.json"), str(run.path), "--markdown"]).output
    assert "@octo/team" in md and _live_markup(md) == []


def test_replicated_executions_are_read_only_once_the_run_is_spmd() -> None:
    from xprof.recorder.metrics import CounterReader

    src = Counters({"UncachedCompile": 2, "CachedCompile": 5, "ExecuteComputation": 0,
                     "ExecuteReplicated": 7, "aten::histc": 1})
    reader = CounterReader(src)
    reader.refresh()
    assert "ExecuteReplicated" not in reader.names and reader.sync_counts() == (2, 5, 0)
    reader.count_replicated()
    assert reader.names[:2] == ("UncachedCompile", "CachedCompile")  # the barrier reads them first
    assert "ExecuteReplicated" in reader.names and "aten::histc" in reader.names
    assert reader.sync_counts() == (2, 5, 7)
    src.values["aten::median"] = 1
    assert reader.refresh() and {"ExecuteReplicated", "aten::median"} <= set(reader.names)


def test_a_read_that_ran_no_graph_reads_one_counter_after_it() -> None:
    from xprof.recorder.metrics import CounterReader

    class Counted(Counters):
        def __init__(self, values: dict[str, int]) -> None:
            super().__init__(values)
            self.reads: list[str] = []

        def counter_value(self, name: str) -> int | None:
            self.reads.append(name)
            return super().counter_value(name)

    src = Counted({"UncachedCompile": 2, "CachedCompile": 5, "ExecuteComputation": 9})
    reader = CounterReader(src)
    before = reader.sync_counts()
    src.reads.clear()
    assert reader.sync_counts_after(before) == (2, 5, 9) and src.reads == ["ExecuteComputation"]
    # A read that ran a graph compiled it (or found it compiled): all three are read again.
    src.values.update({"UncachedCompile": 3, "ExecuteComputation": 10})
    assert reader.sync_counts_after(before) == (3, 5, 10)
    # SPMD: executions are counted in ExecuteReplicated.
    reader.count_replicated()
    before = reader.sync_counts()
    src.values["ExecuteReplicated"] = 4
    src.values["CachedCompile"] = 6
    assert reader.sync_counts_after(before) == (3, 6, 14)
