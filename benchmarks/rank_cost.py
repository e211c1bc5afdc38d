"""What one rank of a pod costs, in instructions: a figure the machine's load does not move.

``xprof summary`` of a pod reads and analyses each rank file in turn (``analysis.pod._read``:
DuckDB's read of a batch, then each rank's analysis and what the pod view keeps of it). On a
shared machine its wall time moves by half between two runs of the same tree, so a change of a
few percent cannot be seen there. Here each tree reads ``--few`` and then ``--many`` rank files
of ``report_scale.py``'s pod (10k steps each, one batch each time) under valgrind's callgrind,
and the difference of the two instruction counts over the ranks between is one rank's cost:
start-up and imports cancel out. ``--load-only`` counts the read alone (no analysis).

Instructions are not time: page faults (the kernel's) and cache misses are not in them, so the
real command is still timed side by side (``report_scale.py --baseline``).

    .venv/bin/python benchmarks/rank_cost.py                       # this tree
    .venv/bin/python benchmarks/rank_cost.py --trees /work/main /tmp/w86 --load-only
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report_scale import write_pod

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_DRIVER = """
import sys
from xprof.runcolumns import load_many, single_threaded
single_threaded()  # (a pod's worker: one DuckDB thread)
import xprof.analysis.pod as pod
paths = sys.argv[2:]
if sys.argv[1] == "load":
    load_many(paths)
else:
    pod._read(list(enumerate(paths)), summaries=False)
"""


def instructions(tree: str, what: str, paths: list[str]) -> int:
    """Instructions callgrind counts for the driver over ``paths``, run by ``tree``'s xprof."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                           "-c", _DRIVER, what, *paths], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir())
    found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{tree}: valgrind failed: {proc.stderr[-400:]}")
    return int(found.group(1))


def per_rank(tree: str, what: str, files: list[str], few: int) -> float:
    """Millions of instructions a rank: (count over all files - count over ``few``) / the rest."""
    with ThreadPoolExecutor(2) as pool:  # (the two counts at once: instructions do not care)
        small, big = pool.map(lambda paths: instructions(tree, what, paths), (files[:few], files))
    return (big - small) / (len(files) - few) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs="+", default=[HERE], help="checkouts to count (first on PYTHONPATH)")
    ap.add_argument("--few", type=int, default=2)
    ap.add_argument("--many", type=int, default=6)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--load-only", action="store_true", help="also count the read alone, without the analysis")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("rank_cost.py needs valgrind (apt install valgrind)")
    with tempfile.TemporaryDirectory(prefix="xprof-rank-cost-") as tmp:
        write_pod(tmp, args.many, args.steps)
        files = [os.path.join(tmp, f"run.rank{r}.json") for r in range(args.many)]
        for tree in args.trees:
            line = f"{tree}: {per_rank(tree, 'read', files, args.few):.0f} M instructions a rank (read + analysis)"
            if args.load_only:
                line += f", {per_rank(tree, 'load', files, args.few):.0f} M of them the read"
            print(line, flush=True)


if __name__ == "__main__":
    main()
