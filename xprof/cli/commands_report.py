"""``xprof report``, ``xprof summary`` and ``xprof demo``.

Thin on purpose: parse arguments, load (one line and exit 2 on a bad file), analyze,
render, write (one line and exit 2 when the output cannot be written). Heavy imports
(pandas through the analysis, torch for the demo) happen inside the commands, so
``xprof --help`` stays fast and reading a run never imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from xprof.cli import summary_cache
from xprof.cli.app import (
    Command,
    app,
    console,
    err_console,
    expand_or_fail,
    fail,
    finite_json,
    load_or_fail,
    output_errors,
    reads_only,
)
from xprof.cli.outputs import checked_output
from xprof.cli.progress import Progress, wanted
from xprof.report.console import write_stdout

RunArg = Annotated[str, typer.Argument(metavar="RUN", help="Run file written by xprof.watch() or xprof run.",
                                       show_default=False)]
RunsArg = Annotated[list[str], typer.Argument(
    metavar="RUN...",
    help="Run file written by xprof.watch() or xprof run; several rank files (run.rank0.json ...) "
         "or their folder for a multi-process run.", show_default=False)]


def _one(path: str, bar: Progress) -> Any:
    """The analysis of one run file (bad file: one line, exit 2)."""
    from xprof.analysis import analyze

    bar.phase(f"reading {Path(path).name}")
    run = load_or_fail(path)
    bar.phase(f"analysing {Path(path).name}")
    return analyze(run)


def read_pod(files: list[str], bar: Progress, summaries: bool = False) -> tuple[Any, Any]:
    """The pod and its view, of several rank files (read in parallel where that helps);
    exit 2 when none of them can be read. ``summaries``: each rank's summary for ``--json``."""
    from xprof.analysis.pod import load_pod

    bar.phase("reading rank files", total=len(files))
    pod = load_pod(files, progress=bar.update, summaries=summaries)
    if not pod.ranks:
        fail("no rank file could be read: " + "; ".join(why for _, _, why in pod.unreadable))
    bar.phase("comparing ranks")
    return pod, pod.view()


def _focus(pod: Any, view: Any, bar: Progress) -> Any:
    """The rank shown in full (the straggler, else the first): kept, or read again."""
    return pod.analysis_of(view.focus_path) or _one(view.focus_path, bar)


