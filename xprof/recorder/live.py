"""Live notices: what xprof says on stderr while it records, from the diagnosis engine.

The writer thread hands every batch of records it wrote to :class:`LiveNotices` (in file
order), so nothing here runs on the training thread. Each barrier's compiles are judged by
the same walk and rules as the analysis (:mod:`xprof.diagnosis`), with what is known so
far: a rule that needs the whole run abstains, and the compile gets no notice. Each notice
names a finding the report will have (its id, :func:`~xprof.diagnosis.mechanisms.finding_id`)
and is said once, after warm-up (:data:`~xprof.diagnosis.terms.WARMUP_STEPS`):

- a barrier compile: ``step N recompiled: <what the rule found>; K recompiles so far``;
- a host read that ran the device (``implicit_sync``, a library's read, a value-dependent op),
  said when its step's barrier comes (a read after the last barrier is in no finding);
- an op without an XLA lowering in a steady step, a step run op by op (eager mode), no
  barrier after several optimizer steps, torch.compile giving up on a function.

The exit summary is not made here: ``watch()`` prints the analysis' own verdict on the
finished file (:mod:`xprof.recorder.verdict`). Every string from the run goes through
:func:`~xprof.diagnosis.notices.clean` before it is printed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from xprof.diagnosis import walk as engine
from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.evidence import dynamo_func, is_checkpoint_call, is_logging_call
from xprof.diagnosis.facts import StepFacts, Walk
from xprof.diagnosis.keys import EAGER_KEY, FindingKey
from xprof.diagnosis.mechanisms import finding_id, is_dynamo, join_dd, mechanism
from xprof.diagnosis.notices import clean, graph_line, where
from xprof.diagnosis.online import RecordFacts, StepCount
from xprof.diagnosis.registry import EXPLAINED, UNEXPLAINED, clause
from xprof.diagnosis.rules.fallback import new_library_call
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES, GROWING_GRAPHS, WARMUP_STEPS
from xprof.runfile import (
    Compile,
    GraphChange,
    Site,
    Step,
    Sync,
    compile_record,
    graph_change_record,
    step_record,
    sync_record,
)

__all__ = ["LiveNotices", "clean", "read_label", "stderr_line"]

FAST_KINDS = 8
"""Kinds of steady step remembered for the short path (a run with more starts over)."""

_READ_LABEL = {
    "item": ".item()", "tolist": ".tolist()", "numpy": ".numpy()", "cpu": ".cpu()",
    "to_cpu": ".to('cpu')", "bool": "a tensor used as a condition", "int": "int() of a tensor",
    "float": "float() of a tensor", "index": "a tensor used as an index",
    "repr": "printing a tensor", "format": "formatting a tensor", "materialize": "materializing tensors",
    "mask_index": "boolean-mask indexing", "mask_assign": "boolean-mask assignment",
    "nonzero": "nonzero()", "masked_select": "masked_select()",
    "unique": "unique()", "argwhere": "argwhere()", "repeat_interleave": "repeat_interleave()",
}
_CALL_OF = {"item": "item", "tolist": "tolist", "numpy": "numpy", "cpu": "cpu", "to_cpu": "to"}
_RECEIVER = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]\n]{0,40}\])?$")


def read_label(kind: str, code: str) -> str:
    """``loss.item()`` when the line shows the call, else what the access was."""
    method = _CALL_OF.get(kind)
    if method and code:
        at = code.find(f".{method}(")
        if at > 0:
            m = _RECEIVER.search(code[:at])
            if m:
                close = code.find(")", at)
                return code[m.start(): close + 1] if 0 < close - at < 30 else f"{code[m.start():at]}.{method}()"
    return _READ_LABEL.get(kind, kind)


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 0.95 else f"{s:.2f} s"


class LiveNotices:
    """Follows the run's records as they are written; says what is new, once."""

    def __init__(self, started: float, emit: Callable[[str], None] | None = None,
                 on_unexplained: Callable[[int], None] | None = None) -> None:
        self.started = started
        self.emit = emit
        """Prints one line; None keeps quiet (the notices are still kept)."""
        self.on_unexplained = on_unexplained
        """Called once, with the barrier's index, at the first barrier compile the rules can only
        call a changed graph (``--explain`` switching itself on: see :data:`~xprof.diagnosis.registry.UNEXPLAINED`)."""
        self.lines: list[str] = []
        self.said: list[tuple[str, str]] = []
        """(finding id, line) of every notice, in order."""
        self._said: set[str] = set()
        self.facts = RecordFacts()
        """What the records so far show, as the rules read them (xprof.diagnosis.online)."""
        self._held: list[tuple[str, str]] = []
        """Read notices waiting for their step's barrier."""
        self._site_steps: dict[int, tuple[int, int, int]] = {}
        """Read site -> (first step it read in, last, how many steps)."""
        self._armed: dict[str, int] = {}
        """A hook armed mid-run (``mask_index``) -> the first step it saw whole."""
        self._recompiles = 0
        self._recompile_s = 0.0
        self._op_compiled = False
        self._graphs: list[int] = [-1, 0, 0]
        """The training step in progress: [its index, graphs run between barriers outside
        host reads, graphs its barriers ran] (eager-mode evidence)."""
        self._eager_said = False
        self._call_ops: set[str] = set()
        """CPU-fallback ops first seen in a step where a library call read values."""
        self._growth: dict[int, list[tuple[int, tuple[str, str] | None]]] = {}
        """Input signature -> its run of training graphs, each larger than the last (held notices)."""
        self._dynamo_recompiled = False
        """A torch.compile retrace was counted after warm-up."""
        self._explained: dict[tuple[int, str], GraphChange] = {}
        """``--explain``'s compared graphs by (step, ``barrier``/``read``)."""
        self._grown_done: set[int] = set()
        """Input signatures whose run of larger graphs is over (a compile not larger ended it)."""
        self._fast: dict[int, tuple[Any, bool, int]] = {}
        """Kinds of steady step a step may repeat, by the identity of their shared fields (the
        fields, an optimizer step, cached compiles at the barrier): see :meth:`_step`. Steps
        of a loop often alternate between two kinds (an execution counted a barrier late)."""

    @property
    def walk(self) -> Walk:
        return self.facts.walk

    @property
    def _at(self) -> StepCount:
        return self.facts.at

    # -- feeding ---------------------------------------------------------------------

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
                    self._op_compiled |= comp.at == "op"
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
            # A hook armed mid-run (the mask hooks, once aten::nonzero first ran): its reads are
            # seen from the next step on, so "every step so far" counts from there.
            self._armed.setdefault(str(rec.get("hook")), self._at.current() + 1)
        elif kind == "dynamo_limit":
            func = dynamo_func(str(rec.get("func") or "?"), rec.get("file"), rec.get("line"))
            value = rec.get("value")
            limit = f"torch._dynamo.config.{rec.get('limit') or 'recompile_limit'}"
            if isinstance(value, int):
                limit += f" = {value}"
            # (the dynamo finding says it; with no torch.compile recompile after warm-up, its own)
            self._say("dynamo" if self._dynamo_recompiled else "dynamo_limit",
                      f"step {self._at.current()}: torch.compile gave up on {clean(func, 80)} at its "
                      f"recompile limit ({clean(limit, 80)}): it runs uncompiled from now on, and XLA compiles a "
                      "graph for each new shape")
        elif kind == "graph":
            try:  # --explain's new graph, written before its step's record
                change = graph_change_record(rec)
            except (TypeError, ValueError):
                return
            if change.base is not None:
                self._explained[(change.i, change.at)] = change
        elif kind == "no_barrier":
            self._say("no_barrier", f"{rec.get('opt')} optimizer steps and no step barrier yet: the pending graph "
                      "grows with every step until a value is read; end each step with torch_xla.sync() "
                      "(or iterate an MpDeviceLoader)")

    # -- host reads ------------------------------------------------------------------

    def _sync(self, read: Sync) -> None:
        self.facts.reads.append(read)
        if read.deferred:
            return  # a step closure's read: after the barrier, nothing waited
        i = self._at.current()
        first, last, seen = self._site_steps.get(read.site, (i, -1, 0))
        if i != last:
            self._site_steps[read.site] = (first, i, seen + 1)
        if not (read.executions or read.uncached) or i < WARMUP_STEPS:
            return  # nothing ran (the value was on the host), or warm-up
        site = self.walk.sites.get(read.site)
        if site is not None and site.access in DATA_DEPENDENT_ACCESSES:
            join_dd(self.walk.dd_leaders, self.facts.dd_sites_so_far())
        key = finding_id(FindingKey.sync(read.site), self.walk.sites, self.walk.loops, self.walk.dd_leaders)
        if key in self._said or site is None or is_dynamo(site) or is_checkpoint_call(site.via):
            return
        # Said when the step's barrier comes: a read after the last one is in no finding.
        self._held.append((key, f"step {i}: {self._read_words(site, bool(read.uncached))} "
                                f"({self._how_often(site, i)})"))

    def _read_words(self, site: Site, compiled: bool) -> str:
        """What a read did, as a notice says it (``compiled``: the read compiled a graph)."""
        at = where(site)
        graph = ", compiling a graph to do so" if compiled else ""
        if site.access in DATA_DEPENDENT_ACCESSES:
            return (f"{clean(read_label(site.access, site.code), 60)} at {at} has a value-dependent shape; it runs "
                    "on the CPU and runs the graph early")
        mech = mechanism(site)
        if mech is not None:
            return f"{mech.what} reads values on the host{graph}"
        if site.via and not is_logging_call(site.via):
            name = site.via if (site.file, site.line) not in self.walk.loops else (site.inner or site.via)
            return f"{clean(name, 80)} (called from {at}) reads values on the host{graph}"
        label = "logging a tensor" if is_logging_call(site.via) else clean(read_label(site.access, site.code), 60)
        via = f" (via {clean(site.via, 60)})" if site.via else ""
        return f"{label} at {at}{via} forces a host sync{' and a compile' if compiled else ''}"

    def _how_often(self, site: Site, i: int) -> str:
        """How often ``site`` was read up to step ``i``: every step so far, every step since its
        first (a read after the barrier lands in the next step: step 0 has none), or N of M."""
        since = self._armed.get("mask_index", 0) if site.access in ("mask_index", "mask_assign") else 0
        first, _, seen = self._site_steps[site.id]
        total = i + 1 - min(since, i)
        if seen >= total:
            return "every step so far"
        if first > 0 and seen >= 2 and seen >= i + 1 - first:
            return f"every step since step {first}"
        return f"{seen} of {total} steps so far"

    # -- barriers --------------------------------------------------------------------

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
            runs = self.facts.sig_runs.get(steady.get("sig"))
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
            self.on_unexplained(facts.i)
            self.on_unexplained = None
        self._recompiles += len(judged)
        self._recompile_s += sum(comp.ns for comp, _ in judged) / 1e9
        so_far = (f"{self._recompiles} recompile{'s' if self._recompiles != 1 else ''} so far, "
                  f"{_seconds(self._recompile_s)}")
        if self._growing(judged, facts, so_far):
            return
        self._dynamo_recompiled |= any(cause.cause == CauseName.DYNAMO for _, cause in judged)
        for comp, cause in judged:
            if self._kind_second_step(cause, facts):
                continue
            words = self._explain(cause, facts, clause(cause, facts, self.walk)) if comp.at != "step" else None
            if words is not None:
                key = finding_id(cause.key, self.walk.sites, self.walk.loops, self.walk.dd_leaders)
                self._say(key, f"step {facts.user_step} recompiled: {words}; {so_far}")
                return

    def _kind_second_step(self, cause: Any, facts: StepFacts) -> bool:
        """A graph change at the second step of its inputs, whose first step compiled too: the
        steady graph of a kind of batch after its one-off first (two tasks taking turns). The
        report folds it into the shape finding, so no notice of its own."""
        runs = self.facts.sig_runs.get(facts.sig_id) if facts.sig_id is not None else None
        return (cause.cause == CauseName.GRAPH_CHANGE and cause.key.group == "graph" and facts.phase == "train"
                and runs is not None and runs[0] == 1 and runs[1])

    def _growing(self, judged: list[tuple[Compile, Any]], facts: StepFacts, so_far: str) -> bool:
        """The live side of ``graph_grows`` (a rule of the whole run), as the analysis reads it:
        per input signature, its barrier compiles after warm-up, each graph larger than the
        training graph and the one before; three make a graph that grows. While a run is
        shorter, its notices are held; a compile of those inputs that is not larger, or the last
        larger graph run again from the cache, ends the run (for good), and the first held
        notice is said as the rules say it without growth (what is still held, at the end).
        True when this step's compiles were dealt with."""
        sig = facts.sig_id
        if sig is None or facts.phase != "train":
            return False
        if not any(comp.at == "barrier" for comp, _ in judged):
            run = self._growth.get(sig)
            if run and facts.nodes == run[-1][0]:
                # The last larger graph run again from the cache: the loop's graph changed and
                # stayed (a scalar that became a constant), not one that grows (the analysis
                # reads it so too: the training graph is the size most steps ran).
                self._release(sig)
            return False
        grew = next((comp for comp, cause in judged if cause.rule == "graph_grows"), None)
        run = self._growth.get(sig)
        if grew is None or sig in self._grown_done or (run and (facts.nodes or 0) <= run[-1][0]):
            if run is not None:
                self._release(sig)
            if grew is not None:  # (a graph not larger, or after the run ended: judged without growth)
                self._say_other(grew, facts, so_far)
                return True
            return False
        held = self._other_notice(grew, facts, so_far)
        run = self._growth.setdefault(sig, [])
        run.append((facts.nodes or 0, held))
        if len(run) >= GROWING_GRAPHS:
            sizes = ", ".join(str(n) for n, _ in run[:6]) + (" ..." if len(run) > 6 else "")
            self._say("grows", f"step {facts.user_step} recompiled: same input shapes, a graph larger each time it "
                      f"changed ({sizes} nodes): something kept across steps grows in it (a list of device tensors "
                      f"stacked at a read?)"
                      + (f"; {said}" if (said := graph_line(self._explained.get((facts.i, "barrier")))) else "")
                      + f"; {so_far}")
        return True

    def _other_notice(self, comp: Compile, facts: StepFacts, so_far: str) -> tuple[str, str] | None:
        """What the rules say of a compile without the growth rule: (finding id, line)."""
        other = engine.decide(self.facts.compile_facts(comp, facts.nodes), facts, self.walk, past="graph_grows")
        words = (self._explain(other, facts, clause(other, facts, self.walk))
                 if not self._kind_second_step(other, facts) else None)
        return (finding_id(other.key, self.walk.sites, self.walk.loops, self.walk.dd_leaders),
                f"step {facts.user_step} recompiled: {words}; {so_far}") if words else None

    def _explain(self, cause: Any, facts: StepFacts, words: str | None) -> str | None:
        """A barrier compile's words, with ``--explain``'s line when its new graph was compared."""
        if words is None or cause.cause not in EXPLAINED:
            return words
        said = graph_line(self._explained.get((facts.i, "barrier")))
        return f"{words}; {said}" if said else words

    def _say_other(self, comp: Compile, facts: StepFacts, so_far: str) -> None:
        said = self._other_notice(comp, facts, so_far)
        if said is not None:
            self._say(*said)

    def _release(self, sig: int) -> None:
        """A run of larger graphs is over: short of growing, its first notice is said late."""
        run = self._growth.pop(sig, None)
        self._grown_done.add(sig)
        if run and len(run) < GROWING_GRAPHS and run[0][1] is not None:
            self._say(*run[0][1])

    def _fallback_notice(self, step: Step, facts: StepFacts) -> None:
        """An op without an XLA lowering in a steady step that compiled nothing for it. An op
        first seen with a library call's reads may be the call's (the analysis decides that
        from the whole run): it gets no notice."""
        if new_library_call(facts, self.walk):
            self._call_ops.update(facts.fallback)
        if facts.phase != "train" or facts.ordinal < WARMUP_STEPS or step.barrier_uncached:
            return
        for op in sorted(facts.fallback - self._call_ops):
            n = step.counters.get(op, 0)
            self._say(str(FindingKey.fallback([op])), f"step {facts.user_step}: {clean(op, 60)} has no XLA lowering "
                      f"and runs on the CPU ({n} call{'s' if n != 1 else ''} this step)")

    # -- eager mode ------------------------------------------------------------------

    def _count_graphs(self, step: int, mid: int, at_barrier: int) -> None:
        """Add a training barrier's graphs to its step's; a step that is over is judged: all
        its graphs ran op by op (eager mode), none at a barrier."""
        g = self._graphs
        if step != g[0]:
            self._judge_step()
            g[0], g[1], g[2] = step, 0, 0
        g[1] += mid
        g[2] += at_barrier
        if not self._at.opt_seen:
            self._judge_step()  # without optimizer steps every graph barrier is a step

    def _judge_step(self) -> None:
        step, mid, at_barrier = self._graphs
        if step < WARMUP_STEPS or not mid or at_barrier or not self._op_compiled or self._eager_said:
            return
        self._eager_said = True
        self._say(str(EAGER_KEY), f"step {step} ran op by op (eager mode): {mid} graph{'s' if mid != 1 else ''} "
                  "dispatched one at a time; compile the step with torch_xla.compile")

    def close(self) -> None:
        """The run ended: its last step's barriers are all in."""
        self._judge_step()
        for sig in list(self._growth):
            self._release(sig)


def stderr_line(line: str) -> None:
    """Write one line to the process's stderr now; a closed stderr is not an error."""
    try:
        err = sys.stderr
        if err is not None:
            err.write(line + "\n")
            err.flush()
    except Exception:
        pass
