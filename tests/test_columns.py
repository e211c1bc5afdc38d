"""The columnar reader (DuckDB) against the record reader: the same columns, the same
accounting of damaged lines, and the same analysis on every committed sample run.

The scenarios (real torch_xla runs) are checked the same way in test_scenarios.py. No torch.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from xprof.analysis import Analysis, analyze
from xprof.runcolumns import ColumnRun, RunColumns, columns_of, load_columns, with_records
from xprof.runfile import Run, load_run

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "sample_runs").glob("*.json"))


def assert_same_columns(a: RunColumns, b: RunColumns) -> None:
    for part in ("steps", "syncs", "compiles"):
        x, y = getattr(a, part), getattr(b, part)
        assert list(x) == list(y), part
        for name in x:
            assert len(x[name]) == len(y[name]), (part, name)
            assert np.ma.getmaskarray(x[name]).tolist() == np.ma.getmaskarray(y[name]).tolist(), (part, name)
            assert np.array_equal(np.ma.getdata(x[name]), np.ma.getdata(y[name])), (part, name)
    assert sorted(a.counters) == sorted(b.counters)
    for name in a.counters:
        assert a.counters[name].tolist() == b.counters[name].tolist(), name
    for name in ("executions", "transfers", "graph_sizes"):
        assert a.sample(name).tolist() == b.sample(name).tolist(), name


def assert_same_run(read: ColumnRun, typed: Run) -> None:
    """A run read as columns holds what the record reader read (its own lists of bulk
    records empty: they are the columns)."""
    assert_same_columns(read.columns, columns_of(typed))
    cols = read.run
    for name in ("header", "sites", "signatures", "errors", "debug", "dynamo", "end"):
        assert getattr(cols, name) == getattr(typed, name), name
    assert (cols.skipped_lines, cols.truncated_tail, cols.impossible) == (typed.skipped_lines, typed.truncated_tail,
                                                                          typed.impossible)
    assert not (cols.steps or cols.syncs or cols.compiles or cols.executions or cols.transfers or cols.graph_sizes)


def assert_same_analysis(a: Analysis, b: Analysis) -> None:
    for name in ("steps", "compiles", "syncs", "inputs"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_dtype=True, obj=name)
    assert a.totals == b.totals
    assert a.findings == b.findings
    assert a.notes == b.notes
    assert a.summary() == b.summary()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_columnar_reader_gives_the_same_analysis_on_sample_runs(path: Path) -> None:
    cols, typed = load_columns(path, engine="duckdb"), load_run(path)
    assert_same_run(cols, typed)
    assert_same_analysis(analyze(cols), analyze(typed))


def test_records_come_back_from_columns() -> None:
    path = SAMPLES[0]
    back, typed = with_records(load_columns(path, engine="duckdb")), load_run(path)
    assert (back.steps, back.syncs, back.compiles) == (typed.steps, typed.syncs, typed.compiles)
    assert (back.executions, back.graph_sizes, back.transfers) == (typed.executions, typed.graph_sizes,
                                                                   typed.transfers)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _damaged(tmp_path: Path, name: str, edit: Any) -> Path:
    """A copy of the sample run with more host reads, edited line by line."""
    lines = _lines(Path(SAMPLES[0]).with_name("item_every_step.json"))
    out = tmp_path / f"{name}.json"
    out.write_bytes(b"".join(s if isinstance(s, bytes) else s.encode("utf-8") for s in edit(lines)))
    return out


def _step_rows(lines: list[str]) -> list[int]:
    return [k for k, s in enumerate(lines) if s.startswith('{"type":"step"')]


CASES: dict[str, Any] = {
    "garbage_in_the_middle": lambda ls: ls[:5] + ["this is not json\n"] + ls[5:],
    "cut_step_at_the_end": lambda ls: ls[:_step_rows(ls)[-1]] + [ls[_step_rows(ls)[-1]][:25]],
    "cut_small_record_at_the_end": lambda ls: ls + ['{"type":"end","t":1.0,"sta'],
    "cut_line_then_blank": lambda ls: ls + ['{"type":"step","i":9', "\n", "   \n"],
    "not_utf8_step": lambda ls: ls[:6] + [b'{"type":"step","i":999,"barrier":"\xff\xfe"}\n'] + ls[6:],
    "not_utf8_at_the_end": lambda ls: ls + [b'{"type":"step","i":999,"barrier":"\xff'],
    "step_without_index": lambda ls: ls[:6] + ['{"type":"step","t0":1.0}\n', '{"type":"compile","t":2.0}\n']
    + ls[6:],
    "step_index_not_a_number": lambda ls: ls[:6] + ['{"type":"step","i":"x","t0":1.0}\n'] + ls[6:],
    "unknown_type_and_non_objects": lambda ls: ls[:4] + ['{"type":"future","x":1}\n', "[1, 2]\n", "{}\n", "7\n"]
    + ls[4:],
    "blank_lines": lambda ls: [ls[0], "\n", "  \n"] + ls[1:] + ["\n"],
    "no_newline_at_the_end": lambda ls: ls[:-1] + [ls[-1].rstrip("\n")],
    "keys_in_another_order": lambda ls: ls + ['{"i":50,"type":"step","t0":9.0,"tb":9.1,"t1":9.2}\n'],
    "repeated_step": lambda ls: ls + [ls[_step_rows(ls)[3]]],
    "nested_too_deep": lambda ls: ls[:5] + ["[" * 100000 + "]" * 100000 + "\n"] + ls[5:],
    "samples_with_odd_pairs": lambda ls: ls + ['{"type":"exec","samples":[[1.0,2.0],[3.0],"x",[4.0,5.0]]}\n'],
    "counters_not_an_object": lambda ls: ls + ['{"type":"step","i":77,"t0":1.0,"tb":1.1,"t1":1.2,"c":5}\n'],
    "only_the_header": lambda ls: ls[:1],
    # (longer than DuckDB's smallest buffer: xprof.runcolumns.queries.object_size)
    "a_line_of_megabytes": lambda ls: ls + ['{"type":"exec","samples":[' + ",".join(["[1.5,2.25]"] * 300_000) + "]}\n"],
    "odd_counter_values": lambda ls: ls + [
        '{"type":"step","i":78,"t0":1.0,"tb":1.1,"t1":1.2,"c":{"UncachedCompile":"x","it\'s":3,"Z":null}}\n',
        '{"type":"step","i":79,"t0":1.3,"tb":1.4,"t1":1.5,"c":{"MarkStep":99999999999999999999999,"it\'s":2}}\n',
        '{"type":"step","i":80,"t0":1.6,"tb":1.7,"t1":1.8,"c":{"MarkStep":[1],"q\\"uote":4}}\n'],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_files_are_read_alike(tmp_path: Path, case: str) -> None:
    path = _damaged(tmp_path, case, CASES[case])
    cols, typed = load_columns(path, engine="duckdb"), load_run(path)
    assert_same_run(cols, typed)
    assert_same_analysis(analyze(cols), analyze(typed))


@pytest.mark.parametrize("case", ["odd_counter_values", "counters_not_an_object", "repeated_step"])
def test_counters_read_alike_when_every_step_is_parsed(tmp_path: Path, case: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """More distinct counters objects than runcolumns codes: each step's own is parsed."""
    import xprof.runcolumns.queries

    monkeypatch.setattr(xprof.runcolumns.queries, "CODED_COUNTERS", 0)
    path = _damaged(tmp_path, case, CASES[case])
    assert_same_run(load_columns(path, engine="duckdb"), load_run(path))


