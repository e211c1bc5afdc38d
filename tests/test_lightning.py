"""PyTorch Lightning on torch_xla (CPU): a real ``lightning.Trainer`` on Lightning's XLA strategy,
recorded by ``xprof.integrations.lightning.XprofCallback`` and by ``xprof run`` on the script
unmodified. Lightning's reads must be named as Lightning's, with its own settings as the fix.

The one stand-in is the accelerator's device count (tests/scripts/lightning_tiny.py says why
Lightning's ``XLAAccelerator`` refuses the CPU backend); everything else is Lightning's.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.xla, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "scripts" / "lightning_tiny.py"


@pytest.fixture(scope="module")
def tiny() -> Any:
    pytest.importorskip("lightning", reason="lightning is not installed (pip install lightning)")
    pytest.importorskip("torch_xla")
    spec = importlib.util.spec_from_file_location("lightning_tiny", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _findings(path: str | Path) -> dict[str, Any]:
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    run = load_run(path)
    analysis = analyze(run)
    return {"run": run, "analysis": analysis, "by_kind": {f.kind: f for f in analysis.findings}}


def _check_lightning_reads(by_kind: dict[str, Any]) -> None:
    """Each of Lightning's reads is its own finding, named as Lightning's, its fix in Lightning's words."""
    bar_metrics = by_kind.get("pl_prog_bar_metrics")
    assert bar_metrics is not None, sorted(by_kind)
    assert bar_metrics.title.startswith("Lightning's progress-bar metrics") and "every step" in bar_metrics.title
    assert "prog_bar=False" in bar_metrics.advice and "enable_progress_bar=False" in bar_metrics.advice
    bar = by_kind.get("pl_progress_bar")
    assert bar is not None and "refresh_rate" in bar.advice and "enable_progress_bar=False" in bar.advice
    logger = by_kind.get("pl_logger")
    assert logger is not None and "every 2 steps" in logger.title and "log_every_n_steps" in logger.advice
    assert not [k for k in by_kind if k in ("implicit_sync", "unknown")], sorted(by_kind)


def test_callback_records_a_lightning_fit(tiny: Any, device: Any, tmp_path: Path) -> None:
    from xprof.integrations.lightning import XprofCallback

    cb = XprofCallback(tmp_path / "pl.json", live=False)
    tiny.trainer(8, str(tmp_path / "logs"), [cb]).fit(tiny.TinyModule(), tiny.data())
    assert cb.path is not None and cb._watch is None
    got = _findings(cb.path)
    run, analysis = got["run"], got["analysis"]
    assert run.complete and run.end is not None and run.end.status == "ok"
    assert analysis.totals.steps == 8 and analysis.totals.optimizer_steps == 8
    assert run.name == "TinyModule"
    _check_lightning_reads(got["by_kind"])


def test_an_error_in_fit_closes_the_run_and_propagates(tiny: Any, device: Any, tmp_path: Path) -> None:
    from xprof.integrations.lightning import XprofCallback

    cb = XprofCallback(tmp_path / "pl_raise.json", live=False)
    with pytest.raises(ValueError, match=r"^batch 3 is bad$"):
        tiny.trainer(8, str(tmp_path / "logs"), [cb]).fit(tiny.TinyModule(raise_at=3), tiny.data())
    from xprof.recorder.watch import active
    from xprof.runfile import load_run

    assert active() is None and cb._watch is None
    run = load_run(cb.path or "")
    assert run.complete and run.end is not None and run.end.status == "error"
    assert run.end.exception == "ValueError: batch 3 is bad"


def test_xprof_run_records_a_lightning_script_unmodified(tiny: Any, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    exe = Path(sys.executable).with_name("xprof")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "xprof"]
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    proc = subprocess.run([*cmd, "run", "-o", str(out), str(SCRIPT), "--logs", str(tmp_path / "logs")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fit done" in proc.stderr and "xprof: 8 steps" in proc.stderr
    got = _findings(out)
    assert got["analysis"].totals.steps == 8
    _check_lightning_reads(got["by_kind"])
