"""Finding run files: the files of a multi-process run (``*.rankN.json``) and the run files
in a folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from xprof.runfile.loader import special_file_kind
from xprof.runfile.records import FORMAT

# -- finding run files -------------------------------------------------------------------

RANK_IN_NAME = re.compile(r"\.rank(\d+)\.[^.]+$")
"""``run.rank3.json``: the file of rank 3 of a multi-process run."""


def _looks_like_run(path: str) -> bool:
    try:
        if special_file_kind(os.stat(path).st_mode) is not None:
            return False  # (a FIFO named run.json would wait for a writer)
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline(4096)
    except OSError:
        return False
    return f'"{FORMAT}"' in first


def rank_of_path(path: str, position: int) -> int:
    """The N of ``*.rankN.json``, else ``position``."""
    m = RANK_IN_NAME.search(path)
    return int(m.group(1)) if m else position


def _rank_key(path: str) -> tuple[int, str]:
    m = RANK_IN_NAME.search(path)
    return (int(m.group(1)) if m else 1 << 30, path)


def expand_run_paths(paths: Sequence[str]) -> list[str]:
    """Run files named by ``paths``: a folder stands for the run files in it.

    In a folder, ``*.rankN.json`` files are taken when there are any (sorted by rank),
    otherwise every ``*.json`` file that starts with an xprof run header. Files named
    directly are kept as given (the loader reports bad ones). Raises ``ValueError`` with
    one line when a path does not exist or a folder holds no run file.
    """
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if n.endswith(".json"))
            ranked = [os.path.join(p, n) for n in names if RANK_IN_NAME.search(n)]
            found = ranked or [os.path.join(p, n) for n in names
                               if not n.endswith(".trace.json") and _looks_like_run(os.path.join(p, n))]
            if not found:
                raise ValueError(f"{p}: no xprof run files in this folder")
            out.extend(sorted(found, key=_rank_key))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise ValueError(f"{p}: no such file or folder")
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique
