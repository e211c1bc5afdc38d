"""Running one manifest entry twice: plainly for the truth, then under ``xprof run``.

Each run writes into ``WORK/<id>/``: ``counters.json`` and ``debug.txt`` (truth),
``run.json`` and ``summary.json`` (xprof), and both runs' output (``truth.log``, ``xprof.log``).
Both run at ``nice -n 10`` with ``PJRT_DEVICE=CPU``, one after the other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.referee.manifest import Entry

TRUTH_RUN = Path(__file__).resolve().parent / "truth_run.py"
GRACE_S = 30
"""Seconds a run stopped by SIGINT gets to write what it has before SIGKILL."""


def default_xprof() -> Path:
    """The ``xprof`` of the Python running the referee (its virtual environment's)."""
    return Path(sys.executable).parent / "xprof"


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PT_XLA_DEBUG", "PYTHONPATH"))}
    env.update({"PJRT_DEVICE": "CPU", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"})
    env.update(extra)
    return env


def _call(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, timeout_s: int,
          dump_stacks: bool = False, grace_s: int = GRACE_S) -> tuple[int, float]:
    """Run ``cmd`` at ``nice -n 10``; past ``timeout_s`` it gets SIGINT (so both sides can still
    write what they have: counters, a run file), and SIGKILL ``grace_s`` later. With
    ``dump_stacks`` (the truth run, which registers it) SIGUSR1 first prints its Python stacks."""
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(["nice", "-n", "10", *cmd], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            out.write(f"\nreferee: time limit of {timeout_s} s reached\n")
            out.flush()
            if dump_stacks:
                proc.send_signal(signal.SIGUSR1)
                time.sleep(1)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                out.write(f"\nreferee: killed {grace_s} s after SIGINT\n")
            rc = 124
            out.write(f"\nreferee: timed out after {timeout_s} s\n")
    return rc, time.monotonic() - started


def summarize(xprof: Path, folder: Path) -> int:
    """``xprof summary --json`` of ``folder/run.json`` into ``folder/summary.json``; its exit code."""
    with open(folder / "summary.json", "w", encoding="utf-8") as f:
        return subprocess.run([str(xprof), "summary", "--json", str(folder / "run.json")], env=_env({}),
                              stdout=f, stderr=subprocess.PIPE, text=True).returncode


def run_entry(entry: Entry, scripts: Path, work: Path, xprof: Path | None = None) -> dict[str, float | int]:
    """Both runs of ``entry``; returns their exit codes and seconds."""
    script = entry.script(scripts).resolve()
    out = work / entry.id
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("counters.json", "debug.txt", "run.json", "summary.json"):
        (out / stale).unlink(missing_ok=True)
    py = sys.executable
    root = {"PYTHONPATH": str((scripts / entry.id).resolve())}
    # the entry's folder is importable, as the repository's root is to its own scripts
    truth_env = _env({**root, "PT_XLA_DEBUG_LEVEL": "2", "PT_XLA_DEBUG_FILE": str(out / "debug.txt")})
    t_rc, t_s = _call([py, str(TRUTH_RUN), str(out / "counters.json"), str(script), *entry.args],
                      script.parent, truth_env, out / "truth.log", entry.timeout_s, dump_stacks=True)
    xprof = xprof or default_xprof()
    x_rc, x_s = _call([str(xprof), "run", "-o", str(out / "run.json"), str(script), *entry.args],
                      script.parent, _env(root), out / "xprof.log", entry.timeout_s)
    s_rc = summarize(xprof, out)
    return {"truth_rc": t_rc, "truth_s": round(t_s, 1), "xprof_rc": x_rc, "xprof_s": round(x_s, 1),
            "summary_rc": s_rc}
