"""``xprof compare``: a thin shell over :func:`xprof.comparison.compare` and its gate.

Parses arguments, loads the runs (bad files -> one line, exit 2), renders the result
(terminal table, ``--json``, ``--markdown``, ``-o file.html``), then applies the
thresholds: exit 1 when one is crossed, with one line per crossed threshold on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from xprof.cli.app import (
    EXIT_REGRESSION,
    Command,
    app,
    console,
    err_console,
    fail,
    load_or_fail,
    output_errors,
    reads_only,
)
from xprof.cli.outputs import checked_output
from xprof.report.console import Text, write_stdout
from xprof.untrusted import md_code

if TYPE_CHECKING:
    from xprof.comparison import Gate, Violation
    from xprof.comparison.model import CompareResult
    from xprof.runcolumns import ColumnRun

_EXAMPLE = """
Compare a run against a baseline, and gate CI on it:

\b
  xprof compare base.json new.json
  xprof compare base.json new.json --max-new-recompiles 0 \\
      --max-compile-seconds-increase 10% --markdown >> "$GITHUB_STEP_SUMMARY"
  xprof compare base.json new.json -o reports/compare.html
  xprof compare day1.json day2.json day3.json    # a trend against the first

Exit codes: 0 within every threshold, 1 a threshold was crossed, 2 bad input.
"""


@app.command(cls=Command, epilog=_EXAMPLE)
def compare(
    runs: Annotated[list[str], typer.Argument(metavar="BASE NEW [MORE...]", help="Run files; each later one is "
                                                   "compared against the first.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the versioned JSON object "
                                                         "(docs/compare.md) instead of the table.")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print GitHub Markdown (a CI job summary "
                                                              "or PR comment) instead of the table.")] = False,
    output: Annotated[str | None, typer.Option("-o", "--output", metavar="FILE", help="Also write the comparison to "
                                                  "this file: .html (self-contained), .md or .json.",
                                                  show_default=False)] = None,
    max_new_recompiles: Annotated[str | None, typer.Option(
        "--max-new-recompiles", metavar="N",
        help="Fail (exit 1) when recompiles after warm-up rose by more than N.")] = None,
    max_compile_seconds_increase: Annotated[str | None, typer.Option(
        "--max-compile-seconds-increase", metavar="LIMIT",
        help="Fail when compile time rose by more than LIMIT: a percent of the base (10%) "
             "or seconds (2s).")] = None,
    max_step_time_increase: Annotated[str | None, typer.Option(
        "--max-step-time-increase", metavar="LIMIT",
        help="Fail when the execute time of steady-state steps (the device's part), its 10th "
             "percentile (which load on the machine does not move), rose by more than LIMIT (5%, "
             "or 3ms): the whole 95% interval of the change above it.")] = None,
    max_new_syncs: Annotated[str | None, typer.Option(
        "--max-new-syncs", metavar="N",
        help="Fail when there are more than N implicit host syncs beyond what the base makes "
             "in as many steps.")] = None,
) -> None:
    """Compare runs side by side, and gate CI on a regression.

    Compiles, compile time, step and execute time, syncs, findings and graphs.

    Counts are exact; times are judged on medians of steady-state steps (the execute time's
    median and 10th percentile on a 95% interval of the change), so two recordings of the same
    loop report no regression.
    """
    reads_only()
    gate = _checked_arguments(runs, as_json, markdown, output, max_new_recompiles, max_compile_seconds_increase,
                              max_step_time_increase, max_new_syncs)
    from xprof.comparison import compare as run_compare
    from xprof.comparison.ranks import is_rank_folder_pair

    if is_rank_folder_pair(runs):
        _compare_ranks(runs, gate, as_json, markdown, output)
        return
    loaded = [_trusted(load_or_fail(path)) for path in runs]
    result = run_compare(*loaded)
    violations = [v for pair in result.pairs for v in gate.check(pair)]
    gated = gate.active

    if as_json:
        text = json.dumps(result.to_json(violations, gate.describe() if gated else None), indent=2)
        write_stdout(text + "\n")
    elif markdown:
        from xprof.report.compare_text import render_markdown

        write_stdout(render_markdown(result, violations, gated) + "\n")
    else:
        from xprof.report.compare_text import print_terminal

        print_terminal(console, result, violations, gated)

    if output is not None:
        _write(output, result, violations, gated, gate.describe() if gated else None)
    for pair in result.pairs:
        for line in gate.unjudged(pair):
            err_console.print(f"xprof: gate: {line}", markup=False)
    if violations:
        for v in violations:
            err_console.print(f"xprof: regression: {v.threshold}: {v.message}", markup=False)
        raise typer.Exit(EXIT_REGRESSION)


def _checked_arguments(runs: list[str], as_json: bool, markdown: bool, output: str | None,
                       max_new_recompiles: str | None, max_compile_seconds_increase: str | None,
                       max_step_time_increase: str | None, max_new_syncs: str | None) -> Gate:
    """The gate the options ask for; one line and exit 2 for arguments that do not fit."""
    from xprof.comparison import Gate, ThresholdError
    from xprof.runfile import expand_run_paths

    if len(runs) < 2:
        fail("compare needs at least two run files: BASE NEW [MORE...]")
    if as_json and markdown:
        fail("--json and --markdown both print to stdout; choose one (use -o for a file)")
    if output is not None and Path(output).suffix.lower() not in (".html", ".htm", ".md", ".json"):
        fail(f"-o {output}: give a file ending in .html, .md or .json")
    try:
        gate = Gate.parse(max_new_recompiles=max_new_recompiles,
                          max_compile_seconds_increase=max_compile_seconds_increase,
                          max_step_time_increase=max_step_time_increase, max_new_syncs=max_new_syncs)
    except ThresholdError as exc:
        fail(str(exc))
    if output is not None:
        try:
            checked_output(output, expand_run_paths(runs))
        except ValueError as exc:
            fail(str(exc))
    return gate


def _compare_ranks(runs: list[str], gate: Gate, as_json: bool, markdown: bool, output: str | None) -> None:
    """Rank N of the base folder against rank N of the new one; the gate holds for every rank.

    A rank with no file, or an unreadable one, on either side is named and fails the
    comparison (exit 1): a host that wrote nothing is a regression of the pod."""
    from xprof.comparison import compare as run_compare
    from xprof.comparison.ranks import RankProblem, compare_ranks_json, pair_rank_folders, rank_output_path
    from xprof.report.compare_text import print_terminal, render_markdown
    from xprof.runcolumns import load_columns
    from xprof.runfile import RunFileError

    try:
        pairing = pair_rank_folders(runs[0], runs[1])
    except ValueError as exc:
        fail(str(exc))
    problems = list(pairing.problems)
    thresholds = gate.describe() if gate.active else None
    results: list[tuple[int, CompareResult, list[Violation]]] = []
    for pair in pairing.pairs:
        loaded = []
        for side, path in (("base", pair.base), ("new", pair.new)):
            try:
                loaded.append(load_columns(path))
            except RunFileError as exc:
                problems.append(RankProblem(pair.rank, "unreadable", side, f"rank {pair.rank}: {exc}", path))
        if len(loaded) < 2:
            continue
        for run in loaded:
            _trusted(run)
        result = run_compare(*loaded)
        violations = [v for p in result.pairs for v in gate.check(p)]
        results.append((pair.rank, result, violations))
        if markdown:
            write_stdout(f"### rank {pair.rank}\n\n" + render_markdown(result, violations, gate.active) + "\n")
        elif not as_json:
            console.rule(f"rank {pair.rank}")
            print_terminal(console, result, violations, gate.active)
        if output is not None:
            _write(rank_output_path(output, pair.rank), result, violations, gate.active, thresholds)
    problems.sort(key=lambda p: p.rank)
    if as_json:
        write_stdout(json.dumps(compare_ranks_json(results, thresholds, problems), indent=2) + "\n")
    elif markdown and problems:
        write_stdout("### ranks not compared\n\n" + "".join(f"- {md_code(p.message)}\n" for p in problems) + "\n")
    elif problems:
        console.rule("ranks not compared")
        for p in problems:
            console.print(Text(f"{p.kind}: {p.message}", style="bold red"))
    for rank, result, _ in results:
        for line in (line for p in result.pairs for line in gate.unjudged(p)):
            err_console.print(f"xprof: gate: rank {rank}: {line}", markup=False)
    failed = [(rank, v) for rank, _, violations in results for v in violations]
    for p in problems:
        err_console.print(f"xprof: regression: {p.message}", markup=False)
    if failed:
        for rank, v in failed:
            err_console.print(f"xprof: regression: rank {rank}: {v.threshold}: {v.message}", markup=False)
    if failed or problems:
        raise typer.Exit(EXIT_REGRESSION)


def _write(path: str, result: CompareResult, violations: list[Violation], gated: bool,
           thresholds: dict[str, str] | None) -> None:
    suffix = Path(path).suffix.lower()
    target = checked_output(path, _inputs(result))
    with output_errors(path):
        if suffix in (".html", ".htm"):
            from xprof.report.compare_html import write_compare

            write_compare(result, target, violations, gated)
        else:
            from xprof.report.compare_text import render_markdown
            from xprof.report.page import write_atomic

            text = (json.dumps(result.to_json(violations, thresholds), indent=2) if suffix == ".json"
                    else render_markdown(result, violations, gated))
            write_atomic(target, text + "\n")
    err_console.print(f"xprof: wrote {path}", markup=False)


def _inputs(result: CompareResult) -> list[str]:
    """The run files a comparison read (a rank folder's output path is checked per rank)."""
    return [r.path for r in result.runs]


def _trusted(read: ColumnRun) -> ColumnRun:
    """``read``, or one line and exit 2 when it holds impossible records: a gate must never
    pass on a file whose compile times were negative (the records are skipped, and what is
    left would be judged)."""
    run = read.run
    if run.impossible:
        fail(f"{run.path}: {run.impossible} record(s) with impossible values (negative, NaN or infinite "
             "numbers, or a step index repeated or out of order): compare does not judge a file it cannot trust")
    return read
