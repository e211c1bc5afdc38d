"""``xprof run script.py``: record an unmodified script, the way ``python -m cProfile`` does.

The script runs in this process as ``__main__`` (``runpy.run_path``), with the
``sys.argv`` and ``sys.path[0]`` it would have under ``python script.py``, inside one
``xprof.watch()``. Because xprof starts before the script imports torch_xla, it can
also turn on torch_xla's own compile/execute analysis (``PT_XLA_DEBUG_LEVEL=2`` into a
temporary ``PT_XLA_DEBUG_FILE``; both are read at the first compile, so only a launcher
can set them for an unmodified script) and append it to the run file afterwards.

Exit codes follow the script: its ``sys.exit`` code, 1 when it raised (its traceback
is printed as Python would print it), 130 on Ctrl-C. The run file is completed in
every one of these cases.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from xprof.runfile import append_records

DEBUG_LEVEL = "2"
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + 15


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's stop, a preemption, ``timeout``) raised in the script's main
    thread, so ``watch()`` closes the run file with an ``end`` record before the process goes."""

    def __str__(self) -> str:
        return "SIGTERM"


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _catch_sigterm() -> Any:
    """Turn SIGTERM into :class:`Terminated` while the script runs, where the script has not
    set a handler of its own; returns what to restore (None when nothing was set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return None


@dataclass
class _Capture:
    """Where torch_xla's debug analysis goes during the run, and whose file it is."""

    path: str
    offset: int
    owned: bool
    """True when xprof made the temporary file (and deletes it)."""
    level: str
    note: str | None = None
    asked: bool = False
    """The user set PT_XLA_DEBUG_LEVEL (and no file): torch_xla would have printed the
    analysis to stderr, so the captured file is kept and its path printed."""


def _start_capture() -> _Capture | None:
    """Point torch_xla's debug analysis at a file, if that can still take effect."""
    user_file = os.environ.get("PT_XLA_DEBUG_FILE")
    level = os.environ.get("PT_XLA_DEBUG_LEVEL") or DEBUG_LEVEL
    note = None
    if "torch_xla" in sys.modules:
        # Already imported (xprof run called from a process that used torch_xla): the
        # settings may already have been read at an earlier compile.
        note = "torch_xla was imported before xprof run set PT_XLA_DEBUG_*; entries may be missing"
    if user_file:
        try:
            offset = os.path.getsize(user_file)
        except OSError:
            offset = 0
        os.environ.setdefault("PT_XLA_DEBUG_LEVEL", level)
        return _Capture(user_file, offset, owned=False, level=level, note=note)
    asked = bool(os.environ.get("PT_XLA_DEBUG_LEVEL"))
    fd, path = tempfile.mkstemp(prefix="xprof-xla-debug-", suffix=".txt")
    os.close(fd)
    os.environ["PT_XLA_DEBUG_FILE"] = path
    os.environ.setdefault("PT_XLA_DEBUG_LEVEL", level)
    return _Capture(path, 0, owned=not asked, level=level, note=note, asked=asked)


def _append_debug(run_path: str, capture: _Capture) -> int:
    """Parse the capture and append ``debug`` records after the run's ``end`` record.

    Returns how many records were written. Never raises: a debug file that cannot be
    read costs the debug records, not the run.
    """
    from xprof.recorder.debuginfo import debug_records, parse_debug_file

    records: list[dict[str, Any]] = []
    meta: dict[str, Any] = {"type": "debug", "kind": "capture", "level": capture.level,
                            "source": "PT_XLA_DEBUG_FILE"}
    try:
        entries = parse_debug_file(capture.path, capture.offset)
        records = debug_records(entries)
        meta["compiles"] = sum(1 for e in entries if e.kind == "compile")
        meta["executions"] = sum(1 for e in entries if e.kind == "execute")
    except OSError as exc:
        meta["error"] = f"cannot read the debug file: {exc.strerror or exc}"
    if capture.note:
        meta["note"] = capture.note
    if not records and "error" not in meta and capture.note is None:
        meta["note"] = ("no entries: torch_xla wrote none (it only writes them in the process "
                        "with local rank 0, and only for compiles and executions)")
    try:
        append_records(run_path, [meta, *records])
    except OSError as exc:
        print(f"xprof: could not append torch_xla debug records to {run_path}: {exc}",
              file=sys.stderr)
        return 0
    finally:
        if capture.owned:
            try:
                os.unlink(capture.path)
            except OSError:
                pass
    return len(records)


