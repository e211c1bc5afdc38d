"""What xprof said: its ``xprof summary --json`` object, reduced to what the referee checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Named:
    """One finding: its cause, kind, id, the user lines it names, and whether it was folded as minor."""

    id: str
    cause: str
    kind: str
    title: str
    compiles: int
    minor: bool
    lines: tuple[tuple[str, int], ...]
    """(file name, line) of the finding's ``file:line`` and of its ``lines``."""


@dataclass
class Said:
    compiles: int | None = None
    executions: int | None = None
    recompiles: int | None = None
    steps: int | None = None
    barriers: int | None = None
    status: str = ""
    findings: list[Named] = field(default_factory=list)
    failure: str | None = None
    """Set when there is no summary: xprof's own last lines (a crash is a finding of the referee)."""

    @property
    def major(self) -> list[Named]:
        return [f for f in self.findings if not f.minor]


def _lines(f: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    if f.get("file") and f.get("line"):
        out.append((Path(str(f["file"])).name, int(f["line"])))
    for extra in f.get("lines") or []:
        if extra.get("file") and extra.get("line"):
            out.append((Path(str(extra["file"])).name, int(extra["line"])))
    return tuple(dict.fromkeys(out))


def from_summary(data: dict[str, Any]) -> Said:
    return Said(
        compiles=data.get("compiles"), executions=data.get("executions"), recompiles=data.get("recompiles"),
        steps=data.get("steps"), barriers=data.get("barriers"), status=str(data.get("status", "")),
        findings=[Named(str(f.get("id", "")), str(f.get("cause", "")), str(f.get("kind", "")),
                        str(f.get("title", "")), int(f.get("compiles") or 0), bool(f.get("minor")), _lines(f))
                  for f in data.get("findings") or []])


def tail(path: Path, n: int = 3) -> str:
    if not path.exists():
        return "(no output)"
    lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return " / ".join(ln.strip() for ln in lines[-n:])


def load(folder: Path) -> Said:
    summary = folder / "summary.json"
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Said(failure=tail(folder / "xprof.log"))
    if not isinstance(data, dict) or data.get("schema") != "xprof-summary":
        return Said(failure=tail(folder / "xprof.log"))
    return from_summary(data)