def test_a_path_that_looks_like_a_glob_pattern(tmp_path: Path) -> None:
    folder = tmp_path / "runs [2026]*"
    folder.mkdir()
    path = folder / "run?.json"
    shutil.copy(SAMPLES[0], path)
    shutil.copy(SAMPLES[1], folder / "runX.json")  # what the pattern would match instead
    assert_same_run(load_columns(path, engine="duckdb"), load_run(path))


def test_small_files_take_the_record_reader_and_give_the_same_columns(tmp_path: Path) -> None:
    path = SAMPLES[0]
    assert_same_run(load_columns(path), load_run(path))  # auto: below SMALL_FILE
    typed = load_run(path)
    made = dataclasses.replace(typed)  # a Run built by hand (or by load_run): its columns are built from it
    assert_same_analysis(analyze(made), analyze(load_columns(path, engine="duckdb")))


def test_bad_files_fail_with_one_line_like_the_record_reader(tmp_path: Path) -> None:
    from xprof.runfile import RunFileError

    cases = {"empty.json": b"", "garbage.json": b"garbage\n", "newer.json":
             json.dumps({"format": "xprof-run", "version": 99}).encode() + b"\n"}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(RunFileError) as a:
            load_columns(p, engine="duckdb")
        with pytest.raises(RunFileError) as b:
            load_run(p)
        assert str(a.value) == str(b.value)