def _user_traceback(tb: TracebackType | None, script: str) -> TracebackType | None:
    """The traceback from the script's first frame on: xprof's and runpy's frames are noise."""
    t = tb
    while t is not None and os.path.abspath(t.tb_frame.f_code.co_filename) != script:
        t = t.tb_next
    return t or tb


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


@dataclass
class RunResult:
    exit_code: int
    path: str
    """The run file written (``run.rank0.json`` when torch_xla reported several ranks)."""
    debug_records: int
    status: str
    live: bool = False
    """The live notices were on: the caller prints the exit summary (from the analysis)."""
    lost_at: int | None = None
    """The run file was removed during the run, at this step: it was not written."""


def run_script(script: str, args: list[str], out: str = "run.json", *, name: str | None = None,
               debug: bool = True, live: bool | None = None, explain: bool | None = None) -> RunResult:
    """Run ``script`` as ``__main__`` with ``args`` under ``xprof.watch(out)``.

    The caller checks that ``script`` exists. Restores ``sys.argv``, ``sys.path`` and the
    ``PT_XLA_DEBUG_*`` variables afterwards, so it can be called more than once in a process.
    ``live=False`` turns off the live notices and the exit summary (``xprof run --quiet``);
    ``explain=True`` shows what changed in each new graph from the start (``--explain``).
    """
    from xprof.recorder.watch import watch

    script = os.path.abspath(script)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    saved_env = {k: os.environ.get(k) for k in ("PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_FILE")}
    capture = _start_capture() if debug else None
    sys.argv = [script, *args]
    sys.path[0:1] = [os.path.dirname(script)]
    w = watch(out, name=name or os.path.splitext(os.path.basename(script))[0], live=live, explain=explain)
    w.exit_summary = False  # the CLI prints one from the analysis of the finished file
    code, status = 0, "ok"
    saved_sigterm = _catch_sigterm()
    try:
        with w:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                code = _exit_code(exc)
                if code != 0:
                    raise  # recorded as the run's exception
    except SystemExit:
        status = "error"
    except Terminated:
        code, status = EXIT_TERMINATED, "interrupted"
        print("xprof: terminated (SIGTERM); the run file was closed with what was recorded", file=sys.stderr)
    except KeyboardInterrupt:
        code, status = EXIT_INTERRUPTED, "interrupted"
        print("KeyboardInterrupt", file=sys.stderr)
    except Exception as exc:
        code, status = 1, "error"
        traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__, script))
    finally:
        if saved_sigterm is not None:
            # If the script installed a handler of its own meanwhile, leave it.
            if signal.getsignal(signal.SIGTERM) is _on_sigterm:
                signal.signal(signal.SIGTERM, saved_sigterm)
        sys.argv, sys.path[:] = saved_argv, saved_path
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    n_debug = 0
    lost_at = w.recorder.lost_at if w.recorder is not None else None
    if capture is not None and w.recorder is not None and lost_at is None:
        n_debug = _append_debug(w.path, capture)
    if capture is not None and capture.asked:
        print(f"xprof: torch_xla's debug output (PT_XLA_DEBUG_LEVEL={capture.level}) went to {capture.path}, "
              "where xprof read it (set PT_XLA_DEBUG_FILE to choose the file)", file=sys.stderr)
    elif capture is not None and capture.owned:
        try:
            os.unlink(capture.path)
        except OSError:
            pass
    return RunResult(exit_code=code, path=w.path, debug_records=n_debug, status=status,
                     live=w.notices is not None, lost_at=lost_at)
