"""The run report: one self-contained HTML file, and the words shared with the terminal.

Everything here takes an :class:`xprof.analysis.model.Analysis` and nothing else, and
imports no torch: a run recorded on a TPU VM can be reported on a laptop.
"""

from xprof.report.html import default_report_path, render_report, write_report

__all__ = ["default_report_path", "render_report", "write_report"]
