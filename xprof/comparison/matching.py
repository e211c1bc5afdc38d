"""Pairing the findings of two runs: which are new, which are gone, which changed.

A finding about an input is the same finding in both runs when its cause and input
agree. A finding about a line is harder: editing the script moves line numbers, so
the line is first matched by what it says (the stripped source text recorded with
the site) inside the same function, and only then by ``file:line``, then by the file's
base name and line (the script was run from another checkout). Findings with neither
an input nor a line (a CPU fallback, an unexplained compile) match by cause and kind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable

from xprof.analysis.model import Finding
from xprof.comparison.model import FindingChange

KeyFn = Callable[[Finding], Hashable | None]


def _by_input(f: Finding) -> Hashable | None:
    return (f.cause, f.input) if f.input else None


def _by_code(f: Finding) -> Hashable | None:
    if f.input or not f.code or not f.code.strip():
        return None
    return (f.cause, f.kind, f.func, " ".join(f.code.split()))


def _by_line(f: Finding) -> Hashable | None:
    return (f.cause, f.kind, f.file, f.line) if f.file and not f.input else None


def _by_basename(f: Finding) -> Hashable | None:
    return (f.cause, f.kind, os.path.basename(f.file), f.line) if f.file and not f.input else None


def _by_kind(f: Finding) -> Hashable | None:
    return (f.cause, f.kind) if not f.file and not f.input else None


PASSES: tuple[tuple[str, KeyFn], ...] = (
    ("cause+input", _by_input),
    ("code+function", _by_code),
    ("file:line", _by_line),
    ("file name:line", _by_basename),
    ("cause+kind", _by_kind),
)


def where(f: Finding) -> str | None:
    if f.input:
        return f.input
    if f.file:
        return f"{os.path.basename(f.file)}:{f.line}" if f.line else os.path.basename(f.file)
    return None


def _changed(a: Finding, b: Finding) -> bool:
    """A matched finding changed when what it counts changed; seconds alone are noise."""
    return a.count != b.count or a.compiles != b.compiles or (a.shapes or None) != (b.shapes or None)


def diff_findings(base: list[Finding], new: list[Finding]) -> list[FindingChange]:
    """Every finding of either run once: new, gone, changed or same (new run's order first)."""
    left = list(range(len(base)))
    right = list(range(len(new)))
    pairs: list[tuple[int, int, str]] = []
    for label, key in PASSES:
        index: dict[Hashable, list[int]] = {}
        for i in left:
            k = key(base[i])
            if k is not None:
                index.setdefault(k, []).append(i)
        matched_left: set[int] = set()
        matched_right: set[int] = set()
        for j in right:
            k = key(new[j])
            if k is None:
                continue
            queue = index.get(k)
            if queue:
                i = queue.pop(0)  # same key twice (one line of code in two places): in order
                pairs.append((i, j, label))
                matched_left.add(i)
                matched_right.add(j)
        left = [i for i in left if i not in matched_left]
        right = [j for j in right if j not in matched_right]

    out: list[FindingChange] = []
    by_new = {j: (i, label) for i, j, label in pairs}
    for j, f in enumerate(new):
        if j in by_new:
            i, label = by_new[j]
            b = base[i]
            moved = None
            if b.file and (b.line != f.line
                           or os.path.basename(b.file) != os.path.basename(f.file or "")):
                moved = where(b)
            out.append(FindingChange("changed" if _changed(b, f) else "same", f.cause, f.kind, f.title,
                                     where(f), label, b, f, moved_from=moved))
        else:
            out.append(FindingChange("new", f.cause, f.kind, f.title, where(f), None, None, f))
    for i in left:
        b = base[i]
        out.append(FindingChange("gone", b.cause, b.kind, b.title, where(b), None, b, None))
    order = {"new": 0, "changed": 1, "gone": 2, "same": 3}
    out.sort(key=lambda c: order[c.status])
    return out
