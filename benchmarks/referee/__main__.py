"""``python -m benchmarks.referee SCRIPTS_DIR [--work DIR] [--only ID]... [--judge-only] [--out FILE]``

Runs every manifest entry (````--manifest``, else this package's manifest.json)
plainly and under ``xprof run``, then prints the table. ``--judge-only`` re-judges the
outputs already in ``--work`` without running anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.referee.manifest import load
from benchmarks.referee.prepare import PrepareError, prepare
from benchmarks.referee.run import run_entry

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.referee")
    p.add_argument("scripts", type=Path)
    p.add_argument("--manifest", type=Path)
    p.add_argument("--work", type=Path, default=Path("/tmp/referee-work"))
    p.add_argument("--only", action="append", default=[])
    p.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    p.add_argument("--judge-only", action="store_true")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
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
        status = run_entry(e, a.scripts, a.work)
        (a.work / e.id / "status.json").write_text(json.dumps(status), encoding="utf-8")
        print(f"referee: {e.id}: {status}", file=sys.stderr, flush=True)
    from benchmarks.referee.table import judge_all, render
    text = render(judge_all(entries, a.work, a.scripts))
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
