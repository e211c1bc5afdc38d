"""Outputs never destroy: ``-o`` never writes over an input of the command, and never
replaces a FIFO, a device or a symlink with a plain file (issue 28). No torch.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.test_cli_report import assert_one_line_error, invoke, tiny_run


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    return tiny_run(tmp_path / "r.json")


def _refused(args: list[str], victim: Path, *needles: str) -> None:
    before = victim.read_bytes() if victim.is_file() else None
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert_one_line_error(res.stderr, *needles)
    if before is not None:
        assert victim.read_bytes() == before


@pytest.mark.parametrize("command", [["report"], ["export"], ["compare", "OTHER"]])
def test_writing_over_an_input_is_refused(run_file: Path, tmp_path: Path, command: list[str]) -> None:
    other = tiny_run(tmp_path / "other.json")
    args = [a.replace("OTHER", str(other)) for a in command] + [str(run_file), "-o", str(run_file)]
    _refused(args, run_file, "refusing to write", "an input of this command")


def test_a_symlink_or_hard_link_to_an_input_is_the_input(run_file: Path, tmp_path: Path) -> None:
    link, hard = tmp_path / "link.html", tmp_path / "hard.html"
    link.symlink_to(run_file)
    os.link(run_file, hard)
    for out in (link, hard):
        _refused(["report", str(run_file), "-o", str(out)], run_file, "an input of this command")
    assert link.is_symlink()


def test_run_refuses_to_write_over_its_script(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    _refused(["run", "-o", str(script), str(script)], script, "an input of this command")


def test_a_fifo_is_refused_and_stays_a_fifo(run_file: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.html"
    os.mkfifo(fifo)
    for command in (["report", str(run_file)], ["export", str(run_file)]):
        _refused([*command, "-o", str(fifo)], fifo, "a FIFO", "plain files only")
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_refused_and_not_replaced(run_file: Path, tmp_path: Path) -> None:
    link = tmp_path / "null.html"
    link.symlink_to("/dev/null")  # a symlink to a device: the device is what would be written
    _refused(["report", str(run_file), "-o", str(link)], link, "a character device")
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    md = tmp_path / "null.md"
    md.symlink_to("/dev/null")
    _refused(["compare", str(run_file), str(run_file), "-o", str(md)], md, "a character device")


def test_a_symlink_to_a_plain_file_is_written_through(run_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "pages" / "real.html"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    res = invoke(["report", str(run_file), "-o", str(link)])
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "This run trained" in target.read_text()
    assert res.stdout.strip() == str(link)


def test_writer_refuses_a_special_file_given_directly(tmp_path: Path) -> None:
    from xprof.report.page import write_atomic

    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        write_atomic(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
