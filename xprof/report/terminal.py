"""The terminal summary (``xprof summary``): the report's first screen, in rich text.

Same sentences as the HTML report (:mod:`xprof.report.prose`), then one block per
finding with its cost, where it comes from and what to change.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from xprof.analysis.model import Analysis, Finding
from xprof.analysis.ranks import RanksView
from xprof.diagnosis.terms import WARMUP_STEPS
from xprof.report import fmt, prose
from xprof.report.console import NARROW_TABLE, Text

MAX_FINDINGS = 10


def _kpi_table(analysis: Analysis) -> Table:
    t = analysis.totals
    table = Table.grid(padding=(0, 3))
    for _ in range(6):
        table.add_column(justify="left")
    alarm = "bold red"
    table.add_row(*(Text(s, style="dim") for s in
                    ("steps", "wall time", "compile time", "graphs", "recompiles", "host reads")))
    table.add_row(
        Text(str(t.steps), style="bold"),
        Text(fmt.seconds(t.wall_seconds), style="bold"),
        Text(f"{fmt.seconds(t.compile_seconds)} ({fmt.percent(t.compile_share)})",
             style=alarm if t.compile_share >= 0.2 else "bold"),
        Text(str(t.distinct_graphs), style="bold"),
        Text(str(t.recompiles), style=alarm if t.recompiles else "bold green"),
        Text(str(t.syncs), style=alarm if t.syncs else "bold green"),
    )
    return table


def _finding_block(f: Finding, rank: int) -> Panel:
    color = "yellow" if f.severity != "info" else "blue"
    body: list[Text | Table] = [Text(f.title, style="bold"),
                                Text(prose.cost_line(f), style="red" if f.seconds else "dim")]
    where = fmt.location(f.file, f.line)
    if where:
        line = Text("at ", style="dim")
        line.append(where, style="cyan")
        if f.func:
            line.append(f" in {f.func}()", style="dim")
        if f.via:
            line.append(f" via {f.via}", style="dim")
        body.append(line)
        if f.code:
            body.append(Text(f"    {f.code}", style="bold"))
    if f.input:
        text = Text("input ", style="dim")
        text.append(f.input, style="cyan")
        if f.dim is not None:
            text.append(f" dim {f.dim}", style="dim")
        if f.shapes:
            text.append(": " + fmt.short_list((fmt.shape(s) for s in f.shapes), 8))
        if f.shardings:
            text.append(" sharded " + " / ".join(fmt.sharding(s) for s in f.shardings))
        body.append(text)
    if f.pattern:
        body.append(Text(f"pattern: {f.pattern}", style="dim"))
    for e in f.evidence[:4]:
        body.append(Text(f"• {e}", style="dim"))
    if f.graph_changes:
        body.append(_graph_diff(f.graph_changes))
    advice = Text("fix: ", style="bold green")
    advice.append(f.advice)
    body.append(advice)
    if f.what_if:
        wt = Table(box=None, padding=(0, 2), show_edge=False, header_style="dim")
        wt.add_column("if you pad with")
        wt.add_column("graphs", justify="right")
        wt.add_column("compile", justify="right")
        wt.add_column("saved", justify="right")
        for w in f.what_if:
            wt.add_row(Text(str(w.get("strategy", ""))), Text(str(w.get("graphs", ""))),
                       Text(fmt.seconds(w.get("compile_seconds"))), Text(fmt.seconds(w.get("saved_seconds"))))
        body.append(wt)
    title = Text(f"#{rank} ", style="bold")
    title.append(prose.cause_label(f.cause), style=color)
    title.append(f" · {f.kind.replace('_', ' ')}", style="dim")
    return Panel(Group(*body), title=title, title_align="left", border_style=color, expand=True)


MAX_DIFF_ROWS = 4
"""Rows of a finding's graph diff in the summary (``--explain``)."""


