"""Reading, summarising and reporting a run never imports torch or torch_xla.

A run recorded on a TPU VM must be readable on a laptop without torch. Each check runs
in a fresh interpreter: once with ``sys.modules['torch'] = None`` (so any import of
torch raises), and once unguarded, proving afterwards that no torch module was loaded
(a guarded import that something caught and ignored would otherwise go unseen).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from xprof.runfile import RunWriter

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"

SCRIPT = r"""
import json, sys
GUARD = sys.argv[1] == "guard"
if GUARD:
    for name in ("torch", "torch_xla", "torch_xla.core", "torch_xla.core.xla_model"):
        sys.modules[name] = None
import xprof, xprof.report, xprof.analysis, xprof.cli, xprof.cli.commands, xprof.report.terminal
from xprof.cli.app import run_app
codes = [run_app(["summary", sys.argv[2]]), run_app(["summary", sys.argv[2], "--json"]),
         run_app(["report", sys.argv[2], "-o", sys.argv[3]])]
loaded = sorted(m for m, v in sys.modules.items()
                if v is not None and (m == "torch" or m.startswith(("torch.", "torch_xla"))))
print("RESULT " + json.dumps({"codes": codes, "loaded": loaded}))
"""


def make_run(path: Path) -> Path:
    w = RunWriter(path, {"xprof_version": "0.1.0", "name": "notorch", "meta": {"device": "TPU"}})
    w.write({"type": "sig", "id": 0, "inputs": [{"name": "x", "shape": [2, 3], "dtype": "float32",
                                                 "src": "to"}]})
    w.write({"type": "compile", "i": 0, "t": 1.1, "ns": 1e8, "at": "barrier"})
    for i in range(4):
        w.write({"type": "step", "i": i, "t0": 1.0 + i, "tb": 1.05 + i, "t1": 1.2 + i, "barrier": "sync",
                 "sig": 0, "c": {"UncachedCompile" if i == 0 else "CachedCompile": 1,
                                 "ExecuteComputation": 1, "MarkStep": 1}, "bu" if i == 0 else "bc": 1})
        w.write({"type": "exec", "samples": [[1.19 + i, 1e6]]})
    w.write({"type": "end", "t": 5.0, "status": "ok", "exception": None, "steps": 4, "syncs": 0,
             "errors": 0})
    w.close()
    return path


@pytest.mark.parametrize("mode", ["guard", "watch"])
def test_summary_and_report_do_not_import_torch(mode: str, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run.json")
    out = tmp_path / "r.html"
    res = subprocess.run([str(PY), "-c", SCRIPT, mode, str(run), str(out)], capture_output=True,
                         text=True, timeout=180, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["codes"] == [0, 0, 0], res.stderr
    assert result["loaded"] == [], f"torch modules were imported: {result['loaded']}"
    assert "Traceback" not in res.stderr
    assert "This run trained 4 steps" in res.stdout
    assert out.is_file() and out.stat().st_size > 1_000_000
