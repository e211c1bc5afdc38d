"""Judging xprof's summary against torch_xla's truth, mechanically.

The truth makes *claims* (each one a problem torch_xla's own output shows):
- ``no_barrier``: no barrier ran (``MarkStep`` 0) and graphs did: every graph ran at a read;
- ``read``: a read site with at least ``LOOP`` (3) forced executions (a read in a loop; a one-off
  read, e.g. a final accuracy, or a mask read that forces its own graph and the next, is no claim);
- ``fallback``: an op counted as ``aten::*`` (run on the CPU) at least ``LOOP`` times;
- ``recompiles``: compiles after warm-up (``Truth.late_compiles`` >= 1).

xprof *matches* a claim when:
- ``no_barrier``: a finding of cause ``no_barrier`` (or ``reads_only``) names a frame of a read's stack;
- ``read``: a finding names a frame of the read's stack (file name and line), or, for a read whose
  printed stack holds no frame of the script (torch_xla prints a few innermost frames), any
  ``library`` finding (``right*``: the owner is not checked); a read at least
  once per barrier that only minor findings name is *not* matched (a read every step is never minor);
- ``fallback``: a finding's id or title names the op, or, for a value-dependent op (``nonzero``,
  ``masked_select``, ``unique``...), a ``data_dependent`` finding exists;
- ``recompiles``: a finding with compiles >= 1 (its cause is not checked: torch_xla's output says
  that a graph compiled, not why; such a verdict is ``right*``).

A major (not minor) finding is *unsupported* when the truth denies it: a shape or graph finding
with compiles while the truth has no late compile; ``no_barrier`` while barriers ran; a CPU
fallback finding while no ``aten::*`` counter moved; a read finding whose lines are in no read's
stack while every host read forced an execution (else it may be a read that ran nothing, which
has no frame in torch_xla's output: *unverifiable*, noted only).

Verdict: ``right`` when every claim is matched and no major finding is unsupported (a script with
no claim: xprof has no major finding, "nothing stands out"); ``right*`` the same with a
``recompiles`` claim whose cause is unchecked; else ``miss``; ``script-error`` when the script
failed on its own, ``xprof-failed`` when xprof gave no summary (``timeout`` instead of either
when a run passed the entry's time limit; ``not-run`` when the entry has not been run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.referee.truth import Site, Truth
from benchmarks.referee.xprof_side import Named, Said

VALUE_DEPENDENT = ("aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique2",
                   "aten::masked_scatter", "aten::index_put_")
UNCHECKED = "unchecked: torch_xla printed no frame of the script for this library read"
LOOP = 3
"""Forced executions at one site (or calls of one CPU op) that make it a problem of the loop."""
SHAPE_CAUSES = {"input_shape", "graph_change", "dynamo", "data_dependent", "input_sharding"}
READ_CAUSES = {"implicit_sync", "library", "step_closure", "reads_only"}


@dataclass(frozen=True)
class Claim:
    kind: str
    subject: str
    count: int

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} x{self.count}" if self.subject else f"{self.kind} x{self.count}"


@dataclass
class Judgement:
    verdict: str
    compiles_equal: bool | None
    executions_equal: bool | None
    claims: list[Claim] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _frames(truth: Truth, site: Site) -> set[tuple[str, int]]:
    """The read's own line and the library frames inside it (its owner), not the callers above it."""
    stack = truth.stacks.get(site, [])
    inner = stack[:stack.index(next(f for f in stack if f.file == site.file and f.line == site.line)) + 1] \
        if site.user and any(f.file == site.file and f.line == site.line for f in stack) else stack[:1]
    return {(Path(f.file).name, f.line) for f in inner} | {(Path(site.file).name, site.line)}


def claims(truth: Truth) -> list[Claim]:
    out: list[Claim] = []
    if truth.barriers == 0 and truth.executions > 0:
        out.append(Claim("no_barrier", "", truth.executions))
    else:
        out += [Claim("read", str(s), n) for s, n in truth.reads.most_common() if n >= LOOP]
    out += [Claim("fallback", op, n) for op, n in sorted(truth.fallbacks.items()) if n >= LOOP]
    if truth.late_compiles:
        out.append(Claim("recompiles", "", truth.late_compiles))
    return out


