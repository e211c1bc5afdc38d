"""Readers never hang and never grow without bound (issue 28): a FIFO, a pipe or a device
is refused without being opened, a header line has a length limit, and a record line
longer than any record is skipped and counted by both readers alike. No torch.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_cli_report import XPROF, assert_one_line_error, invoke, tiny_run
from xprof.runcolumns import load_columns
from xprof.runfile import RunFileError, load_run


def _refused_fast(args: list[str], *needles: str) -> None:
    started = time.monotonic()
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert_one_line_error(res.stderr, *needles)
    assert time.monotonic() - started < 10


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    _refused_fast(["summary", str(fifo)], "a pipe or FIFO", "save the stream to a file first")


def test_a_fifo_with_a_writer_is_refused_and_never_read_twice(tmp_path: Path) -> None:
    run, fifo = tiny_run(tmp_path / "r.json"), tmp_path / "stream.json"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat '{run}' > '{fifo}'"])
    try:
        _refused_fast(["summary", str(fifo)], "a pipe or FIFO")
    finally:
        writer.kill()
        writer.wait()


def test_process_substitution_is_refused_clearly(tmp_path: Path) -> None:
    run = tiny_run(tmp_path / "r.json")
    proc = subprocess.run(["bash", "-c", f"'{XPROF}' summary <(cat '{run}')"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert_one_line_error(proc.stderr, "a pipe or FIFO")
    assert "empty file" not in proc.stderr


COMMANDS = [["summary"], ["summary", "--json"], ["summary", "--brief"], ["report"], ["export"],
            ["compare", str(Path(__file__).resolve().parent.parent / "sample_runs" / "clean_a.json")]]
"""Every command that reads a run file, with its defaults (the summary cache on)."""


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_dev_zero_is_refused_at_once(command: list[str]) -> None:
    _refused_fast([*command, "/dev/zero"], "a character device")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_fifo_is_refused_at_once_by_every_command(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    _refused_fast([*command, str(fifo)], "a pipe or FIFO")


def test_a_folder_holding_a_fifo_is_read_without_opening_it(tmp_path: Path) -> None:
    tiny_run(tmp_path / "a.json")
    tiny_run(tmp_path / "b.json")
    os.mkfifo(tmp_path / "c.json")
    started = time.monotonic()
    res = invoke(["summary", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert time.monotonic() - started < 30


def test_a_header_line_with_no_end_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "zeros.json"
    path.write_bytes(b'{"format": "xprof-run", "version": 1, "pad": "' + b"0" * (2 << 20))
    with pytest.raises(RunFileError, match="longer than 1 MiB"):
        load_run(path)
    _refused_fast(["summary", str(path)], "longer than 1 MiB")


@pytest.mark.parametrize("where", ["middle", "last", "cut"])
def test_a_line_past_the_limit_is_one_skipped_line_in_both_readers(tmp_path: Path, where: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import xprof.runcolumns.scan
    import xprof.runfile.loader

    monkeypatch.setattr(xprof.runfile.loader, "MAX_LINE", 5000)
    monkeypatch.setattr(xprof.runcolumns.scan, "MAX_LINE", 5000)
    path = tiny_run(tmp_path / "r.json")
    lines = path.read_text().splitlines(keepends=True)
    long = '{"type":"step","i":99,"barrier":"' + "x" * 20000 + '"}'
    if where == "middle":
        lines.insert(3, long + "\n")
    else:
        lines.append(long if where == "last" else long[:-3])
    path.write_text("".join(lines))
    typed, cols = load_run(path), load_columns(path, engine="duckdb")
    assert len(typed.steps) == 8 and cols.columns.n_steps == 8
    expect = (1, False) if where == "middle" else (0, True)
    assert (typed.skipped_lines, typed.truncated_tail) == expect
    assert (cols.run.skipped_lines, cols.run.truncated_tail) == expect
