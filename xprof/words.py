"""Words every layer puts in its sentences (the analysis's notes, the renderers, the CLI):
one rule for a count and its noun, so no output says "1 compile(s)"."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 compile``, ``2 compiles``; ``many`` for a plural that is not ``word + "s"``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
