"""What xprof says of each corpus run: the report's findings and headline, and the live side.

    python -m tests.corpus.verdicts            # compare with tests/corpus/verdicts.json
    python -m tests.corpus.verdicts --write    # record them anew (after a deliberate change)

The live side is replayed from the file: its records are fed, in file order, to the live
notices as the recorder's writer thread feeds them. Needs no torch.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xprof.analysis import analyze
from xprof.recorder.live import LiveNotices
from xprof.report.prose import exit_lines
from xprof.runfile import load_run

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
SAMPLES = HERE.parents[1] / "sample_runs"
EXPECTED = HERE / "verdicts.json"


def corpus() -> list[Path]:
    """Every run file of the corpus: the recorded loops, then the sample runs."""
    return sorted(RUNS.glob("*.json")) + sorted(SAMPLES.glob("*.json"))


def records(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the records of a run file, as written."""
    with open(path, encoding="utf-8") as f:
        header = json.loads(f.readline())
        return header, [json.loads(line) for line in f if line.strip()]


@contextlib.contextmanager
def at_root() -> Iterator[None]:
    """Paths said relative to the working folder read the same wherever the repo is cloned."""
    here = os.getcwd()
    os.chdir("/")
    try:
        yield
    finally:
        os.chdir(here)


def replay(path: Path) -> LiveNotices:
    """The live notices fed every record of ``path``, as the recorder's writer thread feeds them."""
    header, recs = records(path)
    live = LiveNotices(float(header.get("started_unix") or 0.0), None)
    with at_root():
        live.feed([r for r in recs if r.get("type") != "end"])
        live.close()
    return live


def notices_outside(path: Path, finding_ids: set[str]) -> list[tuple[str, str]]:
    """The live notices of ``path`` (replayed) whose finding is not among ``finding_ids``: the
    one-verdict check, for any run file (the corpus, and every exact-record test's file)."""
    return [(key, line) for key, line in replay(path).said if key not in finding_ids]


def verdict(path: Path) -> dict[str, Any]:
    a = analyze(load_run(path))
    t = a.totals
    live = replay(path)
    return {
        "steps": t.steps,
        "compiles": t.compiles,
        "recompiles": t.recompiles,
        "findings": [f"{f.id} | {f.cause}/{f.kind} | {f.severity}{' minor' if f.minor else ''} | {f.compiles} | "
                     f"{f.title}" for f in a.findings],
        "exit": exit_lines(a, path.name)[:-1],
        "notices": list(live.lines),
        "notice_ids": [key for key, _ in live.said],
    }


def all_verdicts() -> dict[str, dict[str, Any]]:
    return {p.name: verdict(p) for p in corpus()}


def main(argv: list[str]) -> int:
    found = all_verdicts()
    text = json.dumps(found, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if "--write" in argv:
        EXPECTED.write_text(text, encoding="utf-8")
        print(f"wrote {EXPECTED} ({len(found)} runs)")
        return 0
    before = EXPECTED.read_text(encoding="utf-8") if EXPECTED.exists() else ""
    diff = list(difflib.unified_diff(before.splitlines(), text.splitlines(), "recorded", "now", lineterm=""))
    print("\n".join(diff) if diff else f"same verdicts on {len(found)} runs")
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
