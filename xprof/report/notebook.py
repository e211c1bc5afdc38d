"""A run in a notebook cell: the summary as an HTML fragment, and the full report inline.

The summary (:func:`summary_html`) is what ``watch()`` shows when its ``with`` block ends in a
notebook, and what a run shows as a cell's value: the headline, the first thing to change
and the findings, the words of ``xprof summary`` and the report (:mod:`xprof.report.prose`).
Its styles are scoped under ``.xprof-nb``.

The full report (:func:`report_frame`) is the page ``xprof report`` writes, in an
``<iframe srcdoc>``, so that its styles and the notebook's never meet. It carries no plotly.js
of its own: the frame takes the notebook page's ``Plotly`` (plotly's own notebook mode
loads one; otherwise :func:`plotly_loader` adds one copy to the first output that needs it),
so a notebook holds plotly.js once, not once a cell.
"""

from __future__ import annotations

import html
from typing import Any

from xprof.analysis.model import Analysis
from xprof.analysis.ranks import RanksView
from xprof.report import fmt, prose
from xprof.report.html import ranks_context, report_context
from xprof.report.page import env, plotly_js

MAX_FINDINGS = 6
"""Findings listed in the cell; the rest are counted (the full report has them all)."""

_FRAME_PLOTLY = """
(function () {
  try {
    if (!window.Plotly && window.parent && window.parent !== window) {
      window.Plotly = window.parent.Plotly || window.parent._Plotly;
    }
  } catch (e) {}
  function fit() {
    try {
      var f = window.frameElement;
      if (f) { f.style.height = (document.documentElement.scrollHeight + 24) + "px"; }
    } catch (e) {}
  }
  fit();
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
})();
"""
"""Stands in the report page for the inlined plotly.js: the notebook page's ``Plotly``, and the
frame's height made the page's (a same-origin ``srcdoc`` frame may read its parent)."""

_OPEN_FRAME = "var f=this.querySelector('iframe');if(this.open&&f&&!f.srcdoc){f.srcdoc=f.dataset.doc;}"
"""A closed "Full report" loads its page when opened (plotly cannot size charts in a hidden frame)."""


def report_document(analysis: Analysis, ranks: RanksView | None = None) -> str:
    """The report page, as ``xprof report`` writes it, without its copy of plotly.js."""
    ctx = report_context(analysis, ranks)
    ctx["plotly_js"] = _FRAME_PLOTLY
    return env().get_template("report.html.j2").render(**ctx)


def plotly_loader() -> str:
    """One copy of plotly.js for the notebook page, loaded unless the page has one already."""
    return f"<script>if (!window.Plotly) {{\n{plotly_js()}\n}}</script>"


def report_frame(analysis: Analysis, ranks: RanksView | None = None, *, closed: bool = False) -> str:
    """The full report in an ``<iframe srcdoc>``; ``closed``: the page is set when a
    ``<details>`` around it opens."""
    doc = html.escape(report_document(analysis, ranks), quote=True)
    title = html.escape(f"xprof report: {analysis.run.name}", quote=True)
    if closed:
        return f'<iframe title="{title}" data-doc="{doc}"></iframe>'
    return (f'<iframe title="{title}" srcdoc="{doc}" style="width:100%;height:900px;border:1px solid #e9ecef;'
            'border-radius:6px"></iframe>')


def _findings(analysis: Analysis) -> tuple[list[dict[str, Any]], int]:
    ranked = [f for f in prose.ranked(analysis.findings) if not f.minor] or prose.ranked(analysis.findings)
    rows = [{"n": n + 1, "title": f.title, "cost": prose.cost_line(f), "location": fmt.location(f.file, f.line) or ""}
            for n, f in enumerate(ranked[:MAX_FINDINGS])]
    return rows, max(0, len(analysis.findings) - len(rows))


def summary_html(analysis: Analysis, *, ranks: RanksView | None = None, inline_report: bool = True,
                 footer: str = "", note: str = "") -> str:
    """The cell's summary: ``note`` first (what the caller knows that the run does not), headline,
    first thing to change, findings, and (``inline_report``) the full report behind a fold."""
    t = analysis.totals
    next_title, next_how = prose.next_step(analysis)
    findings, more = _findings(analysis)
    status = "" if t.status == "ok" else (f"{t.status}: {t.exception}" if t.exception else t.status)
    frame = report_frame(analysis, ranks, closed=True) if inline_report else ""
    text = env().get_template("notebook.html.j2").render(
        name=analysis.run.name, status=status, headline=prose.headline(analysis), next_title=next_title,
        next_how=next_how, findings=findings, more=more, frame=frame, footer=footer,
        ranks=ranks_context(ranks) if ranks is not None else None, open_frame=_OPEN_FRAME, note=note)
    return text
