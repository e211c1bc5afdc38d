"""The manifest: which public scripts the referee runs, where they came from, what we changed.

A JSON list of entries. Each script is rebuilt from its repository at the pinned commit
(``prepare.py``) into ``SCRIPTS_DIR/<id>/`` (outside this repository: their code is not
ours), with our edits: exact ``[old, new]`` string replacements, each of which must match.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Entry:
    id: str
    repo: str
    """``owner/name`` on GitHub."""
    commit: str
    path: str
    """The script's path in the repository."""
    changes: str
    """What we changed and why, in words."""
    xla_port: str = "author"
    """``author``: the script already runs on torch_xla; ``device-only``: a plain-PyTorch script
    given torch_xla's device and nothing else, the way a user would port it."""
    args: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    """Other files of the repository the script imports, copied at their own paths."""
    edits: dict[str, list[list[str]]] = field(default_factory=dict)
    """``{repo path: [[old, new], ...]}``: exact replacements, applied in order."""
    files: dict[str, str] = field(default_factory=dict)
    """``{path: text}``: local data files we write next to the script (no network)."""
    setup: str = ""
    """Python run once in the entry's folder after the files are written (binary local data:
    image folders, token files); empty for none."""
    timeout_s: int = 300

    def script(self, scripts: Path) -> Path:
        return scripts / self.id / self.path


def load(path: Path) -> list[Entry]:
    raw: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    entries = [Entry(**item) for item in raw]
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise ValueError(f"{path}: id {e.id!r} appears twice")
        seen.add(e.id)
    return entries
