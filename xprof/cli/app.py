"""The typer application, exit codes and error handling shared by every command.

Commands live in small modules beside this one (``commands_*.py``); each parses its
arguments, calls library functions and maps failures to an exit code with one line on
stderr. Nothing here imports torch, torch_xla or pandas at import time.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand

from xprof._version import __version__
from xprof.report.console import SafeConsole
from xprof.runfile import Run, RunFileError, load_run

if TYPE_CHECKING:
    from xprof.runcolumns import ColumnRun

EXIT_OK = 0
EXIT_REGRESSION = 1
"""``xprof compare``: a threshold was crossed. ``xprof run``: the script's own code wins."""
EXIT_BAD_INPUT = 2
"""Missing, truncated, foreign or newer-version run file; bad arguments; unwritable output."""
EXIT_INTERNAL = 70
"""A bug in xprof itself (EX_SOFTWARE): one line, and ``XPROF_DEBUG=1`` for the traceback."""
EXIT_INTERRUPTED = 130

console = SafeConsole()
err_console = SafeConsole(stderr=True, highlight=False, soft_wrap=True)
"""Every line the CLI prints goes through these: run-file strings are shown, never obeyed."""

app = typer.Typer(
    name="xprof",
    help="Find what makes a PyTorch/XLA training loop recompile and sync, and what to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Command(TyperCommand):
    """Help as plain text that reads the same in a terminal, a pipe and a CI log: arguments by
    their metavar (typer would write ``{RUN}...`` and ``<list[str]>``), options as click lays
    them out, wrapped at the terminal's width or 80 columns."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [self.options_metavar or "", *(p.metavar or p.name.upper() for p in self._arguments(ctx))]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args = [(p.metavar or p.name.upper(), p.help) for p in self._arguments(ctx) if p.help]
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        opts = [rec for p in self.get_params(ctx) if p.param_type_name == "option" and (rec := p.get_help_record(ctx))]
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)

    def _arguments(self, ctx: Any) -> list[Any]:
        return [p for p in self.get_params(ctx) if p.param_type_name == "argument"]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``xprof: error: MESSAGE`` on stderr and exit with ``code``."""
    err_console.print(f"xprof: error: {message}", markup=False)
    raise typer.Exit(code)


def load_or_fail(path: str) -> ColumnRun:
    """The run at ``path``, its bulk records as columns; one line and exit 2 on a bad file."""
    from xprof.runcolumns import load_columns

    try:
        return load_columns(path)
    except RunFileError as exc:
        fail(str(exc))


def expand_or_fail(paths: list[str]) -> list[str]:
    """The run files named (a folder stands for its run files); bad paths exit 2."""
    from xprof.runfile import expand_run_paths

    try:
        return expand_run_paths(paths)
    except ValueError as exc:
        fail(str(exc))


def load_records_or_fail(path: str) -> Run:
    """The run at ``path`` as typed records, for the renderers that walk them one by one;
    one line and exit 2 on a bad file."""
    try:
        return load_run(path)
    except RunFileError as exc:
        fail(str(exc))


@contextmanager
def output_errors(path: str) -> Iterator[None]:
    """Turn a failure to write ``path`` into one line and exit code 2."""
    try:
        yield
    except (PermissionError, IsADirectoryError, NotADirectoryError, FileNotFoundError) as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def _version(value: bool) -> None:
    if value:
        console.print(f"xprof {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Find what makes a PyTorch/XLA training loop recompile and sync, and what to change."""


def run_app(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; unexpected errors become one line and code 70."""
    import os

    try:
        app(args=argv, prog_name="xprof")
    except SystemExit as exc:
        code = exc.code
        if code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            return EXIT_OK  # click's answer to a closed pipe (`xprof --help | head -1`)
        return code if isinstance(code, int) else (0 if code is None else EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        err_console.print("xprof: interrupted", markup=False)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("XPROF_DEBUG"):
            raise
        err_console.print(
            f"xprof: internal error: {type(exc).__name__}: {exc} (set XPROF_DEBUG=1 for the traceback)",
            markup=False,
        )
        return EXIT_INTERNAL
    return EXIT_OK


_READ_ONLY = False


def reads_only() -> None:
    """Called by a command that only reads run files and writes its output (summary, report,
    ranks, compare, export): when it has returned, :func:`main` ends the process without the
    interpreter's teardown, which frees every object pandas and DuckDB made one by one (about
    0.15 s, a tenth of a pod's summary). Never for a command that runs training code, whose
    exit handlers (the recorder's, torch_xla's, the user's) must run."""
    global _READ_ONLY
    _READ_ONLY = True


def main() -> None:
    from xprof.openxla import check

    check()  # `python -m xprof` still runs when OpenXLA's xprof took `import xprof` and the command
    # Import the command modules so they register on ``app``.
    from xprof.cli import commands  # noqa: F401

    code = run_app()
    if _READ_ONLY:
        _end_now(code)
    sys.exit(code)


def _end_now(code: int) -> NoReturn:
    """Flush what was written, close DuckDB (it removes any spill files), and end the process."""
    import os

    columns = sys.modules.get("xprof.runcolumns")
    if columns is not None:
        columns.close()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # (a closed pipe: what was left cannot be written anyway)
            pass
    os._exit(code)


def finite_json(value: Any) -> Any:
    """JSON without NaN or Infinity (which strict parsers reject): they become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            return finite_json(value.item())
        except (TypeError, ValueError):
            return str(value)
    return value
