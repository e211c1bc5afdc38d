"""Where the step barriers are not: findings of the whole run, never a compile's cause.

``no_barrier``: optimizer steps that never reached a step barrier, so the pending graph grows
with every step until a value is read (the recorder marks it after a few such steps; the
live notice says it then). ``eager_mode``: a training step whose graphs all ran op by op,
none at a barrier (:func:`ran_op_by_op`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.terms import WARMUP_STEPS
from xprof.diagnosis.unit import CauseUnit


def ran_op_by_op(mid_graphs: int, barrier_graphs: int, op_compiled: bool) -> bool:
    """A training step ran in eager mode: graphs ran between its barriers (``mid_graphs``),
    none at them, and some op compiled on its own."""
    return bool(mid_graphs) and not barrier_graphs and op_compiled


def eager_notice(step: int, mid_graphs: int) -> str:
    """The live notice of a step run op by op."""
    return (f"step {step} ran op by op (eager mode): {mid_graphs} graph{'s' if mid_graphs != 1 else ''} "
            "dispatched one at a time; compile the step with torch_xla.compile")


def no_barrier_notice(opt_steps: object, backwards: object = None) -> str:
    """The live notice of optimizer steps (or, with no optimizer, backward passes) with no
    barrier yet (the recorder's mark)."""
    ran = (f"{opt_steps} optimizer steps" if opt_steps else f"{backwards} backward passes (training steps with no "
           "optimizer)")
    return (f"{ran} and no step barrier yet: the pending graph grows with every step "
            "until a value is read; end each step with torch_xla.sync() (or iterate an MpDeviceLoader)")



@dataclass
class EagerSteps:
    """The live side of ``eager_mode``: each training step's graphs, run between barriers
    (outside host reads) and at them, added up as its barriers come; a step that is over ran
    in eager mode when :func:`ran_op_by_op` holds (said once, past warm-up)."""

    op_compiled: bool = False
    """An op compiled on its own (``at == "op"``) somewhere in the run so far."""
    step: int = -1
    """The training step in progress."""
    mid: int = 0
    """Its graphs run between barriers, outside host reads."""
    at_barrier: int = 0
    """Its graphs run at its barriers."""
    said: bool = False

    def add(self, step: int, mid: int, at_barrier: int, opt_seen: bool) -> tuple[int, int] | None:
        """Add a training barrier's graphs to its step's: (step, graphs) of a step that is over
        and ran op by op, else None. Without optimizer steps every graph barrier is a step."""
        found = None
        if step != self.step:
            found = self.over()
            self.step, self.mid, self.at_barrier = step, 0, 0
        self.mid += mid
        self.at_barrier += at_barrier
        if not opt_seen:
            found = found or self.over()
        return found

    def over(self) -> tuple[int, int] | None:
        """The step in progress is over: (step, graphs) when it ran op by op (first time only)."""
        if (self.step < WARMUP_STEPS or self.said
                or not ran_op_by_op(self.mid, self.at_barrier, self.op_compiled)):
            return None
        self.said = True
        return self.step, self.mid


NO_BARRIER_ADVICE: dict[str, str] = {
    "no_barrier": (
        "End every training step with torch_xla.sync() (xm.mark_step()), or iterate a "
        "torch_xla MpDeviceLoader, which syncs at each batch. Without a barrier the pending "
        "graph grows with every step until a value is read, and each read compiles and runs "
        "that whole history again."
    ),
    "reads_only": (
        "Without a step barrier each read runs, and compiles, the graph pending since the read "
        "before; when that graph is new each time (a generated sequence and its cache growing a "
        "token a read), every read compiles. Keep the shapes fixed so the graphs repeat and come "
        "from the cache: a cache preallocated at the longest length (transformers: "
        "generate(..., cache_implementation=\"static\")) and prompts padded to a few lengths; in a "
        "loop of your own, end each iteration with torch_xla.sync()."
    ),
    "never_ran": (
        "Their updates are not in the model: lazy ops run only at a barrier or a read. End the "
        "loop with torch_xla.sync() after the last optimizer step (and end every step with one, "
        "unless the loop syncs every N steps on purpose: then sync once more after the loop)."
    ),
}
"""What to change, per kind of its findings."""


EAGER_MODE_ADVICE: dict[str, str] = {
    "eager_mode": (
        "Compile the training step: put forward, loss, backward and optimizer step in one "
        "function and call it through torch_xla.compile (step = torch_xla.compile(step_fn)), "
        "which runs it as one graph; eager mode can stay on for the code around it (data "
        "preparation, logging). Or turn eager mode off (torch_xla.experimental.eager_mode(False)) "
        "so the step is traced lazily up to its barrier."
    ),
}
"""What to change, per kind of its findings."""


NO_BARRIER = CauseUnit(
    CauseName.NO_BARRIER, label='no step barrier', colour='#862e9c',
    means=('optimizer steps that never reached a step barrier (no `torch_xla.sync()`, no device loader), so each '
        'host read compiled every step since the start (`no_barrier`); optimizer steps after the last barrier '
        'that nothing read never ran (`never_ran`); a run with no barrier and no optimizer step whose graphs '
        'all ran at host reads (`reads_only`: `model.generate()`)'),
    fix=('end each step with `torch_xla.sync()` (or iterate an `MpDeviceLoader`)'),
    fix_safety=("torch_xla.sync() at the end of each step runs the same ops, cut at each step's end: the same "
        'results.'),
    advice=NO_BARRIER_ADVICE,
    finding_only=True,
)


EAGER_MODE = CauseUnit(
    CauseName.EAGER_MODE, label='eager mode', colour='#0c8599',
    means=('a training step ran op by op under torch_xla.experimental.eager_mode(True): every op compiled on its '
        'first call and dispatched alone; its cost is not measured (no compiled step to compare with)'),
    fix=('`torch_xla.compile` around the step'),
    fix_safety=('torch_xla.compile around the step traces the same ops: the same results.'),
    advice=EAGER_MODE_ADVICE,
    finding_only=True,
)
