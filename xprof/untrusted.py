"""Strings from a run file are untrusted: how they are made safe to print.

Run files travel (CI artifacts of pull requests, files attached to bug reports), and
every string in them was written by whoever produced the file. :func:`visible` turns the
characters a terminal would act on into visible escapes; :func:`md_code` puts a string
where Markdown cannot read it as markup. The HTML pages escape through jinja's
autoescape, and JSON through the encoder. Imports nothing: the recorder uses it too.
"""

from __future__ import annotations

import re


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}"


_ACTIVE = (
    [chr(n) for n in range(0x20) if chr(n) not in "\t\n"]  # C0: ESC, BEL, CR, BS, ...
    + ["\x7f"] + [chr(n) for n in range(0x80, 0xA0)]  # DEL and C1 (0x9b is a one-byte CSI)
    + ["\u2028", "\u2029"]  # line and paragraph separators
    + [chr(n) for n in range(0x202A, 0x202F)] + [chr(n) for n in range(0x2066, 0x206A)]  # bidi overrides
    + ["\u200e", "\u200f", "\u061c", "\ufeff"]  # direction marks, byte-order mark
    + [chr(n) for n in range(0xD800, 0xE000)]  # lone surrogates: a byte that was not UTF-8 (\udcff)
)
_TERMINAL = str.maketrans({c: _escape(c) for c in _ACTIVE})
_ONE_LINE = str.maketrans({c: _escape(c) for c in [*_ACTIVE, "\t", "\n"]})
_ANY_ACTIVE = re.compile("[" + re.escape("".join(_ACTIVE)) + "]")


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character a terminal acts on shown as an escape (``\\x1b``).

    C0 controls except tab and newline, DEL, C1 controls, line separators, the bidi
    controls that reorder what is shown, and lone surrogates (a file name that was not
    UTF-8, kept as ``\\udce9``: no encoder can write them); ``one_line`` escapes tab and
    newline too.
    Everything else (any printable text in any script) is left as it is.
    """
    return text.translate(_ONE_LINE if one_line else _TERMINAL)


def has_active(text: str) -> bool:
    """True when :func:`visible` would change ``text`` (tab and newline aside)."""
    return _ANY_ACTIVE.search(text) is not None


_BACKTICKS = re.compile("`+")


def md_code(text: str, *, in_table: bool = False) -> str:
    """``text`` as a Markdown code span: mentions, links, images, emphasis and HTML in it stay
    text. The fence is one backtick longer than the longest run inside; control
    characters and newlines are shown as escapes; ``in_table`` escapes ``|`` so a table
    cell is not split (GitHub removes that backslash before reading the span)."""
    s = visible(text, one_line=True)
    if in_table:
        s = s.replace("|", "\\|")
    if not s:
        return ""
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(s)), default=0) + 1)
    if s[0] in "` " or s[-1] in "` ":
        s = f" {s} "  # one space each side is stripped again when the span is read
    return f"{fence}{s}{fence}"
