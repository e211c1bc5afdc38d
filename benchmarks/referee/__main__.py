"""``python -m benchmarks.referee SCRIPTS_DIR [--work DIR] [--only ID]... [--judge-only]
[--resummarize] [--xprof PATH] [--out FILE]``

Runs every manifest entry (``--manifest``, else this package's manifest.json)
plainly and under ``xprof run``, then prints the table. ``--judge-only`` re-judges the
outputs already in ``--work`` without running anything; with ``--resummarize`` it first
rewrites each ``summary.json`` from the ``run.json`` already there, by the ``xprof`` given
with ``--xprof`` (default: this Python's), so a newer xprof's analysis is judged on the same
recorded runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.referee.manifest import Entry, load
from benchmarks.referee.prepare import PrepareError, prepare
from benchmarks.referee.run import default_xprof, run_entry, summarize

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.referee")
    p.add_argument("scripts", type=Path)
    p.add_argument("--manifest", type=Path)
    p.add_argument("--work", type=Path, default=Path("/tmp/referee-work"))
    p.add_argument("--only", action="append", default=[])
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    p.add_argument("--judge-only", action="store_true")
    p.add_argument("--resummarize", action="store_true")
    p.add_argument("--xprof", type=Path, default=None)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    xprof = a.xprof or default_xprof()
    if not xprof.exists():
        print(f"referee: no xprof executable at {xprof}", file=sys.stderr)
        return 2
    manifest = a.manifest or HERE / "manifest.json"
    try:
        entries = load(manifest)
    except (OSError, ValueError, TypeError) as err:
        print(f"referee: cannot read the manifest {manifest}: {err}", file=sys.stderr)
        return 2
    if a.only:
        entries = [e for e in entries if e.id in set(a.only)]
    for e in entries:
        if a.judge_only:
            break
        print(f"referee: running {e.id}", file=sys.stderr, flush=True)
        try:
            prepare(e, a.mirrors, a.scripts)
        except PrepareError as err:
            print(f"referee: {err}", file=sys.stderr)
            return 2
        status = run_entry(e, a.scripts, a.work, xprof)
        (a.work / e.id / "status.json").write_text(json.dumps(status), encoding="utf-8")
        print(f"referee: {e.id}: {status}", file=sys.stderr, flush=True)
    if a.resummarize:
        resummarize(entries, a.work, xprof)
    from benchmarks.referee.table import judge_all, render
    text = render(judge_all(entries, a.work, a.scripts))
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


def resummarize(entries: list[Entry], work: Path, xprof: Path) -> None:
    """Rewrite ``summary.json`` of every entry that has a ``run.json``, by ``xprof``."""
    for e in entries:
        folder = work / e.id
        if (folder / "run.json").exists():
            rc = summarize(xprof, folder)
            print(f"referee: {e.id}: summary by {xprof} (exit {rc})", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