def test_a_long_file_is_read_in_file_order_on_many_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of many DuckDB buffers (~27 MB; at 2 threads or more DuckDB 2.0 gave one row of
    such a file out of order), read with 4 threads allowed: its rows come in file order, so
    DuckDB's reading stands (rows out of order would send the file to the record reader). Read
    as a big file is: the connection closed once the table is read, the counters made after."""
    import xprof.runcolumns.load
    from xprof.runcolumns import close

    head = [s for s in _lines(SAMPLES[0].with_name("item_every_step.json")) if not s.startswith('{"type":"step"')]
    pad = "x" * 850  # (a key no reader reads: bytes without records to compare)
    steps = [json.dumps({"type": "step", "i": i, "t0": 10.0 + i, "tb": 10.5 + i, "t1": 11.0 + i, "bc": 1, "sig": 0,
                         "o": 1, "c": {"MarkStep": 1, "CachedCompile": 1}, "pad": pad}, separators=(",", ":")) + "\n"
             for i in range(1, 30_000)]
    path = tmp_path / "long.json"
    path.write_text("".join(head[:-1] + steps + head[-1:]), encoding="utf-8")

    def records_reader(p: str) -> None:
        raise AssertionError(f"{p} was read record by record")

    monkeypatch.setenv("XPROF_THREADS", "4")
    monkeypatch.setattr(xprof.runcolumns.load, "_records_as_columns", records_reader)
    monkeypatch.setattr(xprof.runcolumns.load, "BIG_FILE", 1)  # (as a big file: the connection closed mid-read)
    close()  # (a fresh connection with 4 threads)
    try:
        assert_same_run(load_columns(path, engine="duckdb"), load_run(path))
    finally:
        close()


def test_step_columns_at_their_default_are_one_shared_read_only_array(tmp_path: Path) -> None:
    """A step field no step sets (``dz``, ``mg``, ``site``...) is not fetched from DuckDB: its
    column is one read-only array shared by the columns holding the same default, with the
    record reader's dtype and values; a field some step sets is fetched as before."""
    lines = _lines(SAMPLES[0].with_name("item_every_step.json"))
    k = _step_rows(lines)[2]
    lines[k] = lines[k].replace('"type":"step",', '"type":"step","mg":2,', 1)
    path = tmp_path / "one_mid_graph.json"
    path.write_text("".join(lines), encoding="utf-8")
    st, typed = load_columns(path, engine="duckdb").columns.steps, columns_of(load_run(path)).steps
    assert {name: v.dtype for name, v in st.items()} == {name: v.dtype for name, v in typed.items()}
    constant = ["dynamo_graphs", "backward", "site"]
    assert not any(st[name].flags.writeable for name in constant)
    assert np.shares_memory(np.ma.getdata(st["dynamo_graphs"]), np.ma.getdata(st["site"]))
    assert np.ma.getmaskarray(st["site"]).all() and not np.ma.getdata(st["site"]).any()
    assert st["mid_graphs"].flags.writeable and st["mid_graphs"].tolist().count(2) == 1
    assert_same_run(load_columns(path, engine="duckdb"), load_run(path))
