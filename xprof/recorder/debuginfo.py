"""Reading torch_xla's own compile/execute analysis (``PT_XLA_DEBUG_LEVEL``).

With ``PT_XLA_DEBUG_LEVEL=2`` and ``PT_XLA_DEBUG_FILE=path``, torch_xla writes one
block per compilation and one per execution: why it happened ("user torch_xla.sync",
"most likely user code trying to access tensor value before torch_xla.sync"), the
graph hash, the number of graph inputs and outputs, and the Python frames that caused
it. That is the one place torch_xla itself names the line behind a compile, so
``xprof run`` captures it and appends it to the run file as ``debug`` records.

The wording has changed between releases (older builds say ``mark_step`` where 2.9
says ``torch_xla.sync``), so the parser keys on a few stable words (``Cause``,
``Graph Hash``, ``Number of Graph Inputs``, ``file:line`` frames) and ignores every
line it does not know. It imports nothing heavy: it runs on any machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from xprof.recorder.frames import FrameKind, classify_path

_PREFIX = re.compile(r"^\s*(Post Compilation|Compilation|Execution) Analysis:\s?(.*)$")
_COMPUTATION_HASH = re.compile(r"^\s*Computation hash:\s*(\S+)")
_GRAPH_HASH = re.compile(r"Graph Hash:\s*(\S+)", re.I)
_INPUTS = re.compile(r"Number of Graph Inputs:\s*(\d+)", re.I)
_OUTPUTS = re.compile(r"Number of Graph Outputs:\s*(\d+)", re.I)
_FRAME = re.compile(r"^\s*(?P<func>\S.*?)\s+\((?P<file>.+):(?P<line>\d+)\)\s*$")
_POST_FIELD = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z ]+?):\s*(?P<num>[-+0-9.eE]+)\s*(?P<unit>[A-Za-z]*)\s*$")
_RULE = re.compile(r"^\s*(=+|-+)\s*$")


Frame = tuple[str, str, int]
"""(function, file, line) as torch_xla printed it."""


@dataclass
class DebugEntry:
    """One compilation or execution analysis block."""

    kind: str
    """``compile`` or ``execute``."""
    cause: str = ""
    graph_hash: str | None = None
    inputs: int | None = None
    outputs: int | None = None
    frames: list[Frame] = field(default_factory=list)
    computation_hash: str | None = None
    post: dict[str, float] = field(default_factory=dict)
    """The "Post Compilation Analysis" numbers, e.g. ``graph_input_size_gb``."""

    @property
    def cause_kind(self) -> str:
        if self.through_barrier_hook:
            return "barrier"
        return cause_kind(self.cause)

    @property
    def through_barrier_hook(self) -> bool:
        """The top frame is ``watch()``'s own wrapper of the step marker.

        torch_xla names a user barrier only when the top Python frame is its own
        ``sync``/``mark_step``. The wrapper's code is named ``mark_step`` so that torch_xla
        says what it says without xprof; runs recorded before that have it as
        ``_xla_step_marker``, and torch_xla 2.9 printed "most likely user code trying to
        access tensor value" for their every barrier. Such an entry is a barrier (the
        wrapper only runs inside one), whatever it says.
        """
        if not self.frames:
            return False
        func, file, _ = self.frames[0]
        return func in ("_xla_step_marker", "mark_step") and is_xprof_file(file)

    def user_frames(self) -> list[Frame]:
        return [f for f in self.frames if is_user_file(f[1])]


def cause_kind(cause: str) -> str:
    """``barrier`` (a user step barrier), ``host_read`` (a value read before the barrier),
    ``dynamo``, ``other`` or ``unknown``: the coarse meaning of torch_xla's wording."""
    c = cause.lower()
    if not c:
        return "unknown"
    if "access tensor value" in c or "tensor value" in c:
        return "host_read"
    if "dynamo" in c:
        return "dynamo"
    if "user" in c and ("sync" in c or "mark_step" in c or "mark step" in c):
        return "barrier"
    return "other"


def is_xprof_file(path: str) -> bool:
    """A frame in xprof's own package (here, or on the machine that wrote the file)."""
    return classify_path(path) is FrameKind.INTERNAL


def is_user_file(path: str) -> bool:
    """False for torch, torch_xla, other installed packages, the stdlib and xprof itself
    (:func:`xprof.recorder.frames.classify_path`, the rule the recorder uses too)."""
    return classify_path(path) is FrameKind.USER


