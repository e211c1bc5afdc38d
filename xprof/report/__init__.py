"""Every renderer: the HTML run report and compare page (:mod:`.html`, :mod:`.compare_html`,
sharing :mod:`.page` and ``templates/base.html.j2``), the terminal summary
(:mod:`.terminal`), compare text and Markdown (:mod:`.compare_text`), the Chrome trace
(:mod:`.trace`), and the words and numbers they share (:mod:`.prose`, :mod:`.fmt`).

Renderers take an :class:`xprof.analysis.model.Analysis`, a
:class:`xprof.comparison.model.CompareResult` or a :class:`xprof.analysis.ranks.RanksView`
(the trace alone reads the typed run records), and import no torch: a run recorded on a
TPU VM can be reported on a laptop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xprof.report.html import default_report_path, render_report, write_report


def __getattr__(name: str) -> Any:
    # Imported on first use: the terminal commands need neither jinja2 nor the HTML page.
    if name in __all__:
        from xprof.report import html

        return getattr(html, name)
    raise AttributeError(f"module 'xprof.report' has no attribute {name!r}")


__all__ = ["default_report_path", "render_report", "write_report"]
