"""Host reads: ``.item()``, ``print(t)``, ``if t > x:`` ran the device early, compiled a graph
of their own, or took ops out of the barrier's graph."""

from __future__ import annotations

import os
import re

from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.evidence import is_checkpoint_call, is_condition, is_logging_call
from xprof.diagnosis.facts import CompileFacts, StepFacts, Walk
from xprof.diagnosis.keys import FindingKey
from xprof.diagnosis.mechanisms import call_key, finding_id, is_dynamo, mechanism
from xprof.diagnosis.notices import clean, where
from xprof.diagnosis.rules.fallback import fallback_call
from xprof.diagnosis.rules.passes import eval_pass
from xprof.diagnosis.rules.shapes import new_inputs, shape_cause
from xprof.diagnosis.terms import DATA_DEPENDENT_ACCESSES
from xprof.diagnosis.unit import CauseUnit
from xprof.runfile import Site


def in_closure(c: CompileFacts, step: StepFacts, walk: Walk) -> Cause | None:
    """``step_closure``: compiled inside a read in an ``xm.add_step_closure`` callback: it runs
    after the barrier, on a small graph of its own (compiled once, cached afterwards)."""
    if c.read is None or not c.read.deferred:
        return None
    site = c.read.site
    return Cause(CauseName.STEP_CLOSURE, FindingKey("closure", str(site)), site=site, evidence=(
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
    return Cause(CauseName.IMPLICIT_SYNC, FindingKey.sync(site), site=site,
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
    return Cause(CauseName.IMPLICIT_SYNC, FindingKey.sync(b.site), site=b.site, evidence=(
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
        return Cause(CauseName.IMPLICIT_SYNC, FindingKey.sync(site), site=site, evidence=(
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
    return Cause(CauseName.IMPLICIT_SYNC, FindingKey.sync(new_sites[0]), site=new_sites[0], leftovers=bool(grown),
                 evidence=("same inputs as before, but a host read in this step materialized a tensor, "
                           "so the graph at the barrier changed" + grown))


def read_notice(cause: Cause, step: StepFacts, walk: Walk) -> str:
    site = walk.sites.get(cause.site if cause.site is not None else -1)
    what = f"{clean(site.via, 60)} at {where(site)}" if site is not None and site.via else f"the read at {where(site)}"
    return f"{what}, run in this step, took ops out of the barrier's graph"


def sync_kind(access: str, code: str, via: str | None) -> str:
    """What the user wrote, from the hooked method, the line's code and the library path."""
    if access in DATA_DEPENDENT_ACCESSES:
        return "data_dependent"
    if via:
        low = via.lower()
        if is_logging_call(via):
            return "log"  # the standard logging module formatting a tensor (logger.info("%s", loss))
        if "grad_scaler" in low or "gradscaler" in low:
            return "grad_scaler"
        if is_checkpoint_call(via):
            return "checkpoint"
        return "library_sync"
    if access in ("repr", "format") and "print(" in code:
        return "print"
    if access in ("bool", "int", "float", "index"):
        return "tensor_condition" if is_condition(access, code) else "scalar"
    return {"item": "item", "tolist": "tolist", "numpy": "numpy", "cpu": "to_cpu",
            "to_cpu": "to_cpu", "repr": "repr", "format": "format",
            "materialize": "materialize"}.get(access, "item")



KIND_WORDS = {
    "item": ".item()", "print": "print of a tensor", "format": "f-string of a tensor",
    "repr": "repr() of a tensor", "tensor_condition": "a tensor in a Python condition",
    "scalar": "int()/float() of a tensor", "tolist": ".tolist()", "numpy": ".numpy()",
    "to_cpu": ".cpu() / .to('cpu')", "grad_scaler": "GradScaler.step",
    "materialize": "materializing tensors (_xla_sync_multi)",
    "checkpoint": "checkpoint save", "library_sync": "a library call", "log": "logging a tensor",
}



DD_WORDS = {
    "mask_index": "Boolean-mask indexing", "mask_assign": "Boolean-mask assignment (t[mask] = v)",
    "nonzero": "nonzero()", "masked_select": "masked_select()",
    "unique": "unique()", "argwhere": "argwhere()", "repeat_interleave": "repeat_interleave()",
    "where": "torch.where(mask) (one argument: nonzero)",
    "index": "A tensor used as a slice bound",
}


READ_LABEL = {
    "item": ".item()", "tolist": ".tolist()", "numpy": ".numpy()", "cpu": ".cpu()",
    "to_cpu": ".to('cpu')", "bool": "a tensor used as a condition", "int": "int() of a tensor",
    "float": "float() of a tensor", "index": "a tensor used as an index",
    "repr": "printing a tensor", "format": "formatting a tensor", "materialize": "materializing tensors",
    "mask_index": "boolean-mask indexing", "mask_assign": "boolean-mask assignment",
    "nonzero": "nonzero()", "masked_select": "masked_select()",
    "unique": "unique()", "argwhere": "argwhere()", "repeat_interleave": "repeat_interleave()",
    "where": "torch.where(mask)",
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
    return READ_LABEL.get(kind, kind)


def read_words(site: Site, compiled: bool, loops: frozenset[tuple[str, int]]) -> str:
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
        name = site.via if (site.file, site.line) not in loops else (site.inner or site.via)
        return f"{clean(name, 80)} (called from {at}) reads values on the host{graph}"
    label = "logging a tensor" if is_logging_call(site.via) else clean(read_label(site.access, site.code), 60)
    via = f" (via {clean(site.via, 60)})" if site.via else ""
    return f"{label} at {at}{via} forces a host sync{' and a compile' if compiled else ''}"


class ReadSites:
    """The live side of a read finding's pattern: which steps each site read in, and the hooks
    armed mid-run (the mask hooks, once ``aten::nonzero`` first ran: their reads are seen from
    the next step on, so "every step so far" counts from there)."""

    def __init__(self) -> None:
        self._steps: dict[int, tuple[int, int, int]] = {}
        """Read site -> (first step it read in, last, how many steps)."""
        self.armed: dict[str, int] = {}
        """A hook armed mid-run (``mask_index``) -> the first step it saw whole."""

    def read(self, site: int, i: int) -> None:
        """``site`` read in step ``i``."""
        first, last, seen = self._steps.get(site, (i, -1, 0))
        if i != last:
            self._steps[site] = (first, i, seen + 1)

    def how_often(self, site: int, access: str, i: int) -> str:
        """How often ``site`` was read up to step ``i``: every step so far, every step since its
        first (a read after the barrier lands in the next step: step 0 has none), or N of M."""
        first, _, seen = self._steps[site]
        since = self.armed.get("mask_index", 0) if access in ("mask_index", "mask_assign") else 0
        total = i + 1 - min(since, i)
        if seen >= total:
            return "every step so far"
        if first > 0 and seen >= 2 and seen >= i + 1 - first:
            return f"every step since step {first}"
        return f"{seen} of {total} steps so far"


def said_live(site: Site | None) -> bool:
    """A read the live notices name: not torch.compile's own, nor a checkpoint's copy."""
    return site is not None and not is_dynamo(site) and not is_checkpoint_call(site.via)


IMPLICIT_SYNC_ADVICE: dict[str, str] = {
    "item": (
        "Don't read the value on the host mid-step: keep it on the device and log it "
        "through xm.add_step_closure(fn, (tensor,)) (runs after the barrier, no extra "
        "execution; one added after a loop's last barrier waits for the next, so end the loop "
        "with torch_xla.sync()). If the number feeds the step's own math (a clip scale, a "
        "learning-rate factor), compute it on the device instead: torch.clamp(max_norm / "
        "(norm + 1e-6), max=1.0) rather than min(1.0, max_norm / norm.item())."
    ),
    "log": (
        "The logging module formats the tensor (str(t)) on the host when it emits the record: "
        "the value is read mid-step, whether the message is an f-string or lazy %-formatting. "
        "Log it through xm.add_step_closure(lambda t: logger.info(\"loss %s\", t), (loss,)) (runs "
        "after the barrier, no extra execution)."
    ),
    "print": (
        "Printing a device tensor copies it to the host and runs its graph early. Log it "
        "with xm.add_step_closure(lambda t: print(t), (loss,))."
    ),
    "format": (
        "Formatting a device tensor (f-string, logging) reads its value on the host. Move the "
        "logging into xm.add_step_closure."
    ),
    "repr": (
        "repr()/str() of a device tensor reads its value on the host. Log through "
        "xm.add_step_closure."
    ),
    "tensor_condition": (
        "Python control flow on a device tensor (if loss > x:) waits for its value. Keep the "
        "decision on the device (torch.where, masking) or check it in a step closure. A "
        "decision the host must take (early stopping's break) can wait for a barrier: "
        "torch_xla.sync() just before the if runs the pending ops as a graph of their own, "
        "cached after, so the read compiles at most a tiny graph for the comparison."
    ),
    "scalar": (
        "int()/float() of a device tensor reads its value on the host. Keep it as a tensor, "
        "or read it in xm.add_step_closure."
    ),
    "tolist": (
        ".tolist() copies the tensor to the host and runs its graph early. Do it in "
        "xm.add_step_closure."
    ),
    "numpy": (
        ".numpy() needs the value on the host. Do it after the barrier (xm.add_step_closure)."
    ),
    "to_cpu": (
        "Moving a device tensor to the CPU mid-step runs its graph early. Move it after the "
        "barrier (xm.add_step_closure)."
    ),
    "ready_read": (
        "It ran no graph early (the value was already computed: at the barrier before it, or "
        "by an earlier read), but the host waited for the device to finish that graph, time it "
        "could spend tracing the next step. "
        "Read it in xm.add_step_closure(fn, (tensor,), run_async=True) so the host does not wait. "
        "Those closures run after the barrier on a thread of their own, and nothing waits for "
        "it: the last step's may not have run when the loop ends, so leave run_async off for a "
        "value the code right after the loop needs."
    ),
    "materialize": (
        "Materializing tensors mid-step (xm.unlazy, torch_xla._XLAC._xla_sync_multi) runs their "
        "graph early, apart from the step's. Do it after the barrier, or not at all outside "
        "benchmarks."
    ),
    "library_sync": (
        "A library function called from this line reads a tensor's value on the host."
    ),
    "grad_scaler": (
        "torch.amp.GradScaler(\"xla\").step reads its inf check (found_inf) on the host at every "
        "step, so the device runs early once a step (torch_xla 2.9 has no device-side scaler: "
        "its syncfree optimizers still take that host value). Loss scaling is only needed for "
        "float16: with torch.autocast(\"xla\", dtype=torch.bfloat16), the usual dtype on TPU, "
        "drop the GradScaler and call optimizer.step() directly."
    ),
    "checkpoint": (
        "Saving a checkpoint copies tensors to the host; that is expected when it happens "
        "every few hundred steps. Use xm.save() and save less often if it shows up in step time."
    ),
    "checkpoint_mid_step": (
        "The save ran before the step's barrier, so the tensors it copies were still pending: "
        "reading them ran parts of the step's graph early, each compiled on its own. Save right "
        "after torch_xla.sync() (xm.mark_step()), when they are computed and only the copy is "
        "left; xm.save() there as well."
    ),
    "growing_read": (
        "Each read of it in a step runs a longer graph: everything since the last barrier that "
        "is still pending (earlier reads' forward passes, random numbers, kept log-probs) "
        "piles up, and each new length compiles. Put torch_xla.sync() right after the read, "
        "so each read runs the same small graph, cached after the first; or run that part "
        "(acting in an environment, a sampling loop) on the CPU."
    ),
    "own_barrier": (
        "The library call syncs by itself (a collective's rendezvous, a metrics gather) and runs "
        "the ops pending at that point as a graph of its own: compiled once per shape, cached "
        "after. Call it where little is pending (after the pass's own barrier), and not every "
        "step if it is only for logging."
    ),
}
"""What to change, per kind of its findings."""


STEP_CLOSURE_ADVICE: dict[str, str] = {
    "deferred_read": (
        "Nothing to fix: a read inside xm.add_step_closure runs after the barrier. Its first "
        "call compiles the small graph it reads (e.g. torch.isnan(loss)); later calls reuse it."
    ),
}
"""What to change, per kind of its findings."""


IMPLICIT_SYNC = CauseUnit(
    CauseName.IMPLICIT_SYNC, label='host read', colour='#7048e8',
    means=('a host read (`.item()`, `print(t)`, f-strings, `if t > x`, `.tolist()`, `.cpu()`, `GradScaler.step`, '
        "`torch.save`/`xm.save`, a library call's reads such as `ReduceLROnPlateau.step(loss_tensor)` or "
        "`model.generate()`, one finding per call, named with the library's own lines) compiled and ran the "
        'graph early; a read right after the barrier that ran nothing "waits for the device" instead'),
    fix=('`xm.add_step_closure` (`run_async=True` for a read that only waits), log every N steps, bf16 '
        'autocast without a `GradScaler`; for a library, the argument its line uses (`clip_grad_norm_(..., '
        "error_if_nonfinite=True)`), its input checks (torchmetrics' `validate_args=False`) or a size it "
        "works out from the data when not given (PyG's pooling: `dim_size = int(index.max()) + 1`)"),
    fix_safety=('Deferring a read (xm.add_step_closure) or reading every N steps changes when a value is seen, not '
        'what the model computes; a Python branch on a tensor rewritten with torch.where computes both sides, '
        'the same result where both are defined.'),
    advice=IMPLICIT_SYNC_ADVICE,
    notice=read_notice,
    explained=True,
)


STEP_CLOSURE = CauseUnit(
    CauseName.STEP_CLOSURE, label='step closure', colour='#74b816',
    means=('a read inside an `xm.add_step_closure` callback compiled its own small graph (deferred, once)'),
    fix=('nothing: an info note with its line'),
    fix_safety=('Nothing to apply.'),
    advice=STEP_CLOSURE_ADVICE,
)
