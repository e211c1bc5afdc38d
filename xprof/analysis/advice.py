"""What to change, per finding kind: each cause's advice is its unit's
(:data:`xprof.diagnosis.registry.UNITS`); this is the table the finding builders read."""

from __future__ import annotations

from xprof.diagnosis.registry import advice_table

ADVICE: dict[str, str] = advice_table()
"""Finding kind -> what to change (plain text; the renderers format it)."""


READ_KINDS = frozenset({"item", "print", "format", "repr", "tensor_condition", "scalar", "tolist", "numpy",
                        "to_cpu", "log"})
"""Plain reads of a tensor's value (what the user's own line does): their advice ends with
what the run says about how often they read (see :func:`read_tail`)."""


def read_tail(pattern: str | None) -> str:
    """The end of a plain read's advice: read less often, unless it already does."""
    if pattern and pattern != "every step":
        return f" It already reads {pattern}."
    return " Or read it only every N steps."
