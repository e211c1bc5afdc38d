"""The facts the rules read, built from the run's records as they are written: the live
notices' counterpart of the analysis' adapter (``analysis/causes.py`` builds the same facts
from its tables). It numbers steps as the report does and tells a barrier's phase online
(the analysis' ``steps.assign``, with what is known so far)."""

from __future__ import annotations

from typing import Any

from xprof.diagnosis import walk as engine
from xprof.diagnosis.evidence import is_own_barrier_call
from xprof.diagnosis.facts import CompileFacts, Read, StepFacts, Walk
from xprof.diagnosis.phases import is_eval, leads_to_next_update
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES
from xprof.runfile import Compile, Step, Sync, is_fallback_counter, signature_record, site_record


class StepCount:
    """Where the run is, numbered as the report numbers it: training steps from the
    optimizer-step evidence when the run has any, else barriers that ran a graph."""

    def __init__(self) -> None:
        self.k = -1
        """The last optimizer step's index."""
        self.opt_seen = False
        self.work = 0
        """Barriers that ran a graph so far."""

    def current(self) -> int:
        """The training step in progress."""
        return self.k + 1 if self.opt_seen else self.work


class RecordFacts:
    """What the records written so far show, as the rules read it."""

    def __init__(self) -> None:
        self.walk = Walk()
        self.at = StepCount()
        self.compiles: list[Compile] = []
        """The compiles since the last barrier."""
        self.reads: list[Sync] = []
        """The host reads since the last barrier (deferred ones too)."""
        self.sizes: list[tuple[float, int]] = []
        """The latest TensorsGraphSize samples: the node count of a graph just compiled."""
        self._unsized: list[tuple[float, float]] = []
        """(tb, t1) of steady barriers whose graph size was not written yet."""
        self._prev_dynamo = False

    def signature(self, rec: dict[str, Any]) -> None:
        found = signature_record(rec)
        if found is None:
            return
        sid, inputs = found
        specs = {i.name: i.sharding for i in inputs if i.sharding is not None}
        if specs:
            self.walk.specs[sid] = specs
        self.walk.add_sig(sid, tuple((i.name, i.shape, i.dtype, i.src) for i in inputs))

    def site(self, rec: dict[str, Any]) -> None:
        site = site_record(rec)
        if site is None:
            return
        self.walk.sites[site.id] = site
        if site.access == "barrier" and not is_own_barrier_call(site.via, site.chain):
            self.walk.loops = self.walk.loops | {(site.file, site.line)}  # (not a library's own sync)

    def graph_sizes(self, samples: list[Any]) -> None:
        """New TensorsGraphSize samples; steady steps written before theirs get their size now
        (the recorder reads them in batches): the sizes the walk has seen, as the analysis has."""
        self.sizes = (self.sizes + [(float(t), int(n)) for t, n in samples])[-256:]
        still = []
        for tb, t1 in self._unsized:
            nodes = self.graph_nodes(tb, t1)
            if nodes is not None:
                self.walk.seen_nodes.add(nodes)
            elif self.sizes and self.sizes[-1][0] < t1:
                still.append((tb, t1))
        self._unsized = still[-64:]

    def graph_nodes(self, tb: float, t1: float) -> int | None:
        """Nodes of the graph a barrier ran (its TensorsGraphSize sample)."""
        for t, n in reversed(self.sizes):
            if tb <= t <= t1:
                return n
        return None

    def dd_sites_so_far(self) -> list[int]:
        """The sites of the step's value-dependent ops read so far, in the order they ran."""
        return list(dict.fromkeys(r.site for r in sorted(self.reads, key=lambda r: r.t0)
                                  if not r.deferred and self.access(r.site) in DATA_DEPENDENT_ACCESSES))

    def access(self, sid: int) -> str:
        site = self.walk.sites.get(sid)
        return site.access if site is not None else "?"

    def step_facts(self, step: Step) -> StepFacts:
        """The barrier as the rules see it (the analysis' steps.assign, told online)."""
        at = self.at
        self.walk.backward_seen |= step.backward > 0
        work = bool(step.barrier_uncached or step.barrier_cached or step.mid_graphs)
        at_dynamo = step.barrier == "dynamo"
        ahead = at.current()
        if step.opt:
            at.opt_seen = True
            at.k += 1
        i = at.k if at.opt_seen else at.work
        if at.opt_seen and not step.opt and leads_to_next_update(step.backward > 0, step.barrier == "compile_entry"):
            i = at.k + 1  # a micro-batch (or torch_xla.compile's entry) belongs to the update after it
        eval_barrier = is_eval(work, bool(step.nograd), bool(step.eval_mode), step.backward > 0, bool(step.opt),
                               at_dynamo, at.opt_seen)
        phase = "dynamo" if at_dynamo else "eval" if eval_barrier else "train" if work else "empty"
        if work and not at_dynamo:
            at.work += 1
        nodes = self.graph_nodes(step.tb, step.t1) if work else None
        if phase == "train" and 0 <= i <= 1 and step.barrier_uncached and nodes is not None:
            self.walk.train_nodes = nodes  # the graph the steady state runs
        reads = sorted((Read(r.site, r.t0, r.t1, self.access(r.site), False,
                             bool(r.executions or r.uncached or r.cached))
                        for r in self.reads if not r.deferred), key=lambda r: r.t0)
        sig = step.sig
        traced = step.dynamo_graphs > 0 or at_dynamo
        facts = StepFacts(
            i=step.i, ordinal=i if phase == "train" else -1, phase=phase, sig_id=sig,
            sites=frozenset(r.site for r in reads),
            dd_sites=list(dict.fromkeys(r.site for r in reads if r.access in DATA_DEPENDENT_ACCESSES)),
            index_sites=list(dict.fromkeys(r.site for r in reads if r.access == "index")),
            ran_sites=frozenset(r.site for r in reads if r.ran), reads=reads,
            dynamo=at_dynamo or self._prev_dynamo or traced or (sig is not None and sig in self.walk.dynamo_sigs),
            barrier_site=step.site, eval_mode=step.eval_mode and phase == "train", work=work, nodes=nodes,
            pass_began=phase == "train" and step.nograd and step.backward > 0,
            accumulates=phase == "train" and step.backward > 0 and not step.opt and at.opt_seen,
            fallback=frozenset(k for k in step.counters if is_fallback_counter(k)),
            traced=traced, user_step=i, ahead=ahead)
        self._prev_dynamo = at_dynamo
        return facts

    def step_compiles(self, step: Step) -> tuple[list[Compile], list[Compile]]:
        """The compiles the barrier's step judges, and those it carries to the next barrier: ops
        run eagerly on the inputs of the torch_xla.compile call an entry barrier leads to are
        the call's (its shapes), judged at its barrier."""
        compiles, self.compiles = self.compiles, []
        if step.barrier == "compile_entry" and step.sig is None:
            return [c for c in compiles if c.at != "op"], [c for c in compiles if c.at == "op"]
        return compiles, []

    def compile_facts(self, c: Compile, barrier_nodes: int | None) -> CompileFacts:
        """A compile as the rules see it: its graph's size is the first sample after it (a
        barrier's compile whose sample is not written yet: the barrier graph's)."""
        read = next((r for r in self.reads if r.t0 <= c.t <= r.t1), None) if c.at == "step" else None
        nodes = next((n for ts, n in self.sizes if 0 <= ts - c.t < 1.0), None)
        if nodes is None and c.at == "barrier":
            nodes = barrier_nodes
        return CompileFacts(c.at, c.t, c.ns / 1e6, nodes,
                            None if read is None else Read(read.site, read.t0, read.t1, self.access(read.site),
                                                           read.deferred, True))

    def after(self, step: Step, facts: StepFacts, carried: list[Compile]) -> None:
        """The barrier is judged: add it to the walk, and start the next step."""
        engine.advance(facts, self.walk)
        steady = facts.phase == "train" and facts.work
        if steady and facts.ordinal >= 1 and facts.nodes is None:
            self._unsized.append((step.tb, step.t1))
        if steady and facts.ordinal >= 1 and not step.eval_mode and self.walk.first_in_train_mode is None:
            self.walk.first_in_train_mode = step.i
        self.reads = []
        self.compiles = carried