def _post_key(label: str, unit: str) -> str:
    key = re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")
    return f"{key}_{unit.lower()}" if unit else key


def _parse_block(kind: str, lines: list[str]) -> DebugEntry:
    entry = DebugEntry(kind=kind)
    section = ""
    cause: list[str] = []
    for raw in lines:
        text = raw.strip()
        if not text or _RULE.match(text):
            continue
        if text.endswith(":") or text.lower().endswith(" cause"):
            low = text.lower()
            section = "cause" if "cause" in low else "frames" if "frame" in low else low
            continue
        m = _GRAPH_HASH.search(text)
        if m:
            entry.graph_hash = m.group(1)
            continue
        m = _INPUTS.search(text)
        if m:
            entry.inputs = int(m.group(1))
            continue
        m = _OUTPUTS.search(text)
        if m:
            entry.outputs = int(m.group(1))
            continue
        if section == "cause":
            cause.append(text)
        elif section == "frames":
            fm = _FRAME.match(raw)
            if fm:
                entry.frames.append((fm["func"], fm["file"], int(fm["line"])))
    entry.cause = " ".join(cause)
    return entry


def parse_debug_text(text: str) -> list[DebugEntry]:
    """Every compile/execute block in ``text``, in order; unknown lines are skipped."""
    entries: list[DebugEntry] = []
    current: tuple[str, list[str]] | None = None
    post: dict[str, float] | None = None

    def close() -> None:
        nonlocal current
        if current is not None:
            label, body = current
            entries.append(_parse_block("compile" if label == "Compilation" else "execute", body))
        current = None

    for line in text.splitlines():
        m = _PREFIX.match(line)
        if m is None:
            hm = _COMPUTATION_HASH.match(line)
            if hm:
                close()
                for e in reversed(entries):
                    if e.kind == "compile":
                        e.computation_hash = e.computation_hash or hm.group(1)
                        break
            continue
        label, content = m.group(1), m.group(2)
        if label == "Post Compilation":
            close()
            last = next((e for e in reversed(entries) if e.kind == "compile"), None)
            pm = _POST_FIELD.match(content)
            if last is not None and pm:
                post = last.post
                try:
                    post[_post_key(pm["key"], pm["unit"])] = float(pm["num"])
                except ValueError:
                    pass
            continue
        is_rule = bool(re.fullmatch(r"\s*=+\s*", content))
        if current is not None and current[0] != label:
            close()
        if current is None:
            current = (label, [])
            if is_rule:
                continue
        elif is_rule and any(s.strip() and not _RULE.match(s) for s in current[1]):
            close()  # the closing rule of a block with content
            continue
        current[1].append(content)
    close()
    return entries


def parse_debug_file(path: str, offset: int = 0) -> list[DebugEntry]:
    """Parse the file torch_xla wrote, from byte ``offset`` (where a capture started)."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    return parse_debug_text(data.decode("utf-8", errors="replace"))


def _frames_json(frames: list[Frame]) -> list[list[Any]]:
    return [[func, file, line] for func, file, line in frames]


def debug_records(entries: list[DebugEntry]) -> list[dict[str, Any]]:
    """Run-file ``debug`` records: every compile, and each distinct execution once.

    A long run executes the same graph from the same line thousands of times; those are
    written once with a ``count`` (and the index of the first), so the run file stays
    small while every distinct (cause, graph, frames) combination is kept.
    """
    out: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for n, e in enumerate(entries):
        rec: dict[str, Any] = {
            "type": "debug",
            "kind": e.kind,
            "n": n,
            "cause": e.cause,
            "cause_kind": e.cause_kind,
            "hooked": e.through_barrier_hook,
            "graph_hash": e.graph_hash,
            "inputs": e.inputs,
            "outputs": e.outputs,
            "frames": _frames_json(e.frames),
            "user_frames": _frames_json(e.user_frames()),
        }
        if e.kind == "compile":
            rec["computation_hash"] = e.computation_hash
            if e.post:
                rec["post"] = dict(e.post)
            out.append(rec)
            continue
        key = (e.cause, e.graph_hash, e.inputs, e.outputs, tuple(e.frames))
        first = seen.get(key)
        if first is not None:
            first["count"] += 1
            continue
        rec["count"] = 1
        seen[key] = rec
        out.append(rec)
    return out
