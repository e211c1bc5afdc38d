"""xprof in a Jupyter notebook (Jupyter, JupyterLab, Colab, Kaggle: any ipykernel kernel).

- When ``watch()`` ends in a kernel, the cell shows the run's summary as HTML (the headline,
  the first thing to change, the findings, the full report behind a fold) instead of the
  terminal's lines; the live notices are the same lines on stderr, which the kernel sends to
  the cell as they are written.
- ``xprof.show(run)`` shows the full report in the cell; a ``watch`` and a loaded run show
  their summary as a cell's value.
- In a process forked from the kernel (``xmp.spawn(fn, start_method="fork")``, with
  ``watch()`` inside ``fn``) nothing is displayed from the child: each ``watch()`` writes its
  file and leaves its path in a hand-off file; the kernel reads it when the cell ends and shows
  the ranks side by side (the pod view), in that cell.

Outside a kernel nothing here runs: :func:`kernel` is ``None`` and ``watch()`` prints its lines.
This module imports neither IPython nor the analysis until a kernel asks for them.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("xprof")

_plotly_sent = False
"""This kernel has sent plotly.js to the notebook page once (later outputs use that copy)."""
_hooked = False
"""The kernel reads the hand-off file when each cell ends (set in the kernel, seen by its forks)."""


def kernel() -> Any | None:
    """The notebook kernel's shell when this process is a kernel or was forked from one; else None.

    A kernel is an IPython shell with a ``kernel`` (ipykernel's ``ZMQInteractiveShell``, which
    Colab's and Kaggle's shells extend); a terminal IPython has none, so it prints as a script does."""
    if "ipykernel" not in sys.modules:
        return None
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except Exception:
        return None
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    return shell


def _kernel_pid() -> int:
    """The kernel's own process (ipykernel's output streams know it; a fork inherits the number)."""
    pid = getattr(sys.stdout, "_master_pid", None)
    return pid if isinstance(pid, int) else os.getpid()


def forked_from_kernel() -> bool:
    """This process was forked from the kernel: it must not display (the kernel's sockets are the
    kernel's); its text still reaches the cell through ipykernel's pipe."""
    return kernel() is not None and _kernel_pid() != os.getpid()


def _handoff_path(pid: int) -> str:
    return os.path.join(tempfile.gettempdir(), f"xprof-notebook-{pid}.jsonl")


def setup() -> None:
    """In a kernel: show a loaded run's summary as a cell's value, and read the forks' hand-off
    file when each cell ends. Called by ``import xprof``; does nothing outside a kernel."""
    global _hooked
    shell = kernel()
    if shell is None or forked_from_kernel() or _hooked:
        return
    try:
        html = shell.display_formatter.formatters["text/html"]
        html.for_type_by_name("xprof.runfile.records", "Run", _run_html)
        shell.events.register("post_run_cell", _after_cell)
        _hooked = True
    except Exception as exc:
        log.warning("xprof: notebook display not set up (%s: %s)", type(exc).__name__, exc)


# -- what watch() calls ----------------------------------------------------------------------

def after_watch(requested: str, path: str, speak: bool, forks: int = 0) -> bool:
    """``watch()`` ended in a kernel: show the summary here (``speak``), or from a fork hand the
    file to the kernel. ``forks``: processes forked while it recorded (said when the run has no
    step of its own). True when the terminal's lines are not needed; never raises."""
    if kernel() is None:
        return False
    try:
        if forked_from_kernel():
            if not _hooked:
                return False
            with open(_handoff_path(_kernel_pid()), "a", encoding="utf-8") as f:
                f.write(json.dumps({"requested": requested, "path": path}) + "\n")
            return True
        if speak:
            _display(*summary_of([path], forks=forks))
        return True
    except Exception as exc:
        log.warning("xprof: no summary in the notebook (%s: %s)", type(exc).__name__, exc)
        return False


def _after_cell(_result: Any = None) -> None:
    """When a cell ends: the files that forked processes recorded in it, shown as one run (their
    ranks side by side)."""
    handoff = _handoff_path(os.getpid())
    try:
        taken = f"{handoff}.{os.getpid()}.read"
        os.replace(handoff, taken)
    except OSError:
        return
    try:
        with open(taken, encoding="utf-8") as f:
            entries = [json.loads(line) for line in f if line.strip()]
        os.unlink(taken)
        runs: dict[str, list[str]] = {}
        for e in entries:
            runs.setdefault(str(e["requested"]), [])
            if str(e["path"]) not in runs[str(e["requested"])]:
                runs[str(e["requested"])].append(str(e["path"]))
        for paths in runs.values():
            present = sorted(p for p in paths if os.path.exists(p))
            if present:
                _display(*summary_of(present))
    except Exception as exc:
        log.warning("xprof: the forked processes' runs not shown (%s: %s)", type(exc).__name__, exc)


# -- rendering -------------------------------------------------------------------------------

def _analyses(paths: Sequence[str]) -> tuple[Any, Any]:
    """(the analysis shown, the ranks view or None) of one run file or several rank files."""
    from xprof.analysis import analyze
    from xprof.runfile import load_run

    if len(paths) == 1:
        return analyze(load_run(paths[0])), None
    from xprof.analysis.pod import load_pod

    pod = load_pod(list(paths), summaries=False)
    view = pod.view()
    focus_path = view.focus_path or paths[0]
    focus = pod.analysis_of(focus_path) or analyze(load_run(focus_path))
    return focus, view


def _footer(paths: Sequence[str]) -> str:
    name = paths[0] if len(paths) == 1 else os.path.dirname(paths[0]) or "."
    shown = f"xprof.show({name!r})" if len(paths) == 1 else f"xprof.show({list(paths)!r})"
    return f"{', '.join(paths)} · the full report in a cell: {shown}"


def _forked_note(forks: int) -> str:
    return (f"{forks} {'process was' if forks == 1 else 'processes were'} forked while this watch() recorded "
            "(xmp.spawn): the steps they ran are not in this run. Put xprof.watch() inside the function they "
            "run: each process then writes its own file (run.rank0.json, ...) and the cell that spawned them "
            "shows them side by side.")


def summary_of(paths: Sequence[str], forks: int = 0) -> tuple[str, str]:
    """(HTML, text) of one run file or a pod's rank files, from one analysis (the HTML with
    plotly.js the first time); ``forks``: processes forked while the run recorded, said when it
    has no step of its own."""
    from xprof.report import prose
    from xprof.report.notebook import summary_html

    analysis, view = _analyses(paths)
    note = _forked_note(forks) if forks and analysis.totals.steps == 0 else ""
    text = "\n".join(([note] if note else []) + prose.exit_lines(analysis, paths[0])[:-1])
    if view is not None:
        text = f"xprof: {len(paths)} rank files; rank {view.focus} shown\n" + text
    return _with_plotly(summary_html(analysis, ranks=view, footer=_footer(paths), note=note)), text


def summary_html_of(paths: Sequence[str]) -> str:
    """The summary fragment of one run file or a pod's rank files."""
    return summary_of(paths)[0]


def _with_plotly(text: str) -> str:
    """``text`` after plotly.js the first time in this kernel; every time in Colab, where each
    output is a page of its own and cannot use another output's copy."""
    global _plotly_sent
    if _plotly_sent and "google.colab" not in sys.modules:
        return text
    from xprof.report.notebook import plotly_loader

    _plotly_sent = True
    return plotly_loader() + text


def _display(html_text: str, plain: str) -> None:
    from IPython.display import display

    display({"text/html": html_text, "text/plain": plain}, raw=True)


def _run_html(run: Any) -> str | None:
    """A loaded run as a cell's value (None, the plain repr, when it cannot be analysed)."""
    from xprof.analysis import analyze
    from xprof.report.notebook import summary_html

    try:
        analysis = analyze(run)
    except Exception as exc:
        log.warning("xprof: no summary of %s (%s: %s)", run.path, type(exc).__name__, exc)
        return None
    return _with_plotly(summary_html(analysis, footer=f"{run.path} · the full report in a cell: "
                                                      f"xprof.show({run.path!r})"))


def _paths_of(run: Any) -> list[str]:
    """The run files meant by ``run``: a path, several, a folder, a loaded run or a ``watch``."""
    from xprof.runfile import Run, expand_run_paths

    if isinstance(run, Run):
        return [str(run.path)]
    if hasattr(run, "requested_path") and hasattr(run, "path"):  # a watch()
        return expand_run_paths([str(run.path)])
    if isinstance(run, (str, os.PathLike)):
        return expand_run_paths([os.fspath(run)])
    return expand_run_paths([os.fspath(p) for p in run])


def show(run: Any) -> None:
    """Show the full report of ``run`` in the cell: a run file's path, several rank files or
    their folder, a loaded run (``xprof.load``) or a ``watch``. Outside a notebook, writes the
    report as ``xprof report`` does and prints its path."""
    from xprof.report import prose
    from xprof.report.notebook import report_frame

    paths = _paths_of(run)
    analysis, view = _analyses(paths)
    if kernel() is None:
        from xprof.report import default_report_path, write_report

        print(write_report(analysis, default_report_path(analysis.run.name), view))
        return
    _display(_with_plotly(report_frame(analysis, view)), "\n".join(prose.exit_lines(analysis, paths[0])[:-1]))


def _register() -> None:
    """This module is the recorder's presenter (``recorder.watch.PRESENTER``): the recorder
    calls it through that slot and never imports the report side."""
    import xprof.recorder.watch  # noqa: F401  (the module: the package hands on the class of that name)

    setattr(sys.modules["xprof.recorder.watch"], "PRESENTER", sys.modules[__name__])  # noqa: B010


_register()
