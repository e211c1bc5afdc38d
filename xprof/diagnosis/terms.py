"""The words the analysis, the report and the live notices share, defined once."""

from __future__ import annotations

WARMUP_STEPS = 2
"""Warm-up: every compile of the first two training steps (steps 0 and 1), host reads' and
torch.compile's own syncs' included. torch_xla compiles a one-off graph at step 0 (optimizer
state is created inside it) and the steady-state graph at step 1, so even a perfect loop
compiles twice there; any compile after step 1 is a *recompile*. One exception, the same
everywhere: a host read whose graph grows from read to read within a step (an episode acted
out step by step) owns its second and later compiles, warm-up or not (:func:`is_warmup`)."""

SETTLED_AFTER = 20
"""Steps with no new shape after a shape finding's last compile, at least (and three times the
steps up to it), for it to read as settled: a fixed set of shapes (length buckets), each
compiled once, early: a one-off cost, not one that grows with the run."""

MINOR_SHARE = 0.01
"""A finding that cost less than this share of the run's wall time is *minor*: folded into
one line of the summary and a collapsed section of the report (still in the JSON)."""

EVAL_GRAPH_RATIO = 0.75
"""A barrier graph with fewer nodes than this share of the training graph is an eval pass
(in files recorded without backward-pass evidence)."""

GROWING_READS = 3
"""Compiles at one read site within one step from which its graphs can be growing (two may
be two values one library call reads)."""

GROWING_GRAPHS = 3
"""Barrier graphs of one input signature, each larger than the training graph and the one
before, that make a step graph that grows (a list of device tensors stacked at a read)."""

DATA_DEPENDENT_ACCESSES = frozenset({"nonzero", "masked_select", "unique", "argwhere",
                                     "repeat_interleave", "mask_index", "mask_assign", "where"})
"""Recorded accesses of ops whose output shape depends on values (xprof.recorder.hooks)."""

DATA_DEPENDENT_FALLBACKS = frozenset({"aten::nonzero", "aten::masked_select", "aten::_unique2",
                                      "aten::unique_dim", "aten::unique_consecutive",
                                      "aten::repeat_interleave", "aten::argwhere"})
"""Their CPU-fallback counters: the data-dependent finding's, never a ``cpu_fallback``'s."""


NOTHING_TO_JUDGE = ("xprof: nothing to judge yet: the loop raised before its first step; fix that error, "
                    "then record it again")
"""The exit summary's last line for a loop that raised before its first step, from the live
notices and from the analysis alike (the report's 'Nothing to judge yet')."""


def is_warmup(training_step: int) -> bool:
    """Whether a compile in training step ``training_step`` (0-based; -1 for none) is warm-up."""
    return 0 <= training_step < WARMUP_STEPS


EXPLAIN_SHARE = 0.01
"""``--explain`` switches itself on at warm-up's end when its cost is under this share of a
step: then a graph that changes once (a learning rate reaching 0) is compared at its line too."""

EXPLAIN_NODE_S = 6e-6
EXPLAIN_STEP_S = 4e-4
"""What ``--explain`` costs a step (benchmarks/explain.py, CPU): torch_xla's Python frames on each
traced node (~5.7 µs a node) and the barrier's graph hash (~0.4 ms)."""


def explain_affordable(step_s: float, nodes: int | None) -> bool:
    """``--explain`` costs under :data:`EXPLAIN_SHARE` of a step of ``step_s`` seconds whose
    graph has ``nodes`` nodes (unknown: never)."""
    return nodes is not None and nodes > 0 and EXPLAIN_STEP_S + nodes * EXPLAIN_NODE_S < EXPLAIN_SHARE * step_s