def _site(truth: Truth, subject: str) -> Site:
    return next(s for s in truth.reads if str(s) == subject)


def _matches(claim: Claim, truth: Truth, said: Said) -> tuple[bool, str]:
    """Whether ``said`` matches ``claim``, and a note (empty when nothing to add)."""
    if claim.kind == "no_barrier":
        named = {ln for f in said.findings if f.cause in ("no_barrier", "reads_only") for ln in f.lines}
        if not any(f.cause in ("no_barrier", "reads_only") for f in said.findings):
            return False, "no no_barrier finding"
        stacks = set().union(*(_frames(truth, s) for s in truth.reads)) if truth.reads else set()
        return (not stacks or bool(named & stacks)), "" if named & stacks else "no_barrier names no read's line"
    if claim.kind == "read":
        site = _site(truth, claim.subject)
        frames = _frames(truth, site)
        naming = [f for f in said.findings if set(f.lines) & frames]
        if not naming and not site.user and any(f.cause == "library" for f in said.findings):
            return True, UNCHECKED
        if not naming:
            return False, ""
        if all(f.minor for f in naming) and claim.count >= max(truth.barriers, 2):
            return False, f"{claim.subject} named only as minor though it read at every barrier"
        return True, ""
    if claim.kind == "fallback":
        op = claim.subject
        if any(f.id == f"fallback:{op}" or op in f.title or op.split("::")[-1] in f.title for f in said.findings):
            return True, ""
        return (op in VALUE_DEPENDENT and any(f.cause == "data_dependent" for f in said.findings)), ""
    return any(f.compiles >= 1 for f in said.findings), ""


def _unsupported(f: Named, truth: Truth) -> tuple[str | None, str | None]:
    """(why ``f`` is unsupported, or None; a note when it cannot be checked)."""
    if f.cause in SHAPE_CAUSES and f.compiles >= 1 and not truth.late_compiles:
        return f"{f.id}: {f.compiles} compiles of {f.cause} but torch_xla shows no compile after warm-up", None
    if f.cause == "no_barrier" and truth.barriers > 0:
        return f"{f.id}: no barrier said, {truth.barriers} barriers ran", None
    if f.cause == "cpu_fallback" and not truth.fallbacks:
        return f"{f.id}: CPU fallback said, no aten:: counter moved", None
    if f.cause in READ_CAUSES and f.lines:
        stacks = set().union(*(_frames(truth, s) for s in truth.reads)) if truth.reads else set()
        if not set(f.lines) & stacks:
            at = f"{f.lines[0][0]}:{f.lines[0][1]}"
            if truth.scalar_reads + truth.transfers > sum(truth.reads.values()):
                return None, f"{f.id}: a read at {at} that forced no execution (unverifiable)"
            return f"{f.id}: a read at {at} where torch_xla shows none", None
    return None, None


def judge(truth: Truth | None, said: Said) -> Judgement:
    if said.failure is not None:
        return Judgement("xprof-failed", None, None, notes=[said.failure])
    if truth is None:
        return Judgement("no-truth", None, None)
    j = Judgement("right", said.compiles == truth.compiles, said.executions == truth.executions, claims(truth))
    if truth.status != "ok":
        j.verdict = "script-error"
        j.notes.append(truth.error.strip().splitlines()[-1] if truth.error else truth.status)
        return j
    unchecked = False
    for c in j.claims:
        ok, note = _matches(c, truth, said)
        if not ok:
            j.missed.append(str(c) + (f" ({note})" if note else ""))
        elif note == UNCHECKED:
            unchecked = True
            j.notes.append(f"{c}: matched by a library finding; {note}")
    for f in said.major:
        why, unverifiable = _unsupported(f, truth)
        if why:
            j.unsupported.append(why)
        if unverifiable:
            j.notes.append(unverifiable)
    if j.missed or j.unsupported:
        j.verdict = "miss"
    elif unchecked or any(c.kind == "recompiles" for c in j.claims):
        j.verdict = "right*"
    return j
