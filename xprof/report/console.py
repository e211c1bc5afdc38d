"""The terminal every command prints to: run-file strings can never drive it.

:class:`SafeConsole` is the one place every terminal renderer goes through (the summary,
compare, ranks, the CLI's own lines). Renderers build their text with :class:`Text`,
which shows control characters as visible escapes before the text is laid out, so
widths come out right; the console checks every segment again before it is written, so
a string that reached a table cell or a markup string some other way cannot write a raw
escape sequence either (rich's own colours are added after that check).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from rich import box
from rich import text as rich_text
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RichCast
from rich.segment import Segment

from xprof.untrusted import has_active, visible

NARROW_TABLE: dict[str, Any] = {"box": box.SIMPLE_HEAD, "show_edge": False, "padding": (0, 0)}
"""``Table(**NARROW_TABLE)``: no side borders, no padding, a space between columns, so a
table fits 80 columns (a pipe, a CI log) where a boxed one is cropped."""


class Text(rich_text.Text):
    """``rich.text.Text`` whose content (at construction and on append) is :func:`visible`."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(visible(text), *args, **kwargs)

    def append(self, text: str | rich_text.Text, style: Any = None) -> Text:
        if isinstance(text, str):
            text = visible(text)
        super().append(text, style)
        return self


def stdout_closed() -> None:
    """The reader of stdout went away (``xprof summary run.json | head -1``): what is left goes
    nowhere and the command carries on to its own exit code (0, or 1 for a crossed threshold),
    instead of the exit code 1 rich would give or a traceback at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def write_stdout(text: str) -> None:
    """Write and flush ``text`` to stdout; a closed pipe is :func:`stdout_closed`."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


class SafeConsole(Console):
    """A rich console that writes no raw control character from any text it renders, and
    takes a closed stdout as the end of what anyone reads (:func:`stdout_closed`)."""

    def on_broken_pipe(self) -> None:
        if self.file is sys.stdout or self.file is sys.__stdout__:
            stdout_closed()
        else:
            super().on_broken_pipe()

    def render(self, renderable: ConsoleRenderable | RichCast | str,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and has_active(segment.text):
                yield Segment(visible(segment.text), segment.style)
            else:
                yield segment
