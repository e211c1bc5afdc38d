"""Host reads: ``.item()``, ``print(t)``, ``if t > x:`` ran the device early, compiled a graph
of their own, or took ops out of the barrier's graph."""

from __future__ import annotations

import os

from xprof.diagnosis.cause import Cause
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.mechanisms import call_key, finding_id
from xprof.diagnosis.rules.fallback import fallback_call
from xprof.diagnosis.rules.passes import eval_pass
from xprof.diagnosis.rules.shapes import new_inputs, shape_cause


def in_closure(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``step_closure``: compiled inside a read in an ``xm.add_step_closure`` callback: it runs
    after the barrier, on a small graph of its own (compiled once, cached afterwards)."""
    if c.read is None or not c.read.deferred:
        return None
    site = c.read.site
    return Cause("step_closure", FindingKey("closure", str(site)), site=site, evidence=(
        "compiled inside a read in an xm.add_step_closure callback: it runs after the "
        "barrier, on a small graph of its own (compiled once, cached afterwards)"))


def read_of_new_inputs(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """The same read compiled before: it compiles again only because the inputs changed (an
    eval pass's batches, a model's mask check in its forward, being the pass's)."""
    read = c.read
    if read is None or read.deferred or read.site not in walk.seen_sites or not new_inputs(step, walk):
        return None
    return eval_pass(c, step, walk) or shape_cause(step.sig_id or 0, walk)


def read_in_eval_pass(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """The eval pass's (whole run): a compile inside a host read in an eval pass, where the same
    read (the same finding: a model's mask check, a shared loss helper's ``.item()``) also ran
    in training steps. The pass's graphs differ from training's (grad off, eval mode), so this
    graph is the pass's, as its barriers' are; the read's waits stay the read's. A read only
    the pass makes (``generate()``'s stop check) keeps its compiles."""
    read = c.read
    if read is None or read.deferred:
        return None
    def group(site: int) -> str:
        return finding_id(FindingKey.sync(site), walk.sites, walk.loops, walk.dd_leaders)

    mine = group(read.site)
    if not any(group(s) == mine for s in walk.seen_sites):
        return None
    return eval_pass(c, step, walk)


def in_read(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``implicit_sync``: compiled inside a host read of a tensor value."""
    if c.read is None or c.read.deferred:
        return None
    site = c.read.site
    return Cause("implicit_sync", FindingKey.sync(site), site=site,
                 evidence="compiled inside a host read of a tensor value")


def library_call_around(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``implicit_sync``: a compile outside any read, between two reads that one library call at
    one user line made (the same ``via``, file and line): it happened inside that call
    (``model.generate()`` reading its stop condition every token, with an op on the CPU cutting
    a graph between two reads). It is the call's, like its reads, whatever op forced it."""
    calls = [(r, walk.sites.get(r.site)) for r in step.reads]
    calls = [(r, s) for r, s in calls if s is not None and s.via]
    start = c.t - c.ms / 1e3
    before = [(r, s) for r, s in calls if r.t1 <= start]
    after = [(r, s) for r, s in calls if r.t0 >= c.t]
    if not before or not after:
        return None
    (b, bs), (_, a_s) = before[-1], after[0]
    if call_key(bs) != call_key(a_s) or bs is None:
        return None
    return Cause("implicit_sync", FindingKey.sync(b.site), site=b.site, evidence=(
        f"compiled inside {bs.via} (called from {os.path.basename(bs.file)}:{bs.line}), between two of its "
        "host reads: a graph it ran, cut there by an op on the CPU or a sync of its own"))


def read_changed_graph(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``implicit_sync`` at the barrier: same inputs as before, but a read in this step (at a
    line not read from before with these inputs) ran a graph, which took ops out of the
    barrier's graph. Only a read that ran something can do that. A library call new in the
    step that also ran the step's new CPU-fallback ops owns it; a graph larger than the
    training step's means ops left pending before the step joined it."""
    sites, sig_id = step.sites, step.sig_id
    if not step.ran_sites or (sig_id, sites) in walk.seen_keys:
        return None
    earlier = set().union(*[s for (sg, s) in walk.seen_keys if sg == sig_id]) if walk.seen_keys else set()
    new_sites = sorted(step.ran_sites - earlier) or sorted(step.ran_sites)
    call = fallback_call(step, walk)
    if call is not None:
        via, file, line = call
        mine = [s for s in new_sites if call_key(walk.sites.get(s)) == call]
        site = (mine or new_sites)[0]
        return Cause("implicit_sync", FindingKey.sync(site), site=site, evidence=(
            f"same inputs as before, but {via} at {os.path.basename(file)}:{line} ran in this step "
            f"(with {', '.join(sorted(step.new_fallback))} on the CPU, which runs only in steps that call it), "
            "and the graph at the barrier changed"))
    nodes, train_nodes = c.nodes, walk.train_nodes
    grown = ""
    if nodes is not None and train_nodes and nodes > train_nodes:
        grown = (f"; its graph had {nodes} nodes against the training step's {train_nodes}: ops left "
                 "pending before the step (an evaluation pass with no barrier of its own, what the "
                 "reads did not need) joined it, and a torch_xla.sync() after them keeps the step's "
                 "graph as it was")
    return Cause("implicit_sync", FindingKey.sync(new_sites[0]), site=new_sites[0], leftovers=bool(grown),
                 evidence=("same inputs as before, but a host read in this step materialized a tensor, "
                           "so the graph at the barrier changed" + grown))
