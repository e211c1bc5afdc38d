"""Output as CI logs and pipes get it: the real ``xprof`` command with stdout a pipe and
``COLUMNS`` unset (80 columns), and a reader that goes away (``| head -1``)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len

ROOT = Path(__file__).resolve().parent.parent
XPROF = ROOT / ".venv" / "bin" / "xprof"
SAMPLES = ROOT / "sample_runs"
BASE, NEW = str(SAMPLES / "padded_fixed.json"), str(SAMPLES / "padded_longest.json")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH")}
    return {**env, "PJRT_DEVICE": "CPU"}


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(XPROF), *args], capture_output=True, text=True, env=_env(), timeout=120)


def assert_fits_80(text: str) -> None:
    for line in text.splitlines():
        assert cell_len(line.rstrip()) <= 80, line
    assert "…" not in text and "<bool>" not in text and "<str>" not in text and "<list" not in text, text


@pytest.mark.parametrize("command", ["", "report", "summary", "compare", "run", "export", "ranks", "demo", "digest"])
def test_help_reads_plainly_at_80_columns(command: str) -> None:
    res = piped(*([command] if command else []), "--help")
    assert res.returncode == 0, res.stderr
    assert_fits_80(res.stdout)
    assert res.stdout.startswith("Usage: xprof")
    if command == "compare":
        assert "--max-compile-seconds-increase LIMIT" in res.stdout  # whole, never cropped
        assert "xprof compare base.json new.json -o reports/compare.html\n" in res.stdout  # examples kept as written
    if command == "":
        assert all(f"  {c}  " in res.stdout or f"  {c} " in res.stdout for c in ("report", "summary", "compare"))
        assert "..." not in res.stdout.split("Commands:")[1]  # each command's line whole


def test_compare_table_is_whole_at_80_columns() -> None:
    res = piped("compare", BASE, NEW, "--max-new-recompiles", "0")
    assert res.returncode == 1, res.stderr  # the gate still decides the exit code
    assert_fits_80(res.stdout)
    rows = {line.split("  ")[0]: line.rstrip() for line in res.stdout.splitlines()}
    assert re.search(r"\+2\.\d\d s \(\+\d+%\) ▲ worse$", rows["Wall time"])
    assert rows["Step time (median)"].endswith("not judged")
    assert rows["Execute time / step (median)"].endswith("within noise")
    # The note that does not fit the column is said once, whole, on its own line.
    assert "Step time (median): not judged (host time: noisy)" in res.stdout.splitlines()
    assert "1 new recompile" not in res.stdout and "2 new recompiles" in res.stderr


def test_summary_and_ranks_fit_80_columns(tmp_path: Path) -> None:
    res = piped("summary", NEW)
    assert res.returncode == 0, res.stderr
    assert_fits_80(res.stdout)
    pod = tmp_path / "pod"
    pod.mkdir()
    for rank, src in enumerate((BASE, NEW)):
        (pod / f"run.rank{rank}.json").write_bytes(Path(src).read_bytes())
    res = piped("ranks", str(pod))
    assert res.returncode == 0, res.stderr
    assert_fits_80(res.stdout)
    header = next(line for line in res.stdout.splitlines() if line.startswith("rank"))
    assert header.split() == ["rank", "steps", "compiles", "recompiles", "compile", "s", "host", "reads", "sync",
                              "wait", "s", "median", "step", "ms"]
    assert "recompiled 2 times where" in " ".join(res.stdout.split())
    made = piped("digest", str(pod))
    assert made.returncode == 0 and made.stderr == "", made.stderr
    assert made.stdout.split() == [f"{pod}/run.rank{r}.json.digest.parquet" for r in (0, 1)]
    res = piped("ranks", str(pod))
    assert res.returncode == 0, res.stderr
    assert_fits_80(res.stdout)
    assert "read from digests: ranks 0, 1\n" in res.stdout


def closed_pipe(*args: str) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone (as after ``| head -1``)."""
    proc = subprocess.Popen([str(XPROF), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize("args", [["summary", NEW], ["summary", NEW, "--json"], ["--help"], ["compare", "--help"],
                                  ["compare", BASE, NEW, "--markdown"]])
def test_a_closed_pipe_exits_0(args: list[str]) -> None:
    code, err = closed_pipe(*args)
    assert (code, err) == (0, "")


def test_a_closed_pipe_keeps_the_gate() -> None:
    code, err = closed_pipe("compare", BASE, NEW, "--max-new-recompiles", "0")
    assert code == 1 and err.startswith("xprof: regression: --max-new-recompiles") and "Traceback" not in err