def _plain(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@app.command(cls=Command)
def report(
    runs: RunsArg,
    output: Annotated[str | None, typer.Option(
        "-o", "--output", metavar="FILE", help="Where to write the HTML [default: reports/<run file name>.html].",
        show_default=False)] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the report in a browser.")] = False,
) -> None:
    """Write a run's HTML report: one self-contained file.

    It works offline (plotly is inlined) and can be attached to a CI run or mailed.

    Examples:

    \b
      xprof report run.json -o run.html --open
      xprof report runs/    # a folder of rank files: the ranks side by side
    """
    reads_only()
    from xprof.report import default_report_path, write_report

    files = expand_or_fail(runs)
    if output is not None:
        checked_output(output, files)  # before the work: a typo must not cost a minute
    with Progress(wanted(machine_output=False)) as bar:
        ranks = None
        if len(files) > 1:
            pod, ranks = read_pod(files, bar)
            analysis = _focus(pod, ranks, bar)
        else:
            analysis = _one(files[0], bar)
        path = output or str(default_report_path(_report_name(runs, files)))
        target = checked_output(path, files)
        bar.phase("writing the report")
        with output_errors(path):
            written = write_report(analysis, target, ranks)
    _plain(str(Path(path)))
    if open_browser:
        _open(written)


def _report_name(runs: list[str], files: list[str]) -> str:
    """The report's default name: the run file's (``before.json`` -> ``before``, so two runs of
    one script do not overwrite each other's report), a folder's, or a pod's rank files' stem."""
    from xprof.runfile import RANK_IN_NAME

    if len(runs) == 1 and Path(runs[0]).is_dir():
        return Path(runs[0]).resolve().name
    name = Path(files[0]).name
    rank = RANK_IN_NAME.search(name) if len(files) > 1 else None
    return name[:rank.start()] if rank else Path(name).stem


def _open(path: Path) -> None:
    """Open the report in a browser, or say where it is when this machine has none."""
    import webbrowser

    try:
        opened = webbrowser.open(path.resolve().as_uri())
    except webbrowser.Error:
        opened = False
    if not opened:
        err_console.print(f"xprof: no browser to open here; the report is {path.resolve()}", markup=False)


@app.command(cls=Command)
def summary(
    runs: RunsArg,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the versioned summary object (docs/json.md) as JSON.")] = False,
    brief: Annotated[bool, typer.Option(
        "--brief", help="Print only the four lines watch() and xprof run end with.")] = False,
    write_digest: Annotated[bool, typer.Option(
        "--digest", hidden=True, help="With --brief: also write the run file's digest (watch() asks for it).")] = False,
) -> None:
    """Print what compiles and host reads cost, and what to change.

    Examples:

    \b
      xprof summary run.json
      xprof summary run.json --json | jq .recompiles
    """
    reads_only()
    files = expand_or_fail(runs)
    if brief:
        _brief(files, write_digest)
        return
    if len(files) == 1:
        _single_summary(files[0], as_json)
        return
    with Progress(wanted(machine_output=as_json)) as bar:
        pod, view = read_pod(files, bar, summaries=as_json)
        focus = None if as_json else _focus(pod, view, bar)
    _summary_ranks(view, focus, as_json)


def _single_summary(path: str, as_json: bool) -> None:
    """The summary of one run file, served from the cache when it was made before (same
    bytes, same output, same code: :mod:`xprof.cli.summary_cache`)."""

    def make() -> str:
        with Progress(wanted(machine_output=as_json)) as bar:
            analysis = _one(path, bar)
        if as_json:
            return json.dumps(finite_json(analysis.summary()), indent=2, default=str) + "\n"
        from xprof.report.terminal import render_summary

        with console.capture() as captured:
            render_summary(analysis, console)
        return captured.get()

    variant = ("json" if as_json else
               f"text|{console.width}|{console.color_system}|{console.is_terminal}|{console.encoding}")
    write_stdout(summary_cache.through(path, variant, make))


def _brief(files: list[str], digest: bool = False) -> None:
    """The exit summary of one run file (``watch()`` prints it through this command), then
    (``digest``) its digest, from the same analysis: after the lines, which are what the
    training process waits for."""
    if len(files) != 1:
        fail(f"--brief takes one run file, not {len(files)}")
    made: list[Any] = []

    def make() -> str:
        from xprof.report.prose import exit_lines

        analysis = _one(files[0], Progress(False))
        made.append(analysis)
        return "".join(line + "\n" for line in exit_lines(analysis, files[0]))

    write_stdout(summary_cache.through(files[0], "brief", make))
    if digest:
        from xprof.cli.commands_digest import digest_quietly

        digest_quietly(files[0], made[0] if made else None)


def _summary_ranks(view: Any, focus: Any, as_json: bool) -> None:
    from xprof.analysis.ranks import ranks_summary_json

    if as_json:
        doc = ranks_summary_json(view)
        write_stdout(json.dumps(finite_json(doc), indent=2, default=str) + "\n")
        return
    from xprof.report.terminal import render_ranks, render_summary

    render_ranks(view, console)
    console.print()
    render_summary(focus, console)


@app.command(cls=Command)
def demo(
    output: Annotated[str, typer.Option(
        "-o", "--output", metavar="FILE", help="Where to write the HTML report; the run file goes beside it (.json).")
    ] = "reports/demo.html",
    steps: Annotated[int, typer.Option("--steps", min=3, max=2000, metavar="N",
                                       help="Training steps to run.")] = 30,
) -> None:
    """Train a tiny model with two classic problems, then report it.

    It runs on torch_xla (the CPU is fine), pads each batch to its longest sequence and prints the loss tensor mid-step.

    Examples:

    \b
      xprof demo -o reports/demo.html --steps 30
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
    checked_output(str(run_path))
    target = checked_output(output)
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
        write_report(analysis, target)
    _plain(f"run file: {result.run_path}")
    _plain(f"report:   {out}")
    for line in short(analysis):
        _plain(line)
