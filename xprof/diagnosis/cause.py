"""A cause: what one compile is blamed on, and the finding it joins."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.patterns import Shape


class CauseName(StrEnum):
    """Every cause a compile or a finding can have: the one spelling of each name. A member
    is its string (``CauseName.INPUT_SHAPE == "input_shape"``), so run files, findings and the
    JSON summary read as before; code names the member, never the bare string. Each has one
    unit (:data:`xprof.diagnosis.registry.UNITS`)."""

    WARMUP = "warmup"
    INPUT_SHAPE = "input_shape"
    INPUT_SHARDING = "input_sharding"
    IMPLICIT_SYNC = "implicit_sync"
    DATA_DEPENDENT = "data_dependent"
    STEP_CLOSURE = "step_closure"
    LIBRARY = "library"
    DYNAMO = "dynamo"
    GRAPH_CHANGE = "graph_change"
    CPU_FALLBACK = "cpu_fallback"
    UNKNOWN = "unknown"
    EAGER_MODE = "eager_mode"
    NO_BARRIER = "no_barrier"
    SPLIT_STEP = "split_step"
    ABSTAIN = "abstain"
    """Live only: a rule that needs the whole run may apply, so nothing is said yet."""


@dataclass
class Cause:
    cause: CauseName
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
    role: str = ""
    """``input_shape`` under gradient accumulation: said of a compile for inputs earlier
    micro-batches ran, but in the other role (:func:`~xprof.diagnosis.rules.shapes.micro_batch_role`)."""
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
