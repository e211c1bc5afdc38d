"""The rules' reference, made from the registry: ``python -m xprof.diagnosis.reference``
prints the Markdown that docs/diagnosis.md holds between its ``rules`` markers (a test keeps
the two the same, so the docs follow the rules)."""

from __future__ import annotations

from xprof.diagnosis.registry import AT_BARRIER, MID_STEP, OP, Rule
from xprof.diagnosis.rules import split

BEGIN = "<!-- rules:begin (made by python -m xprof.diagnosis.reference) -->"
END = "<!-- rules:end -->"

_PLACES = (
    ("A compile at a barrier", AT_BARRIER),
    ("A compile between barriers (inside a host read, or outside any)", MID_STEP),
    ("An op compiled on its own (eager mode)", OP),
)


def _row(k: int, rule: Rule) -> str:
    whole = "whole run" + (" (live: quiet where it may apply)" if rule.maybe else "") if rule.whole_run else ""
    doc = rule.doc.replace("|", "\\|")
    return f"| {k} | `{rule.name}` | {whole} | {doc} |"


def markdown() -> str:
    out = [BEGIN, ""]
    for title, rules in _PLACES:
        out += [f"**{title}**: warm-up first (every compile of training steps 0 and 1), then:", "",
                "| # | rule | needs | what it reads and concludes |", "|---|---|---|---|"]
        out += [_row(k, rule) for k, rule in enumerate(rules, 1)]
        out.append("")
    out += ["**A run whose steps are cut** (a rule over the steps, not a compile's cause; whole run):", "",
            " ".join((split.__doc__ or "").split()), "", END]
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
