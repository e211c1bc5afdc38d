"""The run-file loader: exact messages for bad input, and no surprise on corruption.

Unit tests pin the one-line message for each kind of bad file (the CLI prints it as is).
Property tests (hypothesis) corrupt a realistic run file (truncation at any byte, byte
flips, deleted lines) and check that loading never raises anything but ``RunFileError``
and never invents steps. No torch needed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xprof.runfile import FORMAT, VERSION, Run, RunFileError, RunWriter, load_run

HEADER = {"xprof_version": "0.1.0", "name": "demo", "started_at": "2026-01-01T00:00:00+00:00",
          "started_unix": 1.7e9, "meta": {"torch": "2.9.0", "torch_xla": "2.9.0", "device": "CPU",
                                          "rank": 0, "world_size": 1}}


def _realistic_records(steps: int = 12) -> list[dict[str, Any]]:
    """Records shaped like those ``xprof.watch()`` writes for a small loop with a print."""
    t = 1.7e9
    recs: list[dict[str, Any]] = [
        {"type": "sig", "id": 0, "inputs": [
            {"name": "batch[0]", "shape": [8, 16], "dtype": "float32", "src": "batch"},
            {"name": "batch[1]", "shape": [8, 1], "dtype": "float32", "src": "batch"}]},
        {"type": "compile", "i": 0, "t": t + 1.05, "ns": 1.04e9, "at": "barrier"},
        {"type": "graph_sizes", "samples": [[t + 1.06, 36.0]]},
        {"type": "site", "id": 0, "kind": "item", "file": "/work/train.py", "line": 18,
         "func": "<module>", "via": None, "code": "print(loss.item())"},
    ]
    for i in range(steps):
        t0, tb, t1 = t + i * 0.01, t + i * 0.01 + 0.004, t + i * 0.01 + 0.005
        rec: dict[str, Any] = {"type": "step", "i": i, "t0": t0, "tb": tb, "t1": t1,
                               "barrier": "mark_step", "c": {"CachedCompile": 1, "MarkStep": 1,
                                                             "ExecuteComputation": 1}, "bc": 1, "sig": 0}
        if i == 0:
            rec["c"] = {"UncachedCompile": 1, "MarkStep": 1}
            rec["bu"] = 1
            del rec["bc"]
        if i % 4 == 3:
            recs.append({"type": "sync", "i": i, "site": 0, "t0": t0 + 0.001, "t1": t0 + 0.002})
            rec["xfer"] = [1, 141335.0]
        recs.append(rec)
    recs.append({"type": "exec", "samples": [[t + i * 0.01 + 0.003, 3.0e5] for i in range(1, steps)]})
    recs.append({"type": "error", "t": t + 0.5, "where": "barrier", "error": "RuntimeError: x",
                 "trace": None})
    recs.append({"type": "end", "t": t + steps * 0.01, "status": "ok", "exception": None,
                 "steps": steps, "syncs": steps // 4, "errors": 1})
    return recs


def _write(path: Path, records: list[dict[str, Any]], header: dict[str, Any] | None = None) -> Path:
    w = RunWriter(path, HEADER if header is None else header)
    for r in records:
        w.write(r)
    w.close()
    return path


@pytest.fixture(scope="module")
def good_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = _write(tmp_path_factory.mktemp("good") / "run.json", _realistic_records())
    return path.read_bytes()


@pytest.fixture(scope="module")
def scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="xprof-runfile-") as d:
        yield d


def _load_bytes(folder: str, data: bytes) -> Run:
    path = os.path.join(folder, "corrupt.json")
    with open(path, "wb") as f:
        f.write(data)
    return load_run(path)


def _raises(path: Path | str, message: str) -> None:
    with pytest.raises(RunFileError) as info:
        load_run(path)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


# -- a good file ------------------------------------------------------------------------

def test_good_file_loads_every_record(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.json", _realistic_records(12))
    run = load_run(path)
    assert run.header["format"] == FORMAT and run.header["version"] == VERSION
    assert [s.i for s in run.steps] == list(range(12))
    assert len(run.syncs) == 3 and 0 in run.sites and 0 in run.signatures
    assert len(run.compiles) == 1 and len(run.executions) == 11 and len(run.graph_sizes) == 1
    assert len(run.errors) == 1
    assert run.complete and run.end is not None and run.end.status == "ok"
    assert run.skipped_lines == 0 and not run.truncated_tail
    assert run.name == "demo"


def test_records_are_decoded_into_typed_fields(tmp_path: Path) -> None:
    run = load_run(_write(tmp_path / "run.json", _realistic_records(4)))
    first, later = run.steps[0], run.steps[1]
    assert (first.i, first.barrier, first.barrier_uncached, first.barrier_cached, first.sig) == (
        0, "mark_step", 1, 0, 0)
    assert first.counters == {"UncachedCompile": 1, "MarkStep": 1} and first.ran_graph
    assert later.barrier_cached == 1 and later.t0 <= later.tb <= later.t1
    sync = run.syncs[0]
    assert (sync.i, sync.site, sync.uncached, sync.cached, sync.executions, sync.deferred, sync.thread) == (
        3, 0, 0, 0, 0, False, None) and sync.live
    site = run.sites[0]
    assert (site.access, site.file, site.line, site.func, site.via, site.code) == (
        "item", "/work/train.py", 18, "<module>", None, "print(loss.item())")
    assert [(x.name, x.shape, x.dtype, x.src) for x in run.signatures[0]] == [
        ("batch[0]", (8, 16), "float32", "batch"), ("batch[1]", (8, 1), "float32", "batch")]
    assert [(c.i, c.ns, c.at) for c in run.compiles] == [(0, 1.04e9, "barrier")]
    assert [(e.where, e.error, e.trace) for e in run.errors] == [("barrier", "RuntimeError: x", None)]
    assert run.end is not None and (run.end.status, run.end.steps, run.end.syncs, run.end.errors) == ("ok", 4, 1, 1)
    assert run.end.tail == {} and run.end.samples_dropped == ()


def test_numbers_written_as_ints_decode_as_floats(tmp_path: Path) -> None:
    run = load_run(_write(tmp_path / "run.json", [
        {"type": "step", "i": 0, "t0": 1, "tb": 2, "t1": 3, "bu": 1, "c": {"UncachedCompile": 1}},
        {"type": "sync", "i": 0, "site": 0, "t0": 2, "t1": 3, "x": 2, "deferred": True, "thread": "w"}]))
    assert run.steps[0][1:4] == (1.0, 2.0, 3.0) and all(type(v) is float for v in run.steps[0][1:4])
    assert run.steps[0].sig is None and run.steps[0].barrier == "sync"
    assert run.syncs[0].executions == 2 and run.syncs[0].deferred and not run.syncs[0].live
    assert run.syncs[0].thread == "w"


@pytest.mark.parametrize("record", [
    {"type": "step", "i": 1, "t0": "soon"},
    {"type": "step", "i": 1, "bu": [1]},
    {"type": "sync", "i": 1, "site": "here"},
    {"type": "site", "id": 1, "line": "ten"},
    {"type": "compile", "i": 1, "ns": {}},
    {"type": "end", "t": "later"},
])
def test_a_field_of_the_wrong_type_skips_its_record(tmp_path: Path, record: dict[str, Any]) -> None:
    run = load_run(_write(tmp_path / "run.json", [{"type": "step", "i": 0}, record]))
    assert run.skipped_lines == 1
    assert [s.i for s in run.steps] == [0] and not run.syncs and 1 not in run.sites and not run.compiles
    assert run.end is None


# -- bad files: one exact line each ---------------------------------------------------

def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.json"
    _raises(p, f"{p}: no such file")


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.json"
    p.write_text("")
    _raises(p, f"{p}: empty file, not an xprof run file")


def test_blank_first_line(tmp_path: Path) -> None:
    p = tmp_path / "blank.json"
    p.write_text("\n\n")
    _raises(p, f"{p}: empty file, not an xprof run file")


def test_truncated_header(tmp_path: Path) -> None:
    p = tmp_path / "cut.json"
    p.write_text('{"format": "xprof-run", "vers')
    _raises(p, f"{p}: truncated run file (the header line is incomplete)")


def test_garbage(tmp_path: Path) -> None:
    p = tmp_path / "garbage.json"
    p.write_text("hello, this is a text file\nmore\n")
    _raises(p, f"{p}: not an xprof run file (the first line is not JSON)")


def test_binary_garbage(tmp_path: Path) -> None:
    p = tmp_path / "bin.json"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    _raises(p, f"{p}: not an xprof run file (not UTF-8 text)")


@pytest.mark.parametrize("text", ['{"name": "x", "steps": []}\n', '{"format": "other"}\n',
                                  "[1, 2, 3]\n", '"xprof-run"\n', "42\n", "null\n"])
def test_foreign_json(tmp_path: Path, text: str) -> None:
    p = tmp_path / "foreign.json"
    p.write_text(text)
    _raises(p, f'{p}: not an xprof run file (no "format": "xprof-run" header)')


def test_whole_file_json_array(tmp_path: Path) -> None:
    p = tmp_path / "array.json"
    p.write_text(json.dumps([{"format": "xprof-run", "version": 1}, {"type": "step", "i": 0}], indent=2))
    _raises(p, f"{p}: not an xprof run file (the first line is not JSON)")


def test_newer_version_exact_message(tmp_path: Path) -> None:
    p = tmp_path / "newer.json"
    p.write_text(json.dumps({"format": "xprof-run", "version": VERSION + 1, "xprof_version": "9.9.0"})
                 + "\n" + '{"type":"step","i":0}\n')
    _raises(p, f"{p}: run file format version {VERSION + 1} (written by xprof 9.9.0) is newer than "
               f"this xprof reads (up to version {VERSION}); upgrade xprof")


@pytest.mark.parametrize("version", [0, -1, "1", None, True, 1.5])
def test_invalid_version(tmp_path: Path, version: Any) -> None:
    p = tmp_path / "badversion.json"
    p.write_text(json.dumps({"format": "xprof-run", "version": version}) + "\n")
    _raises(p, f"{p}: run file header has an invalid version {version!r}")


def test_directory(tmp_path: Path) -> None:
    _raises(tmp_path, f"{tmp_path}: is a directory, not a run file")


# -- damaged but readable -------------------------------------------------------------

def test_cut_off_last_line_is_truncated_tail_and_incomplete(tmp_path: Path, good_bytes: bytes) -> None:
    lines = good_bytes.splitlines(keepends=True)
    # no end record, and the last line (an error record) cut in half as a kill would leave it
    p = tmp_path / "killed.json"
    p.write_bytes(b"".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])
    run = load_run(p)
    assert run.truncated_tail
    assert not run.complete
    assert run.skipped_lines == 0
    assert len(run.steps) == 12


def test_killed_between_lines_is_incomplete_not_truncated(tmp_path: Path, good_bytes: bytes) -> None:
    lines = good_bytes.splitlines(keepends=True)
    p = tmp_path / "killed.json"
    p.write_bytes(b"".join(lines[:-1]))
    run = load_run(p)
    assert not run.complete and not run.truncated_tail
    assert len(run.steps) == 12


def test_header_only(tmp_path: Path) -> None:
    p = _write(tmp_path / "header.json", [])
    run = load_run(p)
    assert run.steps == [] and not run.complete and not run.truncated_tail


def test_bad_line_in_the_middle_is_skipped_and_counted(tmp_path: Path, good_bytes: bytes) -> None:
    lines = good_bytes.splitlines(keepends=True)
    lines.insert(6, b'{"type":"step","i":\n')
    lines.insert(3, b"[1,2]\n")
    p = tmp_path / "mid.json"
    p.write_bytes(b"".join(lines))
    run = load_run(p)
    assert run.skipped_lines == 2
    assert not run.truncated_tail
    assert len(run.steps) == 12 and run.complete


def test_one_bad_byte_in_a_record_skips_that_line_only(tmp_path: Path, good_bytes: bytes) -> None:
    lines = good_bytes.split(b"\n")
    lines[8] = lines[8][:20] + b"\xff" + lines[8][21:]
    p = tmp_path / "flipped.json"
    p.write_bytes(b"\n".join(lines))
    run = load_run(p)
    assert run.skipped_lines == 1 and run.complete


def test_bad_byte_in_the_last_line_is_a_truncated_tail(tmp_path: Path, good_bytes: bytes) -> None:
    lines = good_bytes.rstrip(b"\n").split(b"\n")
    lines[-1] = lines[-1][:10] + b"\xc3"  # a kill in the middle of a two-byte character
    p = tmp_path / "cut.json"
    p.write_bytes(b"\n".join(lines))
    run = load_run(p)
    assert run.truncated_tail and not run.complete and run.skipped_lines == 0


def test_bad_byte_inside_a_json_string_skips_the_line(tmp_path: Path) -> None:
    """The line parses as JSON (a lone surrogate is a valid string) but its text is damaged."""
    p = _write(tmp_path / "run.json", [{"type": "step", "i": 0, "barrier": "mark_step"},
                                       {"type": "step", "i": 1, "barrier": "mark_step"},
                                       {"type": "step", "i": 2, "barrier": "mark_step"}])
    data = p.read_bytes().replace(b'"i":1,"barrier":"mark_', b'"i":1,"barrier":"m\xffrk_')
    p.write_bytes(data)
    run = load_run(p)
    assert [s.i for s in run.steps] == [0, 2] and run.skipped_lines == 1


def test_bad_byte_in_the_header_refuses_the_file(tmp_path: Path) -> None:
    p = _write(tmp_path / "run.json", [{"type": "step", "i": 0}])
    p.write_bytes(p.read_bytes().replace(b'"demo"', b'"d\xffmo"', 1))
    _raises(p, f"{p}: not an xprof run file (not UTF-8 text)")


def test_xfer_records_load_into_transfers(tmp_path: Path) -> None:
    p = _write(tmp_path / "run.json", [
        {"type": "xfer", "samples": [[1.7e9 + 1.0, 141335.0], [1.7e9 + 2.0, 9e4]]},
        {"type": "xfer", "samples": [[1.7e9 + 3.0, 5]]},
        {"type": "step", "i": 0, "xfer": [1, 141335.0]}])
    run = load_run(p)
    assert run.transfers == [(1.7e9 + 1.0, 141335.0), (1.7e9 + 2.0, 9e4), (1.7e9 + 3.0, 5.0)]
    assert run.skipped_lines == 0 and len(run.steps) == 1
    assert run.executions == []


@pytest.mark.parametrize("samples, expected", [
    ([[1.0, 2.0], [3.0, 4.0]], [(1.0, 2.0), (3.0, 4.0)]),
    ([[1, 2], [3.5, 4]], [(1.0, 2.0), (3.5, 4.0)]),
    ([[1.0, True], [2.0, 3.0], [1.0], [1.0, 2.0, 3.0], "x", None, [1.0, "2"]], [(2.0, 3.0)]),
    ([], []), ("not a list", []), ({"a": [1.0, 2.0]}, []),
])
def test_sample_pairs_keep_only_two_numbers(tmp_path: Path, samples: Any, expected: Any) -> None:
    """The fast path for all-float samples and the item-by-item check give the same pairs."""
    p = _write(tmp_path / "run.json", [{"type": "exec", "samples": samples}])
    run = load_run(p)
    assert run.executions == expected
    assert all(type(a) is float and type(b) is float for a, b in run.executions)


def test_lines_the_fast_scanner_does_not_take_are_judged_by_json_loads(tmp_path: Path) -> None:
    p = _write(tmp_path / "run.json", [])
    with open(p, "a", encoding="utf-8") as f:
        f.write('  {"type": "step", "i": 0}  \n')  # leading and trailing whitespace: fine
        f.write('{"type": "step", "i": 1} x\n')  # extra data: unreadable
        f.write('{"type": "step", "i": 2}\r\n')  # CRLF: fine
        f.write('\ufeff{"type": "step", "i": 3}\n')  # a BOM inside the file: unreadable
        f.write('{"type": "step", "i": 4}')  # last line without a newline: fine
    run = load_run(p)
    assert [s.i for s in run.steps] == [0, 2, 4]
    assert run.skipped_lines == 2 and not run.truncated_tail


@pytest.mark.parametrize("kind", [["step"], {"a": 1}, 3, None])
def test_record_type_that_is_not_a_string_is_skipped(tmp_path: Path, kind: Any) -> None:
    p = _write(tmp_path / "run.json", [{"type": kind, "i": 0}, {"type": "step", "i": 1}])
    run = load_run(p)
    assert [s.i for s in run.steps] == [1] and run.skipped_lines == 1


def test_unknown_record_types_are_skipped_not_fatal(tmp_path: Path) -> None:
    p = _write(tmp_path / "future.json", [{"type": "hologram", "x": 1}, {"type": "step", "i": 0},
                                          {"type": "step", "i": "one"}, {"no": "type"}])
    run = load_run(p)
    assert [s.i for s in run.steps] == [0]
    assert run.skipped_lines == 3


def test_steps_out_of_order_or_repeated_are_impossible_records(tmp_path: Path) -> None:
    p = _write(tmp_path / "order.json", [{"type": "step", "i": 0}, {"type": "step", "i": 2},
                                         {"type": "step", "i": 1}, {"type": "step", "i": 2},
                                         {"type": "step", "i": 3}])
    run = load_run(p)
    assert [s.i for s in run.steps] == [0, 2, 3]
    assert (run.impossible, run.skipped_lines) == (2, 0)


# -- corruption never surprises ---------------------------------------------------------

def _check(folder: str, data: bytes, original_steps: int) -> None:
    try:
        run = _load_bytes(folder, data)
    except RunFileError as exc:
        assert "\n" not in str(exc)
        return
    assert len(run.steps) <= original_steps
    assert all(isinstance(s.i, int) for s in run.steps)


def test_truncation_at_every_byte(good_bytes: bytes, scratch: str) -> None:
    """Exhaustive: a process killed at any byte leaves a file that loads or says why."""
    n_steps = len(load_run(_write(Path(scratch) / "orig.json", _realistic_records())).steps)
    prev_steps = 0
    header_end = good_bytes.index(b"\n") + 1
    for cut in range(len(good_bytes) + 1):
        try:
            run = _load_bytes(scratch, good_bytes[:cut])
        except RunFileError:
            assert cut < header_end, f"a cut at byte {cut} (after the header) was refused"
            continue
        assert len(run.steps) >= prev_steps, "a longer prefix lost steps"
        assert len(run.steps) <= n_steps
        prev_steps = len(run.steps)
        assert run.complete == (cut >= len(good_bytes) - 1)
    assert prev_steps == n_steps


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_corruption_only_raises_runfileerror(good_bytes: bytes, scratch: str,
                                                    data: st.DataObject) -> None:
    buf = bytearray(good_bytes)
    for _ in range(data.draw(st.integers(1, 4), label="corruptions")):
        kind = data.draw(st.sampled_from(["flip", "truncate", "delete_line", "insert"]), label="kind")
        if not buf:
            break
        if kind == "flip":
            pos = data.draw(st.integers(0, len(buf) - 1), label="pos")
            buf[pos] = data.draw(st.integers(0, 255), label="byte")
        elif kind == "truncate":
            del buf[data.draw(st.integers(0, len(buf)), label="at"):]
        elif kind == "delete_line":
            lines = bytes(buf).split(b"\n")
            del lines[data.draw(st.integers(0, len(lines) - 1), label="line")]
            buf = bytearray(b"\n".join(lines))
        else:
            pos = data.draw(st.integers(0, len(buf)), label="pos")
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=8), label="junk")
    _check(scratch, bytes(buf), 12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["type", "i", "id", "inputs", "samples", "status"]),
                    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5),
                              st.sampled_from(["step", "sync", "site", "sig", "exec", "end"]),
                              st.lists(st.one_of(st.integers(), st.lists(st.floats(), max_size=3)),
                                       max_size=3))),
    st.text(max_size=20)), max_size=12))
def test_wrongly_typed_records_never_crash(scratch: str, lines: list[Any]) -> None:
    header = json.dumps({"format": FORMAT, "version": VERSION})
    body = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    text = header + "\n" + body.replace("\r", "")
    try:
        run = _load_bytes(scratch, text.encode("utf-8"))
    except RunFileError:
        return
    assert all(isinstance(s.i, int) and isinstance(s.t0, float) and isinstance(s.counters, dict)
               for s in run.steps)
    assert all(isinstance(k, int) and isinstance(v.line, int) for k, v in run.sites.items())
    assert all(isinstance(s.site, int) and isinstance(s.t1, float) for s in run.syncs)