def _graph_diff(changes: list[dict[str, Any]]) -> Table:
    """``--explain``'s view of a finding's new graphs: the step, the first user line where it
    changed and what changed there (the report and ``--json`` have every line)."""
    table = Table(box=None, padding=(0, 2), show_edge=False, header_style="dim")
    table.add_column("new graph")
    table.add_column("changed at")
    table.add_column("what")
    for g in changes[:MAX_DIFF_ROWS]:
        lines = g.get("lines") or []
        when = Text(f"step {g.get('step')}" + (" (read)" if g.get("at") == "read" else ""), style="dim")
        if lines:
            c = lines[0]
            more = f" (+{len(lines) - 1 + int(g.get('more_lines') or 0)} lines)" if len(lines) > 1 else ""
            table.add_row(when, Text(f"{os.path.basename(str(c.get('file')))}:{c.get('line')}", style="cyan"),
                          Text(f"{c.get('what')}{more}"))
        else:
            table.add_row(when, Text("-", style="dim"), Text("no user line (backward ops have no frame)", style="dim"))
    if len(changes) > MAX_DIFF_ROWS:
        table.add_row(Text(""), Text(""), Text(f"... {len(changes) - MAX_DIFF_ROWS} more", style="dim"))
    return table


def render_summary(analysis: Analysis, console: Console) -> None:
    """Print the summary; every value from the run is printed as text, never as markup."""
    run = analysis.run
    head = Text("xprof ", style="bold blue")
    head.append(run.name, style="bold")
    head.append(f"  {run.path}", style="dim")
    console.print(head)
    spmd = prose.spmd_line(run)
    if spmd:
        console.print(Text(spmd, style="dim"))
    banner = prose.status_banner(analysis)
    if banner:
        console.print(Text(banner, style="bold yellow"))
    console.print(_kpi_table(analysis))
    console.print()
    for sentence in prose.headline(analysis):
        console.print(Text(sentence), soft_wrap=False)
    what, how = prose.next_step(analysis)
    todo = Text(what, style="bold green")
    todo.append(" " + how)
    console.print(todo)
    findings = prose.ranked(analysis.findings)
    if findings:
        console.print()
        warm = (f"; warm-up, every compile of the first {WARMUP_STEPS} steps, not listed"
                if analysis.totals.steps else "")
        console.print(Text(f"Findings (most time lost first, information last{warm})", style="bold"))
        for n, f in enumerate(findings[:MAX_FINDINGS], 1):
            console.print(_finding_block(f, n))
        if len(findings) > MAX_FINDINGS:
            console.print(Text(f"… and {len(findings) - MAX_FINDINGS} more in the HTML report "
                               f"(xprof report {run.path})", style="dim"))
    folded = prose.minor_line(analysis)
    if folded:
        console.print(Text(folded, style="dim"))
    for note in analysis.notes:
        console.print(Text(f"note: {note}", style="dim"))


def _rank_table() -> Table:
    """The rank table's columns, each at least as wide as its heading (80 columns hold them)."""
    table = Table(**NARROW_TABLE)
    for col in prose.RANK_COLUMNS:
        table.add_column(col, justify="right", min_width=len(col))
    return table


def render_ranks(view: RanksView, console: Console, details_below: bool = True) -> None:
    """The rank files that are not there, the rank table (grouped for many ranks), the
    stragglers and the findings across ranks of a multi-process run."""
    for fault in view.faults:
        console.print(Text(f"{fault.kind}: {fault.message}", style="bold yellow"))
    for note in view.notes:
        console.print(Text(f"digest not used: {note}", style="yellow"))
    if view.sources_line:
        console.print(Text(view.sources_line, style="dim"))
    groups, rows = prose.rank_rows(view)
    title = f"Ranks ({len(view.table)}" + (f" of {view.world_size}" if view.world_size else "") + ")"
    if groups:
        console.print(Text(f"{title}: ranks that counted alike", style="bold"))
        table = _rank_table()
        for cells in groups:
            table.add_row(*(Text(c) for c in cells))
        console.print(table)
    if rows:
        console.print(Text("Other ranks, one by one" if groups else title, style="bold"))
        table = _rank_table()
        for cells in rows:
            table.add_row(*(Text(c) for c in cells))
        console.print(table)
    for s in view.stragglers:
        console.print(Text(f"straggler: {s.message}", style="bold red"))
    if not view.stragglers:
        console.print(Text(prose.NO_STRAGGLER))
    for f in view.findings:
        console.print(Text(f"- {f.title} [{prose.rank_finding_where(f)}]"))
    if details_below and view.focus is not None:
        console.print(Text(f"Details below: rank {view.focus}.", style="dim"))
