"""Is xprof safe to leave on? Real torch_xla on the CPU, a few steps per scenario.

- a training process killed with SIGKILL leaves a run file that loads (incomplete);
- the user's exception propagates unchanged and the run is completed with status error;
- the profiler's own failures (a metrics source that raises, a disk that fills up) are
  logged once per kind and do not change the training results;
- a data-loading thread doing host reads and transfers does not corrupt the file;
- a nested ``watch()`` is refused with a clear error;
- ``watch()`` does not change what torch_xla compiles or executes.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import xprof
from xprof.recorder.core import FLUSH_INTERVAL
from xprof.runfile import load_run

pytestmark = pytest.mark.xla

SCRIPTS = Path(__file__).resolve().parent / "scripts"
ROOT = Path(__file__).resolve().parent.parent


def _train(device: Any, steps: int, *, hidden: int = 8, read_every: int = 0,
           seed: int = 0) -> tuple[list[float], list[float]]:
    """A tiny loop through a DataLoader; returns (host-read losses, final parameters)."""
    import torch
    import torch_xla
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = TensorDataset(torch.randn(4 * steps, 6), torch.randn(4 * steps, 1))
    losses: list[float] = []
    for i, (x, y) in enumerate(DataLoader(data, batch_size=4)):
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()
        if read_every and i % read_every == 0:
            losses.append(loss.item())
    params = [float(v) for p in model.parameters() for v in p.detach().cpu().flatten().tolist()]
    return losses, params


def _records(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# -- the process dies -------------------------------------------------------------------

@pytest.mark.slow
def test_sigkill_mid_run_leaves_a_loadable_incomplete_run(tmp_path: Path) -> None:
    path = tmp_path / "killed.json"
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "rel_kill_me.py"), str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        seen = -1
        deadline = time.monotonic() + 180
        while seen < 5 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("STEP "):
                seen = int(line.split()[1])
        assert seen >= 5, "the training script never reached step 5"
        # Records reach the file within the recorder's flush interval: give it twice that.
        time.sleep(2 * FLUSH_INTERVAL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    run = load_run(path)
    assert not run.complete
    assert run.end is None
    indices = [s.i for s in run.steps]
    # every step the script announced before the flush interval passed was recorded
    assert indices[: seen + 1] == list(range(seen + 1))
    assert run.skipped_lines == 0


# -- the user's exception ---------------------------------------------------------------

class _UserBug(ValueError):
    pass


def test_user_exception_propagates_unchanged_and_run_is_completed(tmp_path: Path, device: Any) -> None:
    import torch
    import torch_xla

    path = tmp_path / "err.json"
    bug = _UserBug("loss went NaN at step 2")
    with pytest.raises(_UserBug) as info:
        with xprof.watch(path):
            t = torch.ones(3, device=device)
            for i in range(3):
                t = t * 2
                torch_xla.sync()
                if i == 2:
                    raise bug
    assert info.value is bug
    assert type(info.value) is _UserBug
    run = load_run(path)
    assert run.complete
    assert run.end is not None
    assert run.end.status == "error"
    assert run.end.exception == "_UserBug: loss went NaN at step 2"
    assert len(run.steps) == 3
    from xprof.recorder import active

    assert active() is None


# -- the profiler's own failures --------------------------------------------------------

class _BrokenCounters:
    """A MetricsSource whose counter reads fail: torch_xla's metrics API moved, say."""

    def __init__(self) -> None:
        from xprof.recorder.metrics import XlaMetrics

        self._real = XlaMetrics()

    def counter_names(self) -> list[str]:
        return list(self._real.counter_names())

    def counter_value(self, name: str) -> int | None:
        raise RuntimeError(f"counter {name} is gone")

    def samples(self, name: str) -> Any:
        return self._real.samples(name)


def _xprof_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "xprof" and r.levelno == logging.WARNING]


def _failure_kinds(messages: list[str]) -> list[str]:
    """'xprof: barrier failed (RuntimeError: ...)' -> 'barrier:RuntimeError'."""
    kinds = []
    for msg in messages:
        where = msg.split("xprof: ", 1)[1].split(" failed (", 1)[0]
        exc = msg.split(" failed (", 1)[1].split(":", 1)[0]
        kinds.append(f"{where}:{exc}")
    return kinds


