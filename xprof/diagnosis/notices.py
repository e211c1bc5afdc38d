"""The words the live notices share: run-file text made safe for a terminal, a site's line,
``--explain``'s line. Each cause's own clause is its unit's (:class:`~xprof.diagnosis.unit.CauseUnit`),
chosen by :func:`xprof.diagnosis.registry.clause`.
"""

from __future__ import annotations

import os

from xprof.runfile import GraphChange, Site
from xprof.untrusted import visible


def clean(text: object, limit: int = 120) -> str:
    """Run-file text made safe for one terminal line: characters a terminal acts on shown as
    escapes, long text cut."""
    s = visible(str(text), one_line=True)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def where(site: Site | None) -> str:
    """``train.py:18`` (relative to the working folder when below it), with the caller's line
    when the read was made inside a function of the user's."""
    if site is None or not site.file or site.file == "?":
        return "?"
    out = rel(site.file, site.line)
    if site.caller is not None and not site.via:
        out += f" (called from {rel(site.caller[0], site.caller[1])})"
    return clean(out)


def rel(file: str, line: int) -> str:
    try:
        rel = os.path.relpath(file)
    except ValueError:
        rel = file
    return f"{rel if not rel.startswith('..') else os.path.basename(file)}:{line}"





def graph_line(change: GraphChange | None) -> str | None:
    """``--explain``'s words for a new graph: ``at train.py:23 (loss = ... * warmup): an input
    became the constant 1``; None when it names no user line."""
    if change is None or not change.lines:
        return None
    c = change.lines[0]
    code = f" ({clean(c.code, 60)})" if c.code else ""
    return f"it changed at {clean(rel(c.file, c.line), 80)}{code}: {clean(c.what, 80)}"
