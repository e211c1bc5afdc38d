"""What the rules look at: one step, one compile, one host read, and the walk's memory.

The analysis builds these from its tables (a column row each), the live notices from the
records as they are written; the rules see no difference, except that facts only the whole
run can give (:class:`WholeRun`) are there for the analysis and absent live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.signatures import Shardings, SigIndex, Signature
from xprof.runfile import Site


class Read(NamedTuple):
    """A host read in a step (``sync`` record)."""

    site: int
    t0: float
    t1: float
    access: str
    deferred: bool
    """Inside an ``xm.add_step_closure`` callback: after the barrier, nothing waited."""
    ran: bool
    """It ran a graph or looked one up (executions, compiles or a cached compile)."""


class CompileFacts(NamedTuple):
    """One uncached compile."""

    at: str
    """``barrier``, ``step`` (between barriers: inside a read or around one) or ``op`` (eager)."""
    t: float
    """When it ended."""
    ms: float
    nodes: int | None
    """The graph's node count, when recorded."""
    read: Read | None = None
    """The host read it happened inside (``at == "step"``), if any."""


@dataclass
class StepFacts:
    """One barrier and what ran since the one before."""

    i: int
    """The barrier's index."""
    ordinal: int
    """The training step it belongs to (-1: it ran no graph)."""
    phase: str
    """``train``, ``eval``, ``dynamo`` or ``empty`` (analysis/steps.py)."""
    sig_id: int | None
    """Its input signature."""
    sites: frozenset[int]
    """Sites of the step's host reads (not deferred)."""
    dd_sites: list[int]
    """Sites of data-dependent ops (mask indexing, nonzero...) that ran in the step."""
    dynamo: bool
    """The barrier is torch.compile's own, or follows one (dynamo was tracing)."""
    barrier_site: int | None = None
    """Where the barrier was asked for, when it compiled (a library's logging...)."""
    index_sites: list[int] = field(default_factory=list)
    """Sites where a device tensor was read as an index or slice bound in the step."""
    eval_mode: bool = False
    """A training step (backward, optimizer step) with the model in eval mode."""
    pass_began: bool = False
    """A training step whose barrier ran with grad off: its backward ran with grad on, so
    another pass (an evaluation under ``torch.no_grad()``) began before the step's barrier,
    and that pass's first barrier ran the step's pending ops with the pass's own first ones."""
    ran_sites: frozenset[int] = frozenset()
    """Sites of the step's reads that ran a graph (or looked one up): only those can have
    taken ops out of the barrier's graph; a read of a value already computed changes nothing."""
    reads: list[Read] = field(default_factory=list)
    """The step's host reads that were not deferred, by start time."""
    work: bool = True
    """The barrier ran a graph."""
    nodes: int | None = None
    """The barrier graph's node count, when recorded."""
    fallback: frozenset[str] = frozenset()
    """CPU-fallback ops that ran in the step."""
    traced: bool = False
    """torch.compile traced a graph in this step (its signature's graphs compile on first use)."""
    user_step: int = -1
    """The training step it is reported under (-1: before the first)."""
    ahead: int = -1
    """torch.compile's own barrier: the training step whose forward it traced."""
    new_fallback: frozenset[str] = frozenset()
    """CPU-fallback ops that ran in this step and in no step before (set by the walk)."""
    compiled: bool = False
    """A graph compiled at its barrier (set by the walk when it judges the step's compiles)."""
    accumulates: bool = False
    """A training micro-batch of gradient accumulation: a backward pass with no optimizer step
    before its barrier, in a run whose optimizer steps are recorded. Its graph and that of a
    micro-batch which steps the optimizer are two graphs for the same inputs."""