def test_failing_metrics_source_does_not_break_training(tmp_path: Path, device: Any,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    expected = _train(device, 6, read_every=2)
    path = tmp_path / "broken.json"
    with caplog.at_level(logging.WARNING, logger="xprof"):
        with xprof.watch(path, source=_BrokenCounters()):
            got = _train(device, 6, read_every=2)
    assert got == expected
    kinds = _failure_kinds(_xprof_warnings(caplog))
    assert kinds, "the failure was not logged"
    assert "barrier:RuntimeError" in kinds
    assert "sync hook:RuntimeError" in kinds
    assert len(kinds) == len(set(kinds)), f"a failure kind was logged more than once: {kinds}"
    run = load_run(path)
    assert run.complete
    assert run.errors, "the failures were not recorded in the run"
    assert {e.where for e in run.errors} >= {"barrier", "sync hook"}
    assert run.end is not None and run.end.errors >= len(run.errors)


class _FillingFile:
    """Wraps the run file so that writes fail with ENOSPC after ``ok`` of them."""

    def __init__(self, real: Any, ok: int) -> None:
        self.real = real
        self.ok = ok
        self.writes = 0
        self.failures = 0

    def write(self, text: str) -> int:
        self.writes += 1
        if self.writes > self.ok:
            self.failures += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return int(self.real.write(text))

    def flush(self) -> None:
        self.real.flush()

    def close(self) -> None:
        self.real.close()


def test_disk_full_does_not_break_training(tmp_path: Path, device: Any,
                                           caplog: pytest.LogCaptureFixture) -> None:
    expected = _train(device, 8, read_every=2)
    path = tmp_path / "full.json"
    with caplog.at_level(logging.WARNING, logger="xprof"):
        with xprof.watch(path) as w:
            assert w.recorder is not None
            writer = w.recorder.writer
            # The recorder batches records into few writes: let the first one through.
            filling = _FillingFile(writer._file, ok=1)
            writer._file = filling  # type: ignore[assignment]
            got = _train(device, 8, read_every=2)
    assert got == expected
    assert filling.failures == 1, "the writer kept writing after the disk filled up"
    kinds = _failure_kinds(_xprof_warnings(caplog))
    assert kinds == ["write:OSError"], kinds
    assert "No space left on device" in _xprof_warnings(caplog)[0]
    run = load_run(path)  # what was written before the disk filled is still readable
    assert not run.complete
    assert run.skipped_lines == 0


# -- threads ----------------------------------------------------------------------------

def test_loader_thread_reads_do_not_corrupt_records(tmp_path: Path, device: Any) -> None:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    ready = [torch.full((2,), float(k), device=device).sum() for k in range(4)]
    torch_xla.sync()
    xm.wait_device_ops()
    for t in ready:
        t.item()
    errors: list[BaseException] = []
    stop = threading.Event()

    def loader_thread() -> None:
        try:
            n = 0
            while not stop.is_set() and n < 400:
                ready[n % 4].item()
                torch.randn(3, 2).to(device)
                ready[n % 4].to("cpu")
                n += 1
        except BaseException as exc:
            errors.append(exc)

    path = tmp_path / "threads.json"
    with xprof.watch(path):
        th = threading.Thread(target=loader_thread, name="loader-0")
        th.start()
        try:
            t = torch.ones(4, device=device)
            for _ in range(8):
                t = t * 1.5
                torch_xla.sync()
                t.sum().item()
        finally:
            stop.set()
            th.join(60)
    assert not errors, errors
    records = _records(path)  # every line parses
    assert records[0]["format"] == "xprof-run"
    assert all(isinstance(r, dict) and isinstance(r.get("type"), str) for r in records[1:])
    run = load_run(path)
    assert run.complete and run.skipped_lines == 0 and not run.truncated_tail
    assert [s.i for s in run.steps] == list(range(len(run.steps)))
    assert len(run.steps) == 8
    threaded = [s for s in run.syncs if s.thread == "loader-0"]
    assert threaded, "host reads on the loader thread were not recorded"
    assert all(s.site in run.sites for s in run.syncs)
    assert all(isinstance(s.t0, float) and s.t1 >= s.t0 for s in run.syncs)


def test_nested_watch_is_refused(tmp_path: Path, device: Any) -> None:
    from xprof.recorder import XprofUsageError

    with xprof.watch(tmp_path / "outer.json"):
        with pytest.raises(XprofUsageError, match=r"already recording to .*outer\.json"):
            with xprof.watch(tmp_path / "inner.json"):
                pass  # pragma: no cover
    assert not (tmp_path / "inner.json").exists()
    assert load_run(tmp_path / "outer.json").complete


# -- watch() changes nothing torch_xla does ---------------------------------------------

_COUNTERS = ("UncachedCompile", "CachedCompile", "ExecuteComputation")


def _counted(device: Any, watched_path: Path | None, hidden: int) -> tuple[dict[str, int], Any]:
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    xm.wait_device_ops()
    before = {c: met.counter_value(c) or 0 for c in _COUNTERS}
    if watched_path is None:
        result = _train(device, 6, hidden=hidden, read_every=3)
    else:
        with xprof.watch(watched_path):
            result = _train(device, 6, hidden=hidden, read_every=3)
    xm.wait_device_ops()
    return {c: (met.counter_value(c) or 0) - before[c] for c in _COUNTERS}, result


def test_watch_does_not_change_compiles_or_executions(tmp_path: Path, device: Any) -> None:
    # Cold: a model size not seen before in this process, so both runs compile from scratch.
    cold_plain, res_plain = _counted(device, None, hidden=11)
    cold_watched, _ = _counted(device, tmp_path / "cold.json", hidden=13)
    assert cold_watched == cold_plain
    assert cold_plain["UncachedCompile"] > 0
    # Warm: the same model again, every graph cached.
    warm_plain, again_plain = _counted(device, None, hidden=11)
    warm_watched, again_watched = _counted(device, tmp_path / "warm.json", hidden=11)
    assert warm_watched == warm_plain
    assert warm_plain["UncachedCompile"] == 0
    assert again_watched == again_plain == res_plain
