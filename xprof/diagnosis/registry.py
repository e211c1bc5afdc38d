"""Every cause rule, in precedence order: for a compile, the first rule that answers decides.

Three lists, one per place a compile happens: at a barrier, between barriers (inside a host
read or around one) and an op run on its own (eager mode). Warm-up comes before all of them
(:mod:`xprof.diagnosis.walk`). ``whole_run`` rules need facts only a finished run has: live,
where their ``maybe`` test holds they abstain (the compile gets no notice: the live side
stays quiet rather than guess); elsewhere the later rules decide.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.rules import barriers, fallback, graphs, passes, reads, shapes, split, value_ops, values, warmup
from xprof.diagnosis.unit import CauseUnit, Clause, FindingOf

Check = Callable[[CompileFacts, StepFacts, Walk], bool]


class Rule(NamedTuple):
    name: str
    decide: Callable[[CompileFacts, StepFacts, Walk], Cause | None]
    whole_run: bool = False
    maybe: Check | None = None
    """A ``whole_run`` rule's test on what is known so far: live, where it holds, the compile
    may be this rule's, so the live notices say nothing of it (rather than guess)."""
    finding: FindingOf | None = None
    """The rule's own finding words (else its cause's builder makes the finding)."""
    notice: Clause | None = None
    """The rule's own live notice clause (else its cause unit's)."""

    @property
    def doc(self) -> str:
        """What the rule reads and concludes (its function's docstring)."""
        return re.sub(r":\w+:`~?([\w.]+)`", r"`\1`", " ".join((self.decide.__doc__ or "").split()))


AT_BARRIER: tuple[Rule, ...] = (
    Rule("dynamo_sync", passes.dynamo_sync),
    Rule("eval_pass", passes.eval_pass, whole_run=True, maybe=passes.in_eval_phase),
    Rule("library", passes.library_at_barrier),
    Rule("eval_graph_size", passes.eval_graph_size, whole_run=True, maybe=passes.small_graph),
    Rule("data_dependent", values.barrier_after_op),
    Rule("slice_bound", values.slice_bound),
    Rule("value_op_counted", value_ops.counted, finding=value_ops.finding, notice=value_ops.notice),
    Rule("cpu_fallback", fallback.at_barrier),
    Rule("no_host_input", graphs.no_host_input),
    Rule("joined_pass", shapes.joined_pass),
    Rule("input_shape", shapes.input_shape),
    Rule("micro_batch_role", shapes.micro_batch_role),
    Rule("step_cut_by_pass", passes.step_cut_by_pass),
    Rule("dynamo_retrace", passes.dynamo_retrace),
    Rule("graph_grows", graphs.grows, whole_run=True, maybe=graphs.larger_graph),
    Rule("read_changed_graph", reads.read_changed_graph),
    Rule("eval_mode_left_on", graphs.eval_mode_left_on),
    Rule("second_of_kind", graphs.second_of_kind),
    Rule("graph_change", graphs.graph_change),
)
"""A compile at a barrier."""

MID_STEP: tuple[Rule, ...] = (
    Rule("step_closure", reads.in_closure),
    Rule("data_dependent_op", values.inside_op),
    Rule("read_of_new_inputs", reads.read_of_new_inputs),
    Rule("read_in_eval_pass", reads.read_in_eval_pass, whole_run=True, maybe=passes.in_eval_phase),
    Rule("read_after_data_dependent_op", values.read_after_op),
    Rule("implicit_sync", reads.in_read),
    Rule("dynamo_tracing", passes.dynamo_tracing),
    Rule("eval_pass", passes.eval_pass_mid_step, whole_run=True, maybe=passes.in_eval_phase),
    Rule("library", passes.library_mid_step),
    Rule("library_call", reads.library_call_around),
    Rule("cpu_fallback", fallback.mid_step),
    Rule("input_shape", shapes.new_inputs_mid_step),
    Rule("unknown", graphs.unknown_mid_step),
)
"""A compile between two barriers: inside a host read, or outside any."""

OP: tuple[Rule, ...] = (
    Rule("eager_op", graphs.eager_op),
)
"""An op run on its own (eager mode)."""

QUIET_RULES = frozenset({"second_of_kind"})
"""Rules whose compiles the live notices never name (a kind's steady graph, information)."""

UNEXPLAINED = frozenset({"graph_change", "no_host_input", "graph_grows"})
"""The rules that can only say a graph changed (same inputs and reads; no input from the host;
larger each time, which live is a whole-run rule's abstention): the compiles ``--explain``
is for (it switches itself on at the first, :class:`~xprof.recorder.live.LiveNotices`)."""

RULES: dict[str, tuple[Rule, ...]] = {"barrier": AT_BARRIER, "step": MID_STEP, "op": OP}
"""Where a compile happened (``CompileFacts.at``) -> the rules that judge it."""

BY_NAME: dict[str, Rule] = {rule.name: rule for rules in RULES.values() for rule in rules}
"""Each rule by its name (a name in two lists: the same unit)."""


UNITS: dict[CauseName, CauseUnit] = {unit.name: unit for unit in (
    warmup.WARMUP,
    shapes.INPUT_SHAPE,
    shapes.INPUT_SHARDING,
    reads.IMPLICIT_SYNC,
    values.DATA_DEPENDENT,
    reads.STEP_CLOSURE,
    passes.LIBRARY,
    passes.DYNAMO,
    graphs.GRAPH_CHANGE,
    fallback.CPU_FALLBACK,
    graphs.UNKNOWN,
    barriers.EAGER_MODE,
    barriers.NO_BARRIER,
    split.SPLIT_STEP,
)}
"""Every cause's unit, one line each, in the order the report lists causes: its label,
colour, advice, fix safety, live notice and docs section (:mod:`xprof.diagnosis.unit`)."""

COMPILE_CAUSES: tuple[CauseName, ...] = tuple(n for n, u in UNITS.items() if not u.finding_only)
"""Every uncached compile gets exactly one of these (docs/causes.md)."""

FINDING_CAUSES: tuple[CauseName, ...] = tuple(n for n in UNITS if n != CauseName.WARMUP)
"""What a finding can be about: the causes of compiles (never warm-up), and the findings of
the whole run (eager mode, no barrier, a split step)."""

QUIET_KEYS = frozenset({"warmup", "abstain", "eval", "eager_ops", "closure", "dynamo", "unknown"})
"""Finding groups the live notices never name (information, or not known yet)."""

EXPLAINED = frozenset(n for n, u in UNITS.items() if u.explained)
"""Causes whose notice adds ``--explain``'s line when the step's new graph was compared."""


def clause(cause: Cause, step: StepFacts, walk: Walk) -> str | None:
    """What a live notice says of a barrier compile's cause, or None to say nothing: a cause
    that is information in the report (warm-up, an eval pass's own graphs, a step closure's
    graph, torch.compile's tracing, an op's first eager run, a known library's mechanism), or
    that the live side cannot tell yet (``abstain``)."""
    if cause.key.group in QUIET_KEYS or cause.cause == CauseName.LIBRARY or cause.rule in QUIET_RULES:
        return None
    own = BY_NAME.get(cause.rule)
    if own is not None and own.notice is not None:
        return own.notice(cause, step, walk)
    found = UNITS.get(cause.cause)
    return found.notice(cause, step, walk) if found is not None and found.notice is not None else None


def advice_table() -> dict[str, str]:
    """Finding kind -> its advice, from every unit."""
    return {kind: text for u in UNITS.values() for kind, text in u.advice.items()}
