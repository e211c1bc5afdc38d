"""Reading ``PT_XLA_DEBUG_LEVEL=2``'s output: one block per compilation and per execution.

Written for the referee apart from xprof's own reader (``xprof/recorder/debuginfo.py``), so
that the referee does not share a bug with what it judges. A block starts at a line
``Compilation Analysis: ====`` or ``Execution Analysis: ====`` and holds the cause (the line
after ``... Cause``), the graph hash, the number of graph inputs and the Python frames
(``func (file:line)``, innermost first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEAD = re.compile(r"^(Compilation|Execution) Analysis: (.*)$")
_FRAME = re.compile(r"^\s*(?P<func>\S.*?) \((?P<file>[^()]+):(?P<line>\d+)\)\s*$")
_HASH = re.compile(r"Graph Hash:\s*(\S+)")
_INPUTS = re.compile(r"Number of Graph Inputs:\s*(\d+)")

READ_CAUSE = "access tensor value"
"""The words torch_xla 2.9 uses for a graph run because Python asked for a value."""


@dataclass(frozen=True)
class Frame:
    func: str
    file: str
    line: int


@dataclass
class Block:
    """One compilation or execution analysis."""

    kind: str
    """``compile`` or ``execute``."""
    cause: str = ""
    graph_hash: str = ""
    inputs: int | None = None
    frames: list[Frame] = field(default_factory=list)

    @property
    def is_read(self) -> bool:
        return READ_CAUSE in self.cause

    @property
    def is_user_barrier(self) -> bool:
        return self.cause.startswith("user ") and not self.is_read


def parse(text: str) -> list[Block]:
    """Every block of ``text`` in file order. A block is ``====``, its sections, ``----``, ``====``;
    lines of no block (``Post Compilation Analysis``, ``Computation hash``) are skipped."""
    blocks: list[Block] = []
    current: Block | None = None
    section = ""
    for raw in text.splitlines():
        m = _HEAD.match(raw)
        if not m:
            continue
        kind, body = ("compile" if m.group(1) == "Compilation" else "execute"), m.group(2)
        stripped = body.strip()
        if stripped.startswith("===="):
            if current is not None and current.kind == kind and section == "closed":
                current, section = None, ""
            else:
                current, section = Block(kind), ""
                blocks.append(current)
            continue
        if current is None:
            continue
        if stripped.startswith("----"):
            section = "closed"
        elif stripped.endswith("Cause"):
            section = "cause"
        elif stripped.startswith("Graph Info"):
            section = "graph"
        elif stripped.startswith("Python Frame"):
            section = "frames"
        elif section == "cause" and not current.cause:
            current.cause = stripped
        elif section == "graph":
            if h := _HASH.search(stripped):
                current.graph_hash = h.group(1)
            if n := _INPUTS.search(stripped):
                current.inputs = int(n.group(1))
        elif section == "frames" and (f := _FRAME.match(body)):
            current.frames.append(Frame(f.group("func"), f.group("file"), int(f.group("line"))))
    return blocks
