"""The README's sample outputs, made by running the commands they show on the committed
sample runs, so they cannot go stale.

    .venv/bin/python docs/readme_samples.py           # rewrite the blocks in README.md
    .venv/bin/python docs/readme_samples.py --check   # exit 1 when a block differs

A block is the fenced code under a marker line ``<!-- sample: ARGS -->``: ``$ xprof ARGS``,
then what the real ``xprof`` command prints through a pipe (80 columns, ``COLUMNS`` unset),
stdout and stderr, then ``$ echo $?`` and the exit code when it is not 0.
``tests/test_readme.py`` runs the check.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- sample: (?P<args>[^>]*?) -->\n```\n)(?P<body>.*?)(```\n)", re.S)


def output(args: str) -> str:
    """``$ xprof ARGS`` and what it prints, as a user's shell shows it."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH")}
    proc = subprocess.run([sys.executable, "-m", "xprof", *args.split()], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)
    text = f"$ xprof {args}\n" + "".join(line.rstrip() + "\n" for line in (proc.stdout + proc.stderr).splitlines())
    if proc.returncode:
        text += f"$ echo $?\n{proc.returncode}\n"
    return text


def rendered(readme: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + output(m.group("args")) + m.group(4), readme)


def main() -> int:
    readme = README.read_text(encoding="utf-8")
    fresh = rendered(readme)
    if "--check" in sys.argv:
        if fresh != readme:
            print("README.md: a sample output differs from what xprof prints now; "
                  "run docs/readme_samples.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
