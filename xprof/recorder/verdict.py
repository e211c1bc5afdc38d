"""The exit summary of ``watch()``: the analysis' own verdict on the finished run file.

The lines come from ``xprof summary RUN --brief --digest`` run in a child process (which then
writes the run file's digest, docs/run-format.md): the same reader
and the same analysis as ``xprof summary``, the report and the end of ``xprof run``, so the
three can never disagree, while the training process imports no pandas and no analysis
(the child costs about half a second, once, after the loop). The child's failure or a
timeout is said in one line and never raised.
"""

from __future__ import annotations

import os
import subprocess
import sys

TIMEOUT_S = 120.0
"""How long the training process waits for the verdict before it points at the file."""


def _env() -> dict[str, str]:
    """The child imports this xprof, wherever it was imported from (a checkout on
    ``sys.path``), and has no reason to start torch_xla."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONSTARTUP", None)
    return env


def exit_lines(run_path: str, timeout: float = TIMEOUT_S) -> list[str]:
    """The lines to print when ``watch()`` ends: steps, compile share, the first thing to
    change and the command that opens the report (or one line saying why there are none)."""
    cmd = [sys.executable, "-m", "xprof", "summary", "--brief", "--digest", "--", run_path]  # (and its digest)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(),
                              stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        return [f"xprof: no summary after {timeout:.0f} s; run: xprof summary {run_path}"]
    except OSError as exc:
        return [f"xprof: no summary ({type(exc).__name__}: {exc}); run: xprof summary {run_path}"]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        why = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
        return [f"xprof: no summary ({why or f'exit {done.returncode}'})"]
    return lines


def digest(run_path: str, timeout: float = TIMEOUT_S) -> None:
    """Write the digest of ``run_path`` in a child process (``xprof digest``), for a rank of a
    pod that prints no exit summary (only rank 0 speaks); silent, and never raised."""
    cmd = [sys.executable, "-m", "xprof", "digest", "--", run_path]
    try:
        subprocess.run(cmd, capture_output=True, timeout=timeout, env=_env(), stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        pass
