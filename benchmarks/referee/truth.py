"""What torch_xla itself says happened: its counters at exit and its debug blocks.

Definitions (docs/public-scripts.md repeats them):
- ``compiles``: ``UncachedCompile`` at exit; ``executions``: ``ExecuteComputation`` +
  ``ExecuteReplicated`` at exit (after ``xm.wait_device_ops()``); ``barriers``: ``MarkStep``.
- a *forced read*: an ``Execution Analysis`` block whose cause is Python accessing a tensor's
  value; its *site* is the innermost frame inside the script's own folder (else the innermost
  frame, marked as a library site).
- ``late_compiles``: compile blocks after warm-up, warm-up being everything up to and including
  the second barrier that ran a graph, i.e. the second execution block not caused by a read
  (``None`` for a script with fewer than two such barriers).
- ``fallbacks``: every ``aten::*`` counter but ``aten::_local_scalar_dense`` (ops run on the CPU).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.referee.debuglog import Block, Frame, parse

READ_COUNTER = "aten::_local_scalar_dense"


@dataclass(frozen=True)
class Site:
    file: str
    line: int
    user: bool
    """True when the frame is in the script's own folder (else a library's innermost frame)."""

    def __str__(self) -> str:
        return f"{Path(self.file).name}:{self.line}" + ("" if self.user else " (library)")


@dataclass
class Truth:
    status: str
    error: str | None
    compiles: int
    executions: int
    barriers: int
    transfers: int
    scalar_reads: int
    fallbacks: dict[str, int]
    late_compiles: int | None
    reads: Counter[Site] = field(default_factory=Counter)
    """Forced reads (executions) by site."""
    read_compiles: Counter[Site] = field(default_factory=Counter)
    """Compiles caused by a read, by site."""
    stacks: dict[Site, list[Frame]] = field(default_factory=dict)
    """One full stack per site (innermost first), for matching a library read at any frame."""


def site_of(block: Block, root: Path) -> Site | None:
    if not block.frames:
        return None
    base = str(root.resolve())
    for f in block.frames:
        if f.file.startswith(base):
            return Site(f.file, f.line, True)
    f = block.frames[0]
    return Site(f.file, f.line, False)


def late_compiles(blocks: list[Block]) -> int | None:
    """Compile blocks after the second barrier execution (an execution not caused by a read);
    ``None`` when fewer than two barriers ran a graph."""
    ran = 0
    for i, block in enumerate(blocks):
        if block.kind == "execute" and not block.is_read:
            ran += 1
            if ran == 2:
                return sum(b.kind == "compile" for b in blocks[i + 1:])
    return None


def build(counters: dict[str, Any], debug_text: str, root: Path) -> Truth:
    final: dict[str, int] = counters["exit"]
    blocks = parse(debug_text)
    t = Truth(
        status=counters.get("status", "?"), error=counters.get("error"),
        compiles=final.get("UncachedCompile", 0),
        executions=final.get("ExecuteComputation", 0) + final.get("ExecuteReplicated", 0),
        barriers=final.get("MarkStep", 0), transfers=final.get("xla::_to_cpu", 0),
        scalar_reads=final.get(READ_COUNTER, 0),
        fallbacks={k: v for k, v in final.items() if k.startswith("aten::") and k != READ_COUNTER and v},
        late_compiles=late_compiles(blocks))
    for block in blocks:
        if not block.is_read:
            continue
        site = site_of(block, root)
        if site is None:
            continue
        t.stacks.setdefault(site, block.frames)
        (t.reads if block.kind == "execute" else t.read_compiles)[site] += 1
    return t


def load(folder: Path, root: Path) -> Truth | None:
    """The truth of one script's work folder, or ``None`` when its counters were not written."""
    counters = folder / "counters.json"
    if not counters.exists():
        return None
    debug = folder / "debug.txt"
    text = debug.read_text(encoding="utf-8", errors="replace") if debug.exists() else ""
    return build(json.loads(counters.read_text(encoding="utf-8")), text, root)
