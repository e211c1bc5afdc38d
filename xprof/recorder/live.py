"""Live notices: what xprof says on stderr while it records. This module feeds, holds and
prints; the diagnosis decides (:mod:`xprof.diagnosis`: the same walk and rules as the
analysis, each cause's words in its rule module).

The writer thread hands every batch of records it wrote to :class:`LiveNotices` (in file
order), so nothing here runs on the training thread. A rule that needs the whole run
abstains, and its compile gets no notice. Each notice names a finding the report will have
(:func:`~xprof.diagnosis.mechanisms.finding_id`) and is said once, after warm-up: a barrier
compile (``step N recompiled: ...; K recompiles so far``), a host read that ran the device
(said when its step's barrier comes), an op without an XLA lowering, eager mode, no barrier,
torch.compile giving up. The exit summary is ``watch()``'s (:mod:`xprof.recorder.verdict`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from xprof.diagnosis import walk as engine
from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.facts import StepFacts, Walk
from xprof.diagnosis.keys import EAGER_KEY, FindingKey
from xprof.diagnosis.mechanisms import finding_id, join_dd
from xprof.diagnosis.notices import graph_line
from xprof.diagnosis.online import RecordFacts, StepCount
from xprof.diagnosis.registry import EXPLAINED, UNEXPLAINED, clause
from xprof.diagnosis.rules.barriers import EagerSteps, eager_notice, no_barrier_notice
from xprof.diagnosis.rules.fallback import uncompiled_notice, uncompiled_ops
from xprof.diagnosis.rules.graphs import GrowthRuns, grows_notice
from xprof.diagnosis.rules.passes import dynamo_limit_notice
from xprof.diagnosis.rules.reads import ReadSites, read_words, said_live
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES, WARMUP_STEPS, explain_affordable
from xprof.runfile import (
    Compile,
    GraphChange,
    Step,
    Sync,
    compile_record,
    graph_change_record,
    step_record,
    sync_record,
)

__all__ = ["LiveNotices", "stderr_line"]

FAST_KINDS = 8
"""Kinds of steady step remembered for the short path (a run with more starts over)."""

def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 0.95 else f"{s:.2f} s"


class LiveNotices:
    """Follows the run's records as they are written; says what is new, once."""

    def __init__(self, started: float, emit: Callable[[str], None] | None = None,
                 on_unexplained: Callable[[int, str], None] | None = None) -> None:
        self.started = started
        self.emit = emit
        """Prints one line; None keeps quiet (the notices are still kept)."""
        self.on_unexplained = on_unexplained
        """Called once, with the barrier's index and why (``--explain`` switching itself on): at the
        first barrier compile the rules can only call a changed graph (``graph_change``:
        ``registry.UNEXPLAINED``), or at warm-up's end when steps are long enough that the mode
        costs under 1% of one (``long_steps``: ``terms.explain_affordable``)."""
        self.lines: list[str] = []
        self.said: list[tuple[str, str]] = []
        """(finding id, line) of every notice, in order."""
        self._said: set[str] = set()
        self._timed = False
        """The first steady step that compiled nothing was timed for ``--explain``'s cost."""
        self.facts = RecordFacts()
        """What the records so far show, as the rules read them (xprof.diagnosis.online)."""
        self._held: list[tuple[str, str]] = []  # read notices waiting for their step's barrier
        self._sites, self._eager, self._call_ops = ReadSites(), EagerSteps(), set[str]()
        self._recompiles, self._recompile_s, self._dynamo_recompiled = 0, 0.0, False
        self._growth: GrowthRuns[tuple[str, str]] = GrowthRuns()
        self._explained: dict[tuple[int, str], GraphChange] = {}  # --explain's graphs by (step, at)
        self._fast: dict[int, tuple[Any, bool, int]] = {}
        """Kinds of steady step a step may repeat, by the identity of their shared fields (the
        fields, an optimizer step, cached compiles at the barrier): see :meth:`_step`."""

    @property
    def walk(self) -> Walk:
        return self.facts.walk

    @property
    def _at(self) -> StepCount:
        return self.facts.at

    def feed(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            kind = rec.get("type")
            if kind == "step":
                self._step(rec)
            elif kind == "sync":
                self._sync(sync_record(rec))
            elif kind == "compile":
                comp = compile_record(rec)
                if comp is not None:
                    self.facts.compiles.append(comp)
                    self._eager.op_compiled |= comp.at == "op"
            elif kind == "graph_sizes":
                self.facts.graph_sizes(rec.get("samples") or [])
            elif kind == "sig":
                self.facts.signature(rec)
            elif kind == "site":
                self.facts.site(rec)
            elif kind == "debug":
                self._debug(rec)

    def _say(self, key: str, text: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        line = f"xprof: {text}"
        self.lines.append(line)
        self.said.append((key, line))
        if self.emit is not None:
            self.emit(line)

    def _debug(self, rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        if kind == "hook":
            self._sites.armed.setdefault(str(rec.get("hook")), self._at.current() + 1)
        elif kind == "dynamo_limit":
            # (the dynamo finding says it; with no torch.compile recompile after warm-up, its own)
            self._say("dynamo" if self._dynamo_recompiled else "dynamo_limit",
                      f"step {self._at.current()}: {dynamo_limit_notice(rec)}")
        elif kind == "graph":
            try:  # --explain's new graph, written before its step's record
                change = graph_change_record(rec)
            except (TypeError, ValueError):
                return
            if change.base is not None:
                self._explained[(change.i, change.at)] = change
        elif kind == "no_barrier":
            self._say(CauseName.NO_BARRIER, no_barrier_notice(rec.get("opt"), rec.get("bw")))

    def _sync(self, read: Sync) -> None:
        self.facts.reads.append(read)
        if read.deferred:
            return  # a step closure's read: after the barrier, nothing waited
        i = self._at.current()
        self._sites.read(read.site, i)
        if not (read.executions or read.uncached) or i < WARMUP_STEPS:
            return  # nothing ran (the value was on the host), or warm-up
        site = self.walk.sites.get(read.site)
        if site is not None and site.access in DATA_DEPENDENT_ACCESSES:
            join_dd(self.walk.dd_leaders, self.facts.dd_sites_so_far())
        key = finding_id(FindingKey.sync(read.site), self.walk.sites, self.walk.loops, self.walk.dd_leaders)
        if key in self._said or site is None or not said_live(site):
            return
        # Said when the step's barrier comes: a read after the last one is in no finding.
        often = self._sites.how_often(read.site, site.access, i)
        self._held.append((key, f"step {i}: {read_words(site, bool(read.uncached), self.walk.loops)} ({often})"))

    def _step(self, rec: dict[str, Any]) -> None:
        steady = getattr(rec, "steady", None)
        fast = self._fast.get(id(steady)) if steady is not None else None
        if (fast is not None and steady is fast[0] and not self._held
                and not self.facts.compiles and not self.facts.reads and not self._growth):
            # A steady step like the last one (the same written fields), with nothing read or
            # compiled since, and no run of larger graphs waiting to be told: it changes nothing
            # the walk remembers (most steps take this path, before the record is even decoded).
            if fast[1]:
                self._at.k += 1
            runs = self.walk.sig_runs.get(steady.get("sig"))
            if runs is not None:
                runs[0] += 1
            self._count_graphs(self._at.k if self._at.opt_seen else self._at.work, 0, fast[2])
            self._at.work += 1
            return
        step = step_record(rec)
        if step is None:
            return
        quiet = not (self._held or self.facts.compiles or self.facts.reads)
        facts = self._barrier(step)
        if (steady is not None and quiet and facts.phase == "train" and facts.ordinal >= WARMUP_STEPS
                and not step.barrier_uncached and not step.mid_graphs and not facts.fallback):
            if len(self._fast) >= FAST_KINDS:
                self._fast.clear()
            self._fast[id(steady)] = (steady, bool(step.opt), step.barrier_cached)

    def _barrier(self, step: Step) -> StepFacts:
        held, self._held = self._held, []
        for key, text in held:
            self._say(key, text)
        facts = self.facts.step_facts(step)
        compiles, carried = self.facts.step_compiles(step)
        if (self.on_unexplained is not None and not self._timed and not compiles and facts.phase == "train"
                and facts.ordinal >= WARMUP_STEPS):
            # The first steady step that compiled nothing: its wall time is the step's own
            self._timed = True
            if explain_affordable(step.t1 - step.t0, facts.nodes or self.walk.train_nodes):
                self.on_unexplained(facts.i, "long_steps")  # (a graph that changes once gets its line too)
                self.on_unexplained = None
        causes = engine.judge([self.facts.compile_facts(c, facts.nodes) for c in compiles], facts, self.walk)
        self._notice(compiles, causes, facts)
        self._fallback_notice(step, facts)
        if facts.phase == "train" and facts.work:
            self._count_graphs(facts.ordinal, step.mid_graphs, step.barrier_uncached + step.barrier_cached)
        self.facts.after(step, facts, carried)
        return facts

    def _notice(self, compiles: list[Compile], causes: list[Any], facts: StepFacts) -> None:
        """Count the recompiles; say the first barrier compile with something to say."""
        judged = [(comp, cause) for comp, cause in zip(compiles, causes) if cause.cause != CauseName.WARMUP]
        if self.on_unexplained is not None and any(comp.at == "barrier" and cause.rule in UNEXPLAINED
                                                   for comp, cause in judged):
            self.on_unexplained(facts.i, "graph_change")
            self.on_unexplained = None
        self._recompiles += len(judged)
        self._recompile_s += sum(comp.ns for comp, _ in judged) / 1e9
        so_far = (f"{self._recompiles} recompile{'s' if self._recompiles != 1 else ''} so far, "
                  f"{_seconds(self._recompile_s)}")
        if self._growing(judged, facts, so_far):
            return
        self._dynamo_recompiled |= any(cause.cause == CauseName.DYNAMO for _, cause in judged)
        for comp, cause in judged:
            words = self._explain(cause, facts, clause(cause, facts, self.walk)) if comp.at != "step" else None
            if words is not None:
                key = finding_id(cause.key, self.walk.sites, self.walk.loops, self.walk.dd_leaders)
                self._say(key, f"step {facts.user_step} recompiled: {words}; {so_far}")
                return

    def _growing(self, judged: list[tuple[Compile, Any]], facts: StepFacts, so_far: str) -> bool:
        """Hold, or say, this step's compiles as the growth rule's runs decide
        (:class:`~xprof.diagnosis.rules.graphs.GrowthRuns`); True when they were dealt with."""
        sig = facts.sig_id
        if sig is None or facts.phase != "train":
            return False
        if not any(comp.at == "barrier" for comp, _ in judged):
            self._say_held(self._growth.cached(sig, facts.nodes))
            return False
        grew = next((comp for comp, cause in judged if cause.rule == "graph_grows"), None)
        if grew is None or not self._growth.larger(sig, facts.nodes):
            if self._growth.holds(sig):
                self._say_held(self._growth.end(sig))
            if grew is not None:  # (a graph not larger, or after the run ended: judged without growth)
                self._say_held(self._other_notice(grew, facts, so_far))
                return True
            return False
        sizes = self._growth.add(sig, facts.nodes, self._other_notice(grew, facts, so_far))
        if sizes is not None:
            said = graph_line(self._explained.get((facts.i, "barrier")))
            self._say("grows", f"step {facts.user_step} recompiled: {grows_notice(sizes)}"
                      + (f"; {said}" if said else "") + f"; {so_far}")
        return True

    def _other_notice(self, comp: Compile, facts: StepFacts, so_far: str) -> tuple[str, str] | None:
        """What the rules say of a compile without the growth rule: (finding id, line)."""
        other = engine.decide(self.facts.compile_facts(comp, facts.nodes), facts, self.walk, past="graph_grows")
        words = self._explain(other, facts, clause(other, facts, self.walk))
        return (finding_id(other.key, self.walk.sites, self.walk.loops, self.walk.dd_leaders),
                f"step {facts.user_step} recompiled: {words}; {so_far}") if words else None

    def _explain(self, cause: Any, facts: StepFacts, words: str | None) -> str | None:
        """A barrier compile's words, with ``--explain``'s line when its new graph was compared."""
        if words is None or cause.cause not in EXPLAINED:
            return words
        said = graph_line(self._explained.get((facts.i, "barrier")))
        return f"{words}; {said}" if said else words

    def _say_held(self, held: tuple[str, str] | None) -> None:
        if held is not None:
            self._say(*held)

    def _fallback_notice(self, step: Step, facts: StepFacts) -> None:
        for op in uncompiled_ops(facts, self.walk, bool(step.barrier_uncached), self._call_ops):
            self._say(str(FindingKey.fallback([op])),
                      f"step {facts.user_step}: {uncompiled_notice(op, step.counters.get(op, 0))}")

    def _count_graphs(self, step: int, mid: int, at_barrier: int) -> None:
        self._say_eager(self._eager.add(step, mid, at_barrier, self._at.opt_seen))

    def _say_eager(self, found: tuple[int, int] | None) -> None:
        if found is not None:
            self._say(str(EAGER_KEY), eager_notice(*found))

    def close(self) -> None:
        """The run ended: its last step's barriers are all in."""
        self._say_eager(self._eager.over())
        for held in self._growth.end_all():
            self._say(*held)


def stderr_line(line: str) -> None:
    """Write one line to the process's stderr now; a closed stderr is not an error."""
    try:
        err = sys.stderr
        if err is not None:
            err.write(line + "\n")
            err.flush()
    except Exception:
        pass
