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

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.rules import fallback, graphs, passes, reads, shapes, values

Check = Callable[[CompileFacts, StepFacts, Walk], bool]


class Rule(NamedTuple):
    name: str
    decide: Callable[[CompileFacts, StepFacts, Walk], Cause | None]
    whole_run: bool = False
    maybe: Check | None = None
    """A ``whole_run`` rule's test on what is known so far: live, where it holds, the compile
    may be this rule's, so the live notices say nothing of it (rather than guess)."""

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
    Rule("cpu_fallback", fallback.at_barrier),
    Rule("no_host_input", graphs.no_host_input),
    Rule("joined_pass", shapes.joined_pass),
    Rule("input_shape", shapes.input_shape),
    Rule("step_cut_by_pass", passes.step_cut_by_pass),
    Rule("dynamo_retrace", passes.dynamo_retrace),
    Rule("graph_grows", graphs.grows, whole_run=True, maybe=graphs.larger_graph),
    Rule("read_changed_graph", reads.read_changed_graph),
    Rule("eval_mode_left_on", graphs.eval_mode_left_on),
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

UNEXPLAINED = frozenset({"graph_change", "no_host_input", "graph_grows"})
"""The rules that can only say a graph changed (same inputs and reads; no input from the host;
larger each time, which live is a whole-run rule's abstention): the compiles ``--explain``
is for (it switches itself on at the first, :class:`~xprof.recorder.live.LiveNotices`)."""

RULES: dict[str, tuple[Rule, ...]] = {"barrier": AT_BARRIER, "step": MID_STEP, "op": OP}
"""Where a compile happened (``CompileFacts.at``) -> the rules that judge it."""
