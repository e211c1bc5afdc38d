"""The recorder under faults (issue 28), on real torch_xla on the CPU:

- the output folder removed mid-run: one warning at once, training goes on, and the end
  says the run file was not written;
- ``os.fork()`` inside ``watch()``: the child never writes the parent's run file;
- the user's exception raised inside a hooked call keeps the user's line on top.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

import xprof
from xprof.recorder.core import FLUSH_INTERVAL
from xprof.runfile import load_run

pytestmark = pytest.mark.xla

SCRIPTS = Path(__file__).resolve().parent / "scripts"
HOOKS = str(Path(xprof.__file__).with_name("recorder") / "hooks")
"""The hooks' package: their wrappers' frames name a file in it."""


def _steps(device: Any, n: int) -> list[float]:
    import torch
    import torch_xla

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(4, 6).to(device), torch.randn(4, 1).to(device)
    losses = []
    for _ in range(n):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()
        losses.append(loss.item())
    return losses


def _removed_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "xprof" and "was removed" in r.getMessage()]


def test_output_folder_removed_mid_run_is_said_at_once_and_at_the_end(
        tmp_path: Path, device: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "out"
    caplog.set_level(logging.WARNING, logger="xprof")
    with xprof.watch(folder / "run.json", live=False):
        before = _steps(device, 3)
        shutil.rmtree(folder)
        time.sleep(3 * FLUSH_INTERVAL)
        said = _removed_warnings(caplog)
        after = _steps(device, 3)  # training goes on
    assert len(said) == 1 and str(folder / "run.json") in said[0] and "will not be written" in said[0]
    assert _removed_warnings(caplog) == said  # once
    assert before == after
    err = capsys.readouterr().err
    assert f"xprof: the run file {folder / 'run.json'} was not written" in err
    assert not folder.exists()


def test_xprof_run_says_the_run_file_was_not_written(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import shutil, sys, time\nimport torch, torch_xla\n"
        "d = torch_xla.device()\nx = torch.ones(3).to(d)\n"
        "for _ in range(3):\n    x = x * 2\n    torch_xla.sync()\n"
        "shutil.rmtree(sys.argv[1])\ntime.sleep(1)\n"
        "for _ in range(3):\n    x = x * 2\n    torch_xla.sync()\nprint('DONE', float(x.sum()))\n")
    out = tmp_path / "runs"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", "--no-debug", "-o", str(out / "run.json"),
                           str(script), str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert proc.returncode == 0, proc.stderr
    assert "DONE 192.0" in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"xprof: the run file {out / 'run.json'} was not written"), proc.stderr
    assert proc.stderr.count("was removed during the run") == 2  # at once, and at the end


def test_a_forked_child_never_writes_the_parents_run_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "fork_child.py"), str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert proc.returncode == 0 and "CHILD 0" in proc.stdout, proc.stderr
    lines = path.read_text().splitlines()
    assert sum('"type":"end"' in line for line in lines) == 1
    run = load_run(path)
    assert run.impossible == 0 and run.skipped_lines == 0 and run.complete
    assert [s.i for s in run.steps] == list(range(len(run.steps))) and len(run.steps) >= 6


def _item_error(device: Any) -> BaseException:
    import torch

    try:
        torch.ones(3, device=device).item()  # the user's line
    except RuntimeError as exc:
        return exc
    raise AssertionError("no error")


def _frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return traceback.extract_tb(exc.__traceback__)


def test_the_users_exception_keeps_the_users_line_on_top(tmp_path: Path, device: Any) -> None:
    plain = _item_error(device)
    with xprof.watch(tmp_path / "run.json", live=False):
        _steps(device, 2)
        watched = _item_error(device)
    assert (type(watched), str(watched)) == (type(plain), str(plain))
    assert [(f.filename, f.name) for f in _frames(watched)] == [(f.filename, f.name) for f in _frames(plain)]
    assert _frames(watched)[-1].line == "torch.ones(3, device=device).item()  # the user's line"


def test_an_exception_leaving_the_watch_has_no_xprof_frame(tmp_path: Path, device: Any) -> None:
    import torch

    with pytest.raises(RuntimeError) as info:
        with xprof.watch(tmp_path / "run.json", live=False):
            _steps(device, 2)
            torch.ones(3).item()  # a CPU tensor: every .item() in the process goes through the hook
    assert all(os.path.dirname(f.filename) != HOOKS for f in _frames(info.value))
    assert _frames(info.value)[-1].line == "torch.ones(3).item()  # a CPU tensor: every .item() in the process " \
        "goes through the hook"
