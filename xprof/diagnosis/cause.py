"""A cause: what one compile is blamed on, and the finding it joins."""

from __future__ import annotations

from dataclasses import dataclass

from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.patterns import Shape


@dataclass
class Cause:
    cause: str
    key: FindingKey
    """Groups compiles into one finding."""
    input: str | None = None
    dim: int | None = None
    old: Shape | None = None
    new: Shape | None = None
    site: int | None = None
    evidence: str = ""
    sharding: tuple[str, str] | None = None
    """``input_sharding``: the input's sharding (before, now)."""
    earlier: int | None = None
    """``input_sharding``: the step that ran the same shapes sharded the other way."""
    first_step_only: bool = False
    """``input_shape``: these inputs ran before, but only in the one-off first step (two tasks
    taking turns: each one's second step compiles its steady graph)."""
    no_host: str = ""
    """``graph_change`` in a step with no input from the host: ``same`` when a graph of its
    size ran before (the same ops: other shapes or constants), ``new`` when none did."""
    rule: str = ""
    """The rule that decided it (:mod:`xprof.diagnosis.registry`)."""
    leftovers: bool = False
    """``implicit_sync`` at a barrier whose graph was larger than the training step's: ops
    left pending before the step joined it."""


FIRST_STEP_ONLY = "; these inputs ran before only in the one-off first step, whose graph differs"
"""Said of a shape change whose inputs only the first step had (:attr:`Cause.first_step_only`)."""
