"""`xprof run` under test against torch_xla's own debug output, and the HF Trainer.

- a boolean-mask loss under `xprof run`: torch_xla's own debug output is the referee for
  the line of the data-dependent op;
- a Trainer run with XprofCallback (in this process) and the same script under `xprof run`
  (a subprocess) must tell the same story: 6 steps, 2 eval passes, padding, the Trainer's
  logging and its evaluation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xprof.analysis import analyze
from xprof.runfile import load_run

pytestmark = [pytest.mark.xla, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
MASK = ROOT / "tests" / "scenarios" / "mask_loss.py"
TRAINER = ROOT / "tests" / "scripts" / "hf_padded_trainer.py"


def _xprof_run(tmp_path: Path, out: Path, *argv: str) -> dict[str, Any]:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": str(ROOT)}
    env.pop("PT_XLA_DEBUG_LEVEL", None)
    env.pop("PT_XLA_DEBUG_FILE", None)
    proc = subprocess.run([sys.executable, "-m", "xprof", "run", "-o", str(out), *argv],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = subprocess.run([sys.executable, "-m", "xprof", "summary", str(out), "--json"],
                             capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr[-2000:]
    return dict(json.loads(summary.stdout))


def test_mask_line_agrees_with_torch_xla_debug(tmp_path: Path) -> None:
    pytest.importorskip("torch_xla")
    script = tmp_path / "mask_main.py"
    script.write_text("import torch_xla\nfrom tests.scenarios.mask_loss import train\n"
                      "train(torch_xla.device())\n")
    out = tmp_path / "mask.json"
    s = _xprof_run(tmp_path, out, str(script))
    f = next(f for f in s["findings"] if not f["minor"])
    assert (f["cause"], f["kind"]) == ("data_dependent", "data_dependent")
    # The referee: torch_xla's execution analysis names the user line of the early executions.
    run = load_run(out)
    lines = {fr[2] for d in run.debug if d.kind == "execute"
             and d.fields.get("cause_kind") == "host_read"
             for fr in d.fields.get("user_frames") or [] if str(fr[1]) == str(MASK)}
    assert f["line"] in lines
    assert not any(x["cause"] == "unknown" for x in s["findings"])


@pytest.fixture(scope="module")
def trainer_runs(device: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'xprof-lazy[hf]')")
    pytest.importorskip("accelerate", reason="accelerate is not installed (pip install 'xprof-lazy[hf]')")
    sys.path.insert(0, str(ROOT / "tests" / "scripts"))
    try:
        import hf_padded_trainer
    finally:
        sys.path.remove(str(ROOT / "tests" / "scripts"))
    from xprof.integrations.huggingface import XprofCallback

    tmp = tmp_path_factory.mktemp("hf11")
    cb = XprofCallback(tmp / "cb.json")
    try:
        hf_padded_trainer.train(str(tmp / "out"), [cb], evaluate=True)
    finally:
        cb.close()
    in_process = analyze(load_run(cb.path or "")).summary()
    under_run = _xprof_run(tmp, tmp / "run.json", str(TRAINER), str(tmp / "out2"), "--eval")
    return in_process, under_run


def test_trainer_steps_and_mechanisms(trainer_runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    s, _ = trainer_runs
    # 6 optimizer steps; logging every 2 steps and an eval pass of 2 batches every 3 add barriers.
    assert (s["steps"], s["eval_passes"], s["barriers"]) == (6, 2, 35)
    # Eval steps are the eval batches: 2 passes of 2 (the Trainer's barrier is outside its
    # no_grad, so it is model.eval() that marks them; its 11 eval barriers, the gathers' and
    # the loader's small graphs among them, are not steps).
    assert s["eval_steps"] == 2 * 2
    kinds = {(f["cause"], f["kind"]) for f in s["findings"]}
    assert ("input_shape", "dynamic_padding") in kinds
    assert ("library", "hf_trainer_logging") in kinds
    assert ("library", "hf_trainer_eval") in kinds
    assert not any(c in ("unknown", "graph_change") for c, _ in kinds)  # the eval pass is the Trainer's
    pad = next(f for f in s["findings"] if f["kind"] == "dynamic_padding")
    assert pad["input"] == "input_ids" and pad["dim"] == 1
    ev = next(f for f in s["findings"] if f["kind"] == "hf_trainer_eval")
    assert ev["steps"] == [2, 5] and ev["compiles"] >= 2  # after optimizer steps 3 and 6 (0-based 2, 5)
    # Every recompile is the padding's or the evaluation's (a training graph cut by the eval
    # loader's first batch stays the padding's).
    assert pad["compiles"] + ev["compiles"] == s["recompiles"]
    log = next(f for f in s["findings"] if f["kind"] == "hf_trainer_logging")
    assert log["pattern"] == "every 2 steps" and "logging_steps" in log["advice"]
    assert sum(1 for f in s["findings"] if f["cause"] in ("library", "implicit_sync")) <= 4  # one per mechanism
    assert 0 < s["forced_reads"] < s["syncs"]  # most logging reads find their value computed


def test_trainer_callback_and_xprof_run_agree(trainer_runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    cb, run = trainer_runs
    # Compile counts are not compared: this test process has compiled some of the same small
    # graphs before (torch_xla's cache is per process); the fresh `xprof run` process has not.
    for key in ("steps", "barriers", "eval_steps", "eval_passes", "syncs"):
        assert cb[key] == run[key], key

    def story(s: dict[str, Any]) -> list[tuple[Any, ...]]:
        # Reads are counted the same in both; compile-based counts depend on the process's cache.
        return sorted((f["cause"], f["kind"], f["input"], f["count"] if f["compiles"] == 0 else None)
                      for f in s["findings"])

    assert story(cb) == story(run)
