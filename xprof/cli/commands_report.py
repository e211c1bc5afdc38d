"""``xprof report``, ``xprof summary`` and ``xprof demo``.

Thin on purpose: parse arguments, load (one line and exit 2 on a bad file), analyze,
render, write (one line and exit 2 when the output cannot be written). Heavy imports
(pandas through the analysis, torch for the demo) happen inside the commands, so
``xprof --help`` stays fast and reading a run never imports torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from xprof.cli.app import app, console, fail, finite_json, load_or_fail, output_errors

RunArg = Annotated[str, typer.Argument(help="Run file written by xprof.watch() or xprof run.",
                                       show_default=False)]
RunsArg = Annotated[list[str], typer.Argument(
    help="Run file written by xprof.watch() or xprof run; several rank files (run.rank0.json ...) "
         "or their folder for a multi-process run.", show_default=False)]


def _load_many(paths: list[str]) -> list[Any]:
    """Load every run named (a folder stands for its run files); bad input exits 2."""
    from xprof.runfile import expand_run_paths

    try:
        expanded = expand_run_paths(paths)
    except ValueError as exc:
        fail(str(exc))
    return [load_or_fail(p) for p in expanded]


def _plain(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@app.command()
def report(
    runs: RunsArg,
    output: Annotated[str | None, typer.Option(
        "-o", "--output", help="Where to write the HTML [default: reports/<run name>.html].",
        show_default=False)] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the report in a browser.")] = False,
) -> None:
    """Write one self-contained HTML report of a run (works offline; plotly is inlined).

    Example: [bold]xprof report run.json -o run.html --open[/bold]; for a multi-process run,
    [bold]xprof report runs/[/bold] (a section lines up the ranks, the rest shows the straggler).
    """
    from xprof.analysis import analyze
    from xprof.report import default_report_path, write_report

    loaded = _load_many(runs)
    analyses = [analyze(r) for r in loaded]
    ranks = None
    analysis = analyses[0]
    if len(analyses) > 1:
        from xprof.analysis.ranks import ranks_view

        ranks = ranks_view(analyses)
        analysis = analyses[ranks.focus_index]
    path = output or str(default_report_path(analysis.run.name))
    with output_errors(path):
        written = write_report(analysis, path, ranks)
    _plain(str(written))
    if open_browser:
        import webbrowser

        webbrowser.open(written.resolve().as_uri())


@app.command()
def summary(
    runs: RunsArg,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the versioned summary object (docs/json.md) as JSON.")] = False,
) -> None:
    """Print how much time compiles and host reads cost, and what to change.

    Example: [bold]xprof summary run.json[/bold] or [bold]xprof summary run.json --json | jq .recompiles[/bold]
    """
    from xprof.analysis import analyze

    analyses = [analyze(r) for r in _load_many(runs)]
    if len(analyses) > 1:
        _summary_ranks(analyses, as_json)
        return
    analysis = analyses[0]
    if as_json:
        sys.stdout.write(json.dumps(finite_json(analysis.summary()), indent=2, default=str) + "\n")
        sys.stdout.flush()
        return
    from xprof.report.terminal import render_summary

    render_summary(analysis, console)


def _summary_ranks(analyses: list[Any], as_json: bool) -> None:
    from xprof.analysis.ranks import ranks_summary_json, ranks_view

    view = ranks_view(analyses)
    if as_json:
        doc = ranks_summary_json(view, analyses)
        sys.stdout.write(json.dumps(finite_json(doc), indent=2, default=str) + "\n")
        return
    from xprof.report.terminal import render_ranks, render_summary

    render_ranks(view, console)
    console.print()
    render_summary(analyses[view.focus_index], console)


@app.command()
def demo(
    output: Annotated[str, typer.Option(
        "-o", "--output", help="Where to write the HTML report; the run file goes beside it (.json).")
    ] = "reports/demo.html",
    steps: Annotated[int, typer.Option("--steps", min=3, max=2000,
                                       help="Training steps to run.")] = 30,
) -> None:
    """Train a tiny text model on torch_xla (the CPU is fine) with two classic problems, then report it.

    It pads each batch to its longest sequence and prints the loss tensor mid-step.

    Example: [bold]xprof demo -o reports/demo.html --steps 30[/bold]
    """
    import os

    os.environ.setdefault("PJRT_DEVICE", "CPU")  # as xprof.demo does: the CPU unless told otherwise
    try:
        import torch_xla  # noqa: F401
    except ImportError:
        fail("xprof demo needs torch_xla (pip install 'xprof-lazy[xla]', or torch_xla==2.9.0 "
             "with PJRT_DEVICE=CPU for the CPU)")
    out = Path(output)
    if out.is_dir():
        fail(f"cannot write {output}: it is a directory")
    run_path = out.with_suffix(".json") if out.suffix != ".json" else out.with_name(out.stem + ".run.json")
    with output_errors(str(out.parent)):
        out.parent.mkdir(parents=True, exist_ok=True)

    from xprof.analysis import analyze
    from xprof.demo import run_demo
    from xprof.report import write_report
    from xprof.report.prose import short

    _plain(f"xprof demo: training {steps} steps of a tiny text model on torch_xla ...")
    with output_errors(str(run_path)):
        result = run_demo(str(run_path), steps=steps)
    analysis = analyze(load_or_fail(result.run_path))
    with output_errors(str(out)):
        written = write_report(analysis, out)
    _plain(f"run file: {result.run_path}")
    _plain(f"report:   {written}")
    for line in short(analysis):
        _plain(line)
