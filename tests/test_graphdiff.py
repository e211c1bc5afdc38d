"""--explain's pure side: the HLO reader and the graph diff, on graphs recorded once from
torch_xla 2.9 (tests/fixtures/hlo/make_protos.py says how), and the run file's ``graph``
records. No torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xprof.hlo import HloError, diff, distance, keys, read_module
from xprof.runfile import load_run

HLO = Path(__file__).parent / "fixtures" / "hlo"


def _graph(name: str):  # type: ignore[no-untyped-def]
    return read_module((HLO / f"{name}.pb").read_bytes())


def _user(path: str) -> bool:
    return path.endswith("probe2.py")


def test_the_reader_gives_ops_operands_and_frames() -> None:
    g = _graph("base")
    assert len(g.ops) > 50 and g.parameters >= 5
    assert g.ops[-1].opcode == "tuple"
    assert all(k < n for n, op in enumerate(g.ops) for k in op.operands)  # operands come first
    framed = [op for op in g.ops if any(_user(f.file) for f in op.frames)]
    assert {f.line for op in framed for f in op.frames if _user(f.file)} >= {11, 12}
    slices = [op for op in g.ops if op.opcode == "slice"]
    assert slices and ("slice", ((0, 8, 1), (0, 4, 1))) in slices[0].attrs
    assert any(op.opcode == "constant" and op.literal == (1.0,) for op in g.ops)


def test_a_graph_is_its_own_closest() -> None:
    a, b = keys(_graph("base")), keys(_graph("scale_one"))
    assert distance(a, a) == 0 < distance(a, b)
    d = diff(_graph("base"), _graph("base"), _user)
    assert (d.lines, d.changed) == ([], 0)


def test_a_number_that_became_the_constant_1_is_named_at_its_line() -> None:
    d = diff(_graph("base"), _graph("scale_one"), _user)
    assert [(c.line, c.what, c.kind, c.op) for c in d.lines] == [
        (12, "an input became the constant 1", "constant", "multiply")]
    assert d.backward > 0  # its backward ops changed too, with no frame
    back = diff(_graph("scale_one"), _graph("base"), _user)
    assert back.lines[0].what == "the constant 1 became an input"


def test_a_slice_bound_is_named_at_its_line() -> None:
    d = diff(_graph("base"), _graph("slice_six"), _user)
    assert [(c.line, c.what, c.kind) for c in d.lines] == [(11, "slice 4 -> 6", "bound")]


@pytest.mark.parametrize("data", [b"\x1a\xff\xff\x01", b"\x0a", b"\x1a\x02\x12", b"\x07", b"not a proto"])
def test_malformed_bytes_raise_hlo_error(data: bytes) -> None:
    with pytest.raises(HloError):
        read_module(data)


def test_nothing_pending_is_an_empty_graph_not_an_error() -> None:
    """torch_xla answers b"" for tensors already on the device (a read of a value computed at
    the last barrier): no graph ran, which is no error to log in the user's process."""
    assert read_module(b"").ops == []


def test_graph_records_are_read_and_bad_ones_skipped(tmp_path: Path) -> None:
    header = {"format": "xprof-run", "version": 1, "name": "t", "started_unix": 1.0, "meta": {}}
    line = {"file": "/a/train.py", "line": 23, "func": "train", "code": "loss = x * w", "what": "slice 4 -> 6",
            "kind": "bound", "op": "slice", "ops": 2}
    good = {"type": "debug", "kind": "graph", "i": 3, "at": "barrier", "hash": "ab", "ops": 80, "inputs": 7,
            "base": 1, "changed": 9, "lines": [line], "backward": 4}
    bad = {**good, "lines": [{**line, "line": "23"}]}
    impossible = {**good, "i": -1}
    path = tmp_path / "run.json"
    path.write_text("\n".join(json.dumps(r) for r in (header, good, bad, impossible)) + "\n")
    run = load_run(path)
    (g,) = run.graph_changes
    assert (g.i, g.base, g.backward, g.lines[0].what, g.lines[0].line) == (3, 1, 4, "slice 4 -> 6", 23)
    assert (run.skipped_lines, run.impossible) == (1, 1)
    assert not run.debug  # (not a torch_xla debug entry)


def test_a_run_where_explain_switched_itself_on_says_from_when() -> None:
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    run = Path(__file__).resolve().parent / "corpus" / "runs" / "trainer_padded_eval.json"
    notes = analyze(load_run(run)).notes
    assert any(n.startswith("--explain switched itself on at step 2 (a new graph from inputs seen before)")
               for n in notes), notes