@dataclass
class WholeRun:
    """Facts only a finished run gives. Live, each is unknown (None) and the rules that need
    it abstain rather than guess."""

    eval_owner: dict[int, Cause]
    """For each barrier of an eval pass, the cause its compiles get (the mechanism that ran the
    pass, a library call's own sync after it, else the pass)."""
    grown: dict[tuple[int, int], list[int]]
    """(step, nodes) of each barrier graph in a run of graphs of one input signature, each
    larger than every graph before it -> the node counts of that run."""
    fallback_calls: dict[str, tuple[str, str, int]]
    """CPU-fallback ops that ran only in steps where one library call outside the training
    loop's own lines read values: op -> that call (via, file, line)."""
    entry_sig: dict[int, int]
    """torch_xla.compile's entry barrier -> the signature of the call it leads to."""
    size_guess: bool
    """Tell eval graphs by their size (files recorded without backward-pass evidence)."""
    optimizer: bool = False
    """The run recorded optimizer steps (a backward pass without one is then a micro-batch)."""


@dataclass
class Walk:
    """What the steps walked so far have shown, and the run's dictionaries (sites, signatures)
    as far as they are known. :func:`xprof.diagnosis.walk.judge` reads it;
    :func:`xprof.diagnosis.walk.advance` adds a step to it."""

    sigs: dict[int, Signature] = field(default_factory=dict)
    sites: dict[int, Site] = field(default_factory=dict)
    specs: Shardings = field(default_factory=dict)
    whole: WholeRun | None = None
    """None live: the rules that need the whole run abstain."""
    train_nodes: int | None = None
    """The training graph's node count (the most common steady size; live: the latest
    training graph of the first two steps)."""
    loops: frozenset[tuple[str, int]] = frozenset()
    """The user lines the training loop asks for its barriers from (mechanisms.loop_lines)."""
    first_in_train_mode: int | None = None
    """The first steady training step run with the model in train mode."""
    backward_seen: bool = False
    """A barrier so far counted a backward pass (live: eval graphs are then told by that
    evidence, not by their size)."""
    seen_sigs: set[int] = field(default_factory=set)
    """Signatures of steady training steps (past warm-up)."""
    seen_sig_list: list[Signature] = field(default_factory=list)
    seen_keys: set[tuple[int | None, frozenset[int]]] = field(default_factory=set)
    """(signature, read sites) of steady training steps."""
    seen_fallback: set[str] = field(default_factory=set)
    seen_nodes: set[int] = field(default_factory=set)
    """Graph sizes of steady training steps."""
    seen_roles: dict[tuple[int, bool], None] = field(default_factory=dict)
    """(signature, accumulates) of steady training steps, in order: which inputs ran as an
    accumulating micro-batch and which as one that steps the optimizer."""
    seen_sites: set[int] = field(default_factory=set)
    """Read sites seen in earlier training steps (warm-up included)."""
    sig_step: dict[int, int] = field(default_factory=dict)
    """The first training step that ran each signature."""
    dynamo_sigs: set[int] = field(default_factory=set)
    """Input signatures torch.compile traced a graph for."""
    known_sigs: SigIndex = field(default_factory=SigIndex)
    """The earlier signatures as :func:`~xprof.diagnosis.signatures.closest` compares them."""
    dd_leaders: dict[int, int] = field(default_factory=dict)
    """Value-dependent op sites -> the first site of their group (ops in the same steps:
    :func:`~xprof.diagnosis.mechanisms.join_dd`)."""
    sig_runs: dict[int, list[int]] = field(default_factory=dict)
    """Input signature -> [training steps that ran it so far, 1 when the first compiled at its
    barrier] (a kind of batch's second step: ``rules.graphs.second_of_kind``)."""
    shape_key: FindingKey | None = None
    """The first input-shape finding's key (a kind's second step joins it)."""
    same_shapes: dict[Signature, list[int]] = field(default_factory=dict)
    """SPMD: signatures with the same names, shapes, dtypes and sources (they differ in sharding)."""

    def add_sig(self, sid: int, sig: Signature) -> None:
        self.sigs[sid] = sig
        if self.specs:
            self.same_shapes.setdefault(sig, []).append(sid)
