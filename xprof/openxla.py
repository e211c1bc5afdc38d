"""OpenXLA's XProf, the PyPI distribution ``xprof`` (its TensorBoard profile plugin), installs
the same top-level module and the same ``xprof`` command as this one (``xprof-lazy``). In one
environment they overwrite each other's files: whichever was installed last owns
``xprof/__init__.py`` and the command, and uninstalling either removes files the other needs.

:func:`check` finds the other distribution by a file only it installs into the shared
``xprof/`` folder (one ``stat``, so every import can afford it) and says once, in one line
on stderr, what is wrong and how to fix it. It runs where this package's code runs: ``import
xprof`` when our ``__init__`` won, our subpackages, ``python -m xprof`` and the command.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = "profile_plugin_loader.py"
"""In OpenXLA's wheel (its TensorBoard entry point), never in ours."""

FIX = ("pip uninstall -y xprof xprof-lazy, then pip install xprof-lazy here and OpenXLA's "
       "xprof in a venv of its own (python -m venv ~/.venvs/openxla-xprof && "
       "~/.venvs/openxla-xprof/bin/pip install xprof)")

_said = False


def other_version(folder: Path = HERE) -> str | None:
    """The version of OpenXLA's xprof sharing ``folder``, ``"?"`` if unreadable; None without it."""
    if not (folder / MARKER).exists():
        return None
    try:
        found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", (folder / "version.py").read_text("utf-8"))
    except OSError:
        found = None
    return found.group(1) if found else "?"


def message(version: str, ours_won: bool) -> str:
    """One line: what is broken, and the fix."""
    what = ("the `xprof` command is this profiler's, not OpenXLA's" if ours_won
            else "`import xprof` and the `xprof` command are OpenXLA's, not this profiler's "
                 "(`python -m xprof` and `xprof-lazy` still run it)")
    return (f"xprof: OpenXLA's xprof {version} is installed in this environment too: both packages "
            f"install the module and command `xprof`, so {what}, and uninstalling either breaks "
            f"the other. Fix: {FIX}.")


def check(folder: Path = HERE) -> str | None:
    """Say :func:`message` on stderr once per process when OpenXLA's xprof shares ``folder``."""
    global _said
    version = other_version(folder)
    if version is None or _said:
        return None
    _said = True
    package = sys.modules.get("xprof")
    text = message(version, ours_won=package is None or hasattr(package, "__version__"))
    try:
        sys.stderr.write(text + "\n")
    except (OSError, ValueError, AttributeError):  # no stderr to say it on
        pass
    return text
