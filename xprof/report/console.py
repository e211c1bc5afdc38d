"""The terminal every command prints to: run-file strings can never drive it.

:class:`SafeConsole` is the one place every terminal renderer goes through (the summary,
compare, ranks, the CLI's own lines). Renderers build their text with :class:`Text`,
which shows control characters as visible escapes before the text is laid out, so
widths come out right; the console checks every segment again before it is written, so
a string that reached a table cell or a markup string some other way cannot write a raw
escape sequence either (rich's own colours are added after that check).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import text as rich_text
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RichCast
from rich.segment import Segment

from xprof.untrusted import has_active, visible


class Text(rich_text.Text):
    """``rich.text.Text`` whose content (at construction and on append) is :func:`visible`."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(visible(text), *args, **kwargs)

    def append(self, text: str | rich_text.Text, style: Any = None) -> Text:
        if isinstance(text, str):
            text = visible(text)
        super().append(text, style)
        return self


class SafeConsole(Console):
    """A rich console that writes no raw control character from any text it renders."""

    def render(self, renderable: ConsoleRenderable | RichCast | str,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and has_active(segment.text):
                yield Segment(visible(segment.text), segment.style)
            else:
                yield segment
