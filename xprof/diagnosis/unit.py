"""A cause as one unit: everything xprof says of it, beside the rules that decide it.

Each rule module of :mod:`xprof.diagnosis.rules` declares the unit of the cause its rules
give (:class:`CauseUnit`), and :data:`xprof.diagnosis.registry.UNITS` lists them, one line
each. The report's label and colour, the live notice's clause, the findings' advice, the
"fix safety" and the cause's section of docs/causes.md (generated: ``python -m
xprof.diagnosis.docs``) all come from here; nothing else spells a cause's words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import StepFacts, Walk

Clause = Callable[[Cause, StepFacts, Walk], str]
"""What a live notice says of a barrier compile with this cause (after "step N recompiled: ")."""


class Words(NamedTuple):
    """A finding as a rule words it: its kind, title, evidence and advice."""

    kind: str
    title: str
    evidence: list[str]
    advice: str


FindingOf = Callable[[Cause, int, float], Words]
"""A rule's own finding, from its first compile's cause, its compiles and their seconds:
a rule that makes a finding no cause's builder makes (``analysis.findings``) says it itself."""


@dataclass(frozen=True)
class CauseUnit:
    name: CauseName
    label: str
    """How the report names it (a legend, a finding's badge)."""
    colour: str
    """Its colour in the report's plots and badges."""
    means: str
    """What it means, in the words of docs/causes.md."""
    fix: str
    """The typical fix, with example values."""
    fix_safety: str
    """Does applying the fix change what the model computes? Said before the user applies it."""
    advice: Mapping[str, str] = field(default_factory=dict)
    """Finding kind -> what to change (plain text; the renderers format it)."""
    notice: Clause | None = None
    """The live notice's clause for a barrier compile it caused; None: the live side says
    nothing of it there (information, or a notice of its own elsewhere)."""
    explained: bool = False
    """Its notice adds ``--explain``'s line when the step's new graph was compared."""
    finding_only: bool = False
    """A finding of the whole run, never a compile's cause (eager mode, no barrier, a split step)."""
