"""``xprof run`` (record an unmodified script), ``xprof export`` and ``xprof ranks``.

Thin: each command checks its arguments, calls :mod:`xprof.recorder.runner`, :mod:`xprof.report.trace`
or :mod:`xprof.analysis.ranks`, and maps failures to an exit code with one line on stderr.
"""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from xprof.cli.app import (
    Command,
    app,
    console,
    err_console,
    fail,
    finite_json,
    load_records_or_fail,
    output_errors,
    reads_only,
)
from xprof.cli.outputs import checked_output
from xprof.report.console import write_stdout
from xprof.words import plural

_RUN_HELP = """Record a script unmodified, as xprof.watch() would.

Like python -m cProfile: SCRIPT runs as __main__ with its own arguments.

Everything after SCRIPT goes to the script untouched (its own options included). The
script's exit code is passed through (1 if it raised, 130 on Ctrl-C); the run file is
written in every case.

Examples:

\b
  xprof run -o run.json train.py --epochs 1
"""


@app.command(
    "run",
    cls=Command,
    help=_RUN_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                      "allow_interspersed_args": False},
)
def run_command(
    ctx: typer.Context,
    script: Annotated[str, typer.Argument(metavar="SCRIPT [ARGS]...", show_default=False,
                                          help="The Python script to run, and its own arguments.")],
    output: Annotated[str, typer.Option("-o", "--output", metavar="FILE", help="Run file to write.")] = "run.json",
    name: Annotated[str | None, typer.Option("--name", metavar="NAME", help="Name shown in reports "
                                             "(default: the script's name).")] = None,
    no_debug: Annotated[bool, typer.Option("--no-debug", help="Do not capture torch_xla's "
                                           "PT_XLA_DEBUG_LEVEL=2 compile/execute analysis.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live notices while the script "
                                        "runs and no summary at the end (same as XPROF_LIVE=0).")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show what changed in each new graph and at "
                                          "which line, from the first step (torch_xla's IR frames: ~2 us a "
                                          "traced op, a hash a step, a few ms per new graph).")] = False,
) -> None:
    if not os.path.isfile(script):
        fail(f"{script}: no such script" if not os.path.exists(script) else f"{script}: not a file")
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        fail(f"cannot write {output}: no such directory {out_dir}")
    checked_output(output, [script])
    from xprof.recorder.runner import run_script

    result = run_script(script, list(ctx.args), output, name=name, debug=not no_debug,
                        live=False if quiet else None, explain=True if explain else None)
    if result.lost_at is not None:
        err_console.print(f"xprof: the run file {result.path} was not written: it was removed during the run "
                          f"(at step {result.lost_at})", markup=False)
        raise typer.Exit(result.exit_code)
    if result.live:
        _exit_summary(result.path)
    extra = f", {plural(result.debug_records, 'torch_xla debug record')}" if result.debug_records else ""
    err_console.print(f"xprof: wrote {result.path} ({result.status}{extra})", markup=False)
    raise typer.Exit(result.exit_code)


def _exit_summary(path: str) -> None:
    """The exit summary from the analysis of the file just written, so it says what
    `xprof summary` and the report will say, then the file's digest. Never fails the command."""
    try:
        from xprof.analysis import analyze
        from xprof.report.prose import exit_lines
        from xprof.runfile import load_run

        analysis = analyze(load_run(path))
        for line in exit_lines(analysis, path):
            err_console.print(line, markup=False)
    except Exception as exc:  # the run itself succeeded: say why there is no summary
        err_console.print(f"xprof: no summary ({type(exc).__name__}: {exc})", markup=False)
        return
    from xprof.cli.commands_digest import digest_quietly

    digest_quietly(path, analysis)


@app.command("export", cls=Command)
def export_command(
    run_path: Annotated[str, typer.Argument(metavar="RUN", help="Run file to export.")],
    output: Annotated[str | None, typer.Option("-o", "--output", metavar="FILE", help="File to write "
                                               "(default: RUN with .trace.json).")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                     help="Output format: chrome-trace.")] = "chrome-trace",
) -> None:
    """Export a run as a Chrome trace for Perfetto.

    Trace Event Format: it opens in https://ui.perfetto.dev and chrome://tracing.

    Examples:

    \b
      xprof export run.json --format chrome-trace -o run.trace.json
    """
    reads_only()
    if fmt != "chrome-trace":
        fail(f"unknown format {fmt!r} (known: chrome-trace)")
    out = output or os.path.splitext(run_path)[0] + ".trace.json"
    target = checked_output(out, [run_path])
    if not os.path.isdir(os.path.dirname(target)):
        fail(f"cannot write {out}: no such directory {os.path.dirname(target)}")
    run = load_records_or_fail(run_path)
    from xprof.report.page import write_atomic
    from xprof.report.trace import chrome_trace

    trace = chrome_trace(run)
    with output_errors(out):
        write_atomic(target, json.dumps(trace, separators=(",", ":")))
    n = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    err_console.print(f"xprof: wrote {out} ({n} events)", markup=False)


@app.command("ranks", cls=Command)
def ranks_command(
    paths: Annotated[list[str], typer.Argument(metavar="PATH...", help="Run files, or folders "
                                               "holding run.rankN.json files.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Line up the ranks of a multi-process run and name the stragglers.

    Examples:

    \b
      xprof ranks runs/
      xprof ranks run.rank0.json run.rank1.json
    """
    reads_only()
    from xprof.cli.commands_report import read_pod
    from xprof.cli.progress import Progress, wanted
    from xprof.runfile import expand_run_paths

    try:
        files = expand_run_paths(paths)
    except ValueError as exc:
        fail(str(exc))
    with Progress(wanted(machine_output=as_json)) as bar:
        _, view = read_pod(files, bar)
    if as_json:
        write_stdout(json.dumps(finite_json(view.to_json()), indent=2) + "\n")
        return
    from xprof.report.terminal import render_ranks

    render_ranks(view, console, details_below=False)


__all__ = ["export_command", "ranks_command", "run_command"]
