"""A progress bar on stderr while a big run or a pod is read, analysed and rendered.

Shown only where a person is watching: stderr is a terminal, the output is not
``--json`` or ``--markdown``, and the work has already taken about a second (a small
run never flickers a bar). It is transient: gone when the command prints its result.
``XPROF_PROGRESS=0`` turns it off, ``XPROF_PROGRESS=1`` shows it on any stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import Any

DELAY_S = 1.0
"""How long the work runs before the bar appears."""


def _delay() -> float:
    """:data:`DELAY_S`, or ``XPROF_PROGRESS_DELAY`` seconds (tests show the bar at once)."""
    try:
        return max(0.0, float(os.environ.get("XPROF_PROGRESS_DELAY", DELAY_S)))
    except ValueError:
        return DELAY_S


def wanted(machine_output: bool) -> bool:
    """Whether a bar may be shown: stderr is a terminal and stdout is not for a program."""
    forced = os.environ.get("XPROF_PROGRESS")
    if forced == "0" or machine_output:
        return False
    if forced == "1":
        return True
    return sys.stderr.isatty()


class Progress:
    """``with Progress(on, "reading"):`` then :meth:`phase` (a new task) and :meth:`update`
    (done of total). Nothing is drawn before :data:`DELAY_S`; all of it is a no-op when off.
    """

    def __init__(self, enabled: bool, description: str = "", delay: float | None = None,
                 console: Any = None) -> None:
        self.enabled = enabled
        self.delay = _delay() if delay is None else delay
        self._console = console
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        self._state: tuple[str, int | None, int] = (description, None, 0)
        self._timer: threading.Timer | None = None
        self._closed = False

    def __enter__(self) -> Progress:
        if self.enabled and self.delay <= 0:
            self._show()
        elif self.enabled:
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self._bar is not None:
                self._bar.stop()
                self._bar = None

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        with self._lock:
            if self._closed or not self.enabled:
                return
            forced = os.environ.get("XPROF_PROGRESS") == "1"
            console = self._console or Console(stderr=True, force_terminal=True if forced else None)
            self._bar = Bar(SpinnerColumn(), TextColumn("[progress.description]{task.description}"),
                            BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                            transient=True)
            self._bar.start()
            self._apply()

    def _apply(self) -> None:
        description, total, done = self._state
        if self._task is None:
            self._task = self._bar.add_task(description, total=total, completed=done)
        else:
            self._bar.update(self._task, description=description, total=total, completed=done)

    def phase(self, description: str, total: int | None = None) -> None:
        """Start a new stage (``total`` None: a spinner without a count)."""
        with self._lock:
            self._state = (description, total, 0)
            if self._bar is not None:
                self._apply()

    def update(self, done: int, total: int | None = None) -> None:
        with self._lock:
            description, old_total, _ = self._state
            self._state = (description, old_total if total is None else total, done)
            if self._bar is not None:
                self._apply()
