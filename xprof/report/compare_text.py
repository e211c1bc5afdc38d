"""The comparison as a person reads it: a rich terminal table, or Markdown for CI.

Both take a :class:`~xprof.comparison.model.CompareResult` (and the gate's violations)
and nothing else. Markdown is GitHub-flavoured: one table per comparison, lists for
findings, so it can go straight into ``$GITHUB_STEP_SUMMARY`` or a PR comment.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.table import Table

from xprof.comparison.model import CompareResult, FindingChange, MetricChange, PairComparison, Violation
from xprof.report.console import NARROW_TABLE, Text
from xprof.untrusted import md_code

Quote = Callable[[str], str]
"""How a renderer sets a run-file string (a name, a finding's text) into its own sentence:
as it is for the terminal and HTML (which escape it), a code span for Markdown."""


def _as_is(text: str) -> str:
    return text

MAX_LISTED = 20
"""Findings, graphs and shapes listed per section; the rest are counted."""

_MARK = {"worse": "▲ worse", "better": "▼ better", "same": "", "changed": "changed",
         "n/a": "n/a", "info": ""}
_STYLE = {"worse": "bold red", "better": "green", "changed": "yellow", "n/a": "dim", "info": "dim"}


def value(v: float | None, unit: str) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    if unit == "count":
        return f"{round(v)}"
    if unit == "s":
        return f"{v:.2f} s"
    if unit == "ms":
        return f"{v:.2f} ms"
    return f"{v:.2f}"


def change(m: MetricChange, compact: bool = False) -> str:
    """``+2 (+200%)``, ``-0.64 s (-65%)``, ``=`` for no change; compact: ``+2, +200%``."""
    if m.delta is None:
        return "n/a"
    if m.delta == 0:
        return "="
    sign = "+" if m.delta > 0 else "-"
    mag = value(abs(m.delta), m.unit)
    if m.rel is None or not math.isfinite(m.rel):
        return f"{sign}{mag}"
    return f"{sign}{mag}, {m.rel * 100:+.0f}%" if compact else f"{sign}{mag} ({m.rel * 100:+.0f}%)"


def interval_text(m: MetricChange) -> str:
    """``95% CI +18% to +31%`` for a metric judged on its steps' interval, else empty."""
    return f"95% CI {m.interval.percent()}" if m.interval is not None else ""


def _short_change(m: MetricChange) -> str:
    """``+111%``, or ``+2`` where there is no percent: a trend's cell, its value beside it."""
    if m.rel is not None and math.isfinite(m.rel):
        return f"{m.rel * 100:+.0f}%"
    return change(m)


def _finding_line(f: FindingChange, q: Quote = _as_is) -> str:
    parts = [q(f.cause_text())]
    if f.compiles_delta:
        parts.append(f"{f.compiles_delta:+d} compiles")
    if f.count_delta and f.count_delta != f.compiles_delta:
        parts.append(f"{f.count_delta:+d} events")
    if abs(f.seconds_delta) >= 0.005:
        parts.append(f"{f.seconds_delta:+.2f} s")
    if f.moved_from:
        parts.append(f"moved from {q(f.moved_from)}")
    return ", ".join(parts)


def sections(pair: PairComparison, q: Quote = _as_is) -> list[tuple[str, list[str]]]:
    """Titled lists of what changed; ``q`` sets every run-file string (see :data:`Quote`)."""
    return finding_sections(pair, q) + detail_sections(pair, q)


def finding_sections(pair: PairComparison, q: Quote = _as_is) -> list[tuple[str, list[str]]]:
    """The findings that are new, changed or gone."""
    out: list[tuple[str, list[str]]] = []
    new, base = q(pair.new.name), q(pair.base.name)
    for status, title in (("new", f"New findings in {new}"),
                          ("changed", "Changed findings"),
                          ("gone", f"Gone (fixed) since {base}")):
        found = [f for f in pair.findings if f.status == status]
        if found:
            out.append((title, [f"{_finding_line(f, q)} — {q(f.title)}" for f in found]))
    return out


def detail_sections(pair: PairComparison, q: Quote = _as_is) -> list[tuple[str, list[str]]]:
    """The graphs and input shapes only one of the runs has: the evidence under the findings."""
    out: list[tuple[str, list[str]]] = []
    new, base = q(pair.new.name), q(pair.base.name)
    for side, title in (("new", f"Graphs compiled only in {new}"),
                        ("base", f"Graphs compiled only in {base}")):
        graphs = [g for g in pair.graphs if g.side == side]
        if graphs:
            out.append((title, [
                f"{g.nodes if g.nodes is not None else '?'} nodes for "
                f"{q(g.inputs) if g.inputs else '(inputs not recorded)'}"
                f" (first at step {g.first_step}, cause {q(g.cause or '?')})" for g in graphs]))
    for side, title in (("new", f"Input shapes only in {new}"),
                        ("base", f"Input shapes only in {base}")):
        shapes = [s for s in pair.shapes if s.side == side]
        if shapes:
            out.append((title, [f"{q(s.input)}[{', '.join(str(d) for d in s.shape)}] {q(s.dtype)} "
                                + (f"{q(s.sharding or 'unsharded')} " if s.sharding is not None else "")
                                + f"({s.steps} steps)" for s in shapes]))
    return out


def _clip(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_LISTED:
        return lines
    return [*lines[:MAX_LISTED], f"… and {len(lines) - MAX_LISTED} more"]


def verdict_line(pair: PairComparison, q: Quote = _as_is) -> str:
    worse = [m.label for m in pair.regressions]
    better = [m.label for m in pair.improvements]
    if not worse and not better:
        return f"{q(pair.new.name)} vs {q(pair.base.name)}: no change beyond noise."
    text = []
    if worse:
        text.append("worse: " + ", ".join(worse))
    if better:
        text.append("better: " + ", ".join(better))
    return f"{q(pair.new.name)} vs {q(pair.base.name)}: " + "; ".join(text) + "."


def gate_lines(violations: list[Violation] | None, gated: bool) -> list[str]:
    if not gated:
        return []
    if not violations:
        return ["Gate: passed (every threshold held)."]
    return ["Gate: FAILED"] + [f"  {v.threshold}: {v.message}" for v in violations]


# -- terminal ------------------------------------------------------------------------

MARK_WIDTH = 12
"""The verdict column's width: a note longer than this is cut to its head ("not judged")
and said in full under the table, so the table fits 80 columns (a pipe, a CI log)."""


def _mark(m: MetricChange) -> tuple[str, str | None]:
    """The verdict cell, and the note said in full under the table when it does not fit."""
    mark = _MARK.get(m.verdict, m.verdict)
    if not (m.note and m.verdict in ("same", "info", "n/a") and (m.delta or m.verdict == "n/a")):
        return mark, None
    if len(m.note) <= MARK_WIDTH:
        return m.note, None
    head = m.note.split(" (")[0]
    return (head if len(head) <= MARK_WIDTH else mark), f"{m.label}: {m.note}"


def _pair_table(pair: PairComparison) -> tuple[Table, list[str]]:
    """The metrics of base and new, with the notes that did not fit the verdict column."""
    t = Table(header_style="bold", **NARROW_TABLE)
    t.add_column("Metric", no_wrap=True)
    t.add_column("base", justify="right", no_wrap=True)
    t.add_column("new", justify="right", no_wrap=True)
    t.add_column("Change", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True, min_width=8)
    notes: list[str] = []
    for m in pair.metric_changes:
        mark, note = _mark(m)
        if note:
            notes.append(note)
        cell = Text(change(m))
        if m.interval is not None:
            cell.append("\n" + interval_text(m), style="dim")
        t.add_row(Text(m.label), Text(value(m.base, m.unit)), Text(value(m.new, m.unit)), cell,
                  Text(mark, style=_STYLE.get(m.verdict, "") or "dim"))
    return t, notes


def _trend_table(result: CompareResult) -> Table:
    t = Table(header_style="bold", **NARROW_TABLE)
    t.add_column("Metric", no_wrap=True)
    for r in result.runs:
        t.add_column(Text(r.name), justify="right", overflow="fold")
    first = result.pairs[0]
    for k, m0 in enumerate(first.metric_changes):
        cells: list[RenderableType] = [Text(value(m0.base, m0.unit))]
        for pair in result.pairs:
            m = pair.metric_changes[k]
            cell = Text(value(m.new, m.unit))
            if m.delta:
                cell.append(f" ({_short_change(m)})", style=_STYLE.get(m.verdict, "dim"))
            cells.append(cell)
        t.add_row(Text(m0.label), *cells)
    return t


def render_terminal(result: CompareResult, violations: list[Violation] | None = None,
                    gated: bool = False) -> RenderableType:
    parts: list[RenderableType] = []
    for r in result.runs:
        parts.append(Text(f"{r.name}: {r.path} ({r.steps} steps, torch_xla {r.torch_xla or '?'}, "
                          f"{r.device or '?'}, {r.status})", style="dim"))
    if len(result.pairs) > 1:
        parts.append(Text(f"Trend against {result.base.name}", style="bold"))
        parts.append(_trend_table(result))
    for pair in result.pairs:
        for w in pair.warnings:
            parts.append(Text(f"warning: {pair.new.name}: {w}", style="yellow"))
        if len(result.pairs) == 1:
            parts.append(Text(f"{pair.base.name} (base) → {pair.new.name} (new)", style="bold"))
            table, notes = _pair_table(pair)
            parts.append(table)
            parts.extend(Text(note, style="dim") for note in notes)
        for title, lines in sections(pair):
            parts.append(Text(title + ":", style="bold"))
            for line in _clip(lines):
                parts.append(Text(f"  {line}"))
        parts.append(Text(verdict_line(pair), style="bold"))
    for line in gate_lines(violations, gated):
        parts.append(Text(line, style="bold red" if violations else "bold green"))
    return Group(*parts)


def print_terminal(console: Console, result: CompareResult, violations: list[Violation] | None = None,
                   gated: bool = False) -> None:
    console.print(render_terminal(result, violations, gated))


# -- Markdown ------------------------------------------------------------------------

def _md(text: str) -> str:
    """xprof's own words for Markdown: what GitHub would read as table syntax or HTML escaped.
    Run-file strings never go through here; they go in code spans (:func:`_code`)."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def _code(text: str) -> str:
    """A run-file string in a list or a sentence: a code span."""
    return md_code(text)


def _cell(text: str) -> str:
    """A run-file string in a table cell: a code span with ``|`` escaped."""
    return md_code(text, in_table=True)


def render_markdown(result: CompareResult, violations: list[Violation] | None = None,
                    gated: bool = False) -> str:
    """GitHub Markdown: xprof's own words as text, every string from a run file in a code
    span, so a run named ``@org/team ![x](http://host/p.png)`` pings nobody and loads nothing."""
    out: list[str] = []
    names = " → ".join(_code(r.name) for r in result.runs)
    out.append(f"## xprof compare: {names}")
    out.append("")
    if gated:
        if violations:
            out.append("**Gate: failed**")
            out.append("")
            out += [f"- `{v.threshold}`: {_code(v.message)}" for v in violations]
        else:
            out.append("**Gate: passed** (every threshold held)")
        out.append("")
    out += [verdict_line(pair, _code) for pair in result.pairs] + [""]
    warnings = [(p.new.name, w) for p in result.pairs for w in p.warnings]
    for name, w in warnings:
        out.append(f"> ⚠️ {_code(name)}: {_code(w)}")
    if warnings:
        out.append("")
    if len(result.pairs) == 1:
        pair = result.pairs[0]
        out.append(f"| Metric | {_cell(pair.base.name)} | {_cell(pair.new.name)} | Change | |")
        out.append("|---|---:|---:|---:|---|")
        for m in pair.metric_changes:
            mark = _MARK.get(m.verdict, m.verdict)
            if m.note and ((m.verdict in ("same", "info") and m.delta) or m.verdict == "n/a"):
                mark = m.note
            ci = f" ({interval_text(m)})" if m.interval is not None else ""
            out.append(f"| {m.label} | {value(m.base, m.unit)} | {value(m.new, m.unit)} | "
                       f"{change(m)}{ci} | {_md(mark)} |")
    else:
        out.append("| Metric | " + " | ".join(_cell(r.name) for r in result.runs) + " |")
        out.append("|---|" + "---:|" * len(result.runs))
        for k, m0 in enumerate(result.pairs[0].metric_changes):
            cells = [value(m0.base, m0.unit)]
            for pair in result.pairs:
                m = pair.metric_changes[k]
                extra = f" ({change(m, compact=True)})" if m.delta else ""
                flag = " ▲" if m.verdict == "worse" else " ▼" if m.verdict == "better" else ""
                cells.append(f"{value(m.new, m.unit)}{extra}{flag}")
            out.append(f"| {m0.label} | " + " | ".join(cells) + " |")
    out.append("")
    for pair in result.pairs:
        out += _md_sections(finding_sections(pair, _code))
        details = _md_sections(detail_sections(pair, _code))
        if details:
            n = sum(len(lines) for _, lines in detail_sections(pair))
            out += [f"<details><summary>Graphs and input shapes only one run has ({n})</summary>", "",
                    *details, "</details>", ""]
    return "\n".join(out)


def _md_sections(titled: list[tuple[str, list[str]]]) -> list[str]:
    out: list[str] = []
    for title, lines in titled:
        out += [f"**{title}**", "", *(f"- {line}" for line in _clip(lines)), ""]
    return out
