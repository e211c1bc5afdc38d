"""Record the corpus: every scenario loop and corpus loop under ``xprof.watch()``, one run file each.

    PJRT_DEVICE=CPU python -m tests.corpus.record [NAME ...]

Writes ``tests/corpus/runs/NAME.json`` (one torch_xla process for all of them; each loop
uses its own model size, so no loop reuses another's cached graphs), and the SPMD
scenarios (``spmd_NAME.json``) from a process of their own with 4 CPU devices. The run
files are committed: ``tests/test_corpus.py`` reads them with no torch installed.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = Path(__file__).resolve().parent / "runs"

EXCLUDED = {"common"}
"""Scenario modules that are not loops."""


def loops() -> dict[str, str]:
    """Corpus name -> module: the test scenarios, then the corpus' own loops."""
    out: dict[str, str] = {}
    for package, prefix in (("tests.scenarios", ""), ("tests.corpus.loops", "")):
        try:
            pkg = importlib.import_module(package)
        except ImportError:
            continue
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name not in EXCLUDED and not info.name.startswith("_"):
                out[prefix + info.name] = f"{package}.{info.name}"
    out["demo"] = "xprof.demo"
    out["hf_trainer"] = out["hf_trainer_eval"] = "tests.scripts.hf_padded_trainer"
    return out


def record(name: str, module: str) -> Path:
    import torch_xla

    import xprof

    path = RUNS / f"{name}.json"
    path.unlink(missing_ok=True)
    if name == "demo":
        from xprof.demo import run_demo

        run_demo(str(path))  # (it records under its own watch())
        return path
    mod = importlib.import_module(module)
    with xprof.watch(path, name=name, live=False), tempfile.TemporaryDirectory() as out:
        if name.startswith("hf_trainer"):
            mod.train(out, evaluate=name.endswith("_eval"))
        else:
            mod.train(torch_xla.device())
    return path


def record_spmd() -> list[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4", "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, str(ROOT / "tests/scripts/spmd_scenarios.py"), tmp], check=True, env=env)
        out = []
        for f in sorted(Path(tmp).glob("*.json")):
            if f.name.endswith(".counters.json"):
                continue
            dest = RUNS / f.name
            shutil.copyfile(f, dest)
            out.append(dest)
        return out


def main(argv: list[str]) -> int:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    sys.path.insert(0, str(ROOT))
    RUNS.mkdir(exist_ok=True)
    wanted = set(argv)
    for name, module in loops().items():
        if wanted and name not in wanted:
            continue
        print(f"recording {name} ...", flush=True)
        record(name, module)
    if not wanted or "spmd" in wanted:
        print("recording spmd scenarios ...", flush=True)
        record_spmd()
    print(json.dumps(sorted(p.name for p in RUNS.glob("*.json"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
