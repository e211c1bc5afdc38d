"""``xprof digest``: write the digest of run files recorded before (docs/run-format.md,
"Digests"), so that a pod's view reads one small file per rank instead of its run file."""

from __future__ import annotations

from typing import Annotated

import typer

from xprof.cli.app import EXIT_BAD_INPUT, Command, app, console, err_console, expand_or_fail, reads_only
from xprof.cli.progress import Progress, wanted


@app.command(cls=Command)
def digest(
    runs: Annotated[list[str], typer.Argument(
        metavar="RUN...", help="Run files, or folders of rank files, to write the digest of.", show_default=False)],
) -> None:
    """Write each run file's digest beside it (RUN.digest.parquet).

    watch() writes the digest of its run file when it ends; this command makes them for
    files recorded before, or by a process that was killed. A digest already up to date
    is kept. Prints the path of each digest; a file that cannot be digested is named on
    stderr (exit 2, after the others).

    Examples:

    \b
      xprof digest runs/
      xprof summary runs/     # reads the digests
    """
    reads_only()
    files = expand_or_fail(runs)
    failed = 0
    with Progress(wanted(machine_output=False)) as bar:
        bar.phase("writing digests", total=len(files))
        for k, path in enumerate(files):
            line = _digest_one(path)
            if line.startswith("xprof: error: "):
                failed += 1
                err_console.print(line, markup=False)
            else:
                console.print(line, markup=False, highlight=False, soft_wrap=True)
            bar.update(k + 1, len(files))
    if failed:
        raise typer.Exit(EXIT_BAD_INPUT)


def _digest_one(path: str) -> str:
    """Write ``path``'s digest unless it is up to date: its path, or one line ``xprof: error: ...``."""
    from xprof.analysis.digest import DigestError, digest_file, digest_path, digest_state
    from xprof.runfile import RunFileError

    state, why = digest_state(path)
    if state == "fresh":
        return digest_path(path)
    if state == "newer":
        return f"xprof: error: {why}; upgrade xprof (the digest is left as it is)"
    try:
        return digest_file(path)
    except (RunFileError, DigestError) as exc:
        return f"xprof: error: {exc}"


def digest_quietly(path: str, analysis: object | None = None) -> None:
    """The digest of ``path`` at the end of a run (``analysis``: already made): never fails
    the command, says on stderr why there is none."""
    from xprof.analysis.digest import DigestError, digest_file, write_digest
    from xprof.runfile import RunFileError

    try:
        if analysis is None:
            digest_file(path)
        else:
            write_digest(analysis, path)  # type: ignore[arg-type]
    except (RunFileError, DigestError) as exc:
        err_console.print(f"xprof: no digest ({exc})", markup=False)
    except Exception as exc:  # the run itself is fine: say why there is no digest
        err_console.print(f"xprof: no digest ({type(exc).__name__}: {exc})", markup=False)
