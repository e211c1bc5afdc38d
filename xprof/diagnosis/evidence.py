"""Evidence the rules read, in plain Python: what a library call is, how signatures compare,
whether a read's graphs grew. Shared by the analysis and the live notices."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xprof.diagnosis.terms import GROWING_READS
from xprof.runfile import base_input_name

if TYPE_CHECKING:
    from xprof.diagnosis.signatures import SigIndex


def dynamo_func(func: str, file: Any, line: Any) -> str:
    """A function dynamo compiled, as the user knows it: ``inner`` in torch's own
    ``external_utils.py`` is the wrapper torch.compile puts around a module's forward."""
    base = os.path.basename(str(file)) if file else ""
    if func == "inner" and str(file or "").replace("\\", "/").endswith("_dynamo/external_utils.py"):
        return "the compiled module's forward"
    return f"{func}() ({base}:{line})" if base else f"{func}()"


_CONDITION = re.compile(r"^\s*(if|elif|while|assert)\b|\bif\b.*\belse\b")


def is_condition(access: str, code: str) -> bool:
    """A host read that is a Python condition on a tensor (``if loss > x:``, ``while``, a
    conditional expression): a tensor made a Python bool or number on such a line."""
    return access in ("bool", "int", "float", "index") and bool(_CONDITION.search(code))


def grew(nodes: Sequence[int | None]) -> bool:
    """Whether one read site's graphs in one step grew from read to read: :data:`GROWING_READS`
    or more, every size known, none smaller than the one before and the last larger than the
    first (an RL episode's reads: 25, 31, 35 ... nodes; not a check over each parameter: 40,
    39, 37, 36). Each read then ran a longer graph: the ops since the barrier piled up."""
    if len(nodes) < GROWING_READS or any(n is None for n in nodes):
        return False
    known = [int(n) for n in nodes if n is not None]
    return known[-1] > known[0] and all(b >= a for a, b in zip(known, known[1:]))


STEP_BARRIER_APIS = (
    "torch_xla.core.xla_model.mark_step", "torch_xla.torch_xla.sync", "torch_xla.core.xla_model.optimizer_step",
    "torch_xla.distributed.parallel_loader.", "torch_xla.torch_xla.step", "torch_xla.torch_xla.compile",
    "contextlib.", "torch_xla.debug.profiler.StepTrace",
)
"""The calls a loop asks for its barriers with (``torch_xla.step()`` is a context manager)."""


EVALUATING_CALLS = (
    "transformers.trainer.Trainer.evaluation_loop", "transformers.trainer.Trainer.prediction_loop",
    "transformers.trainer.Trainer.evaluate",
)
"""Library functions that run an evaluation pass themselves, its barriers included."""


def is_own_barrier_call(via: object, chain: Sequence[str] = ()) -> bool:
    """A barrier site's library call that syncs by itself (``xm.mesh_reduce``'s rendezvous,
    accelerate's ``gather_for_metrics``): none of the loop's step APIs, and not a library
    that runs the evaluation itself (the HF Trainer's). The analysis and the live notices
    alike."""
    if not isinstance(via, str) or not via or via.startswith(STEP_BARRIER_APIS):
        return False
    return not any(str(n).startswith(EVALUATING_CALLS) for n in (via, *chain))


def of_other_kinds(forms: Iterable[tuple[Sequence[int], str]]) -> bool:
    """An input's (shape, dtype) forms differ in rank or dtype, not only in sizes: batches of
    different kinds (a task's targets: class ids [16] int64, regression targets [16, 3]
    float32). The analysis' ``input_kinds`` and the live notices alike."""
    ranks, dtypes = set(), set()
    for shape, dtype in forms:
        ranks.add(len(shape))
        dtypes.add(str(dtype))
    return len(ranks) > 1 or len(dtypes) > 1


def is_checkpoint_call(via: object) -> bool:
    """A read inside a checkpoint save (``torch.save``, a ``state_dict``): the report's
    ``checkpoint`` kind, information when rare; the live notices leave it to the report."""
    if not isinstance(via, str):
        return False
    low = via.lower()
    return "serialization" in low or ".save" in low or "checkpoint" in low or "state_dict" in low


def is_logging_call(via: object) -> bool:
    """A read made by the standard logging module formatting the user's tensor
    (``logger.info("loss %s", loss)``): the user's own read, not a library's."""
    return isinstance(via, str) and via.startswith("logging.")


def bucket_step(values: Sequence[int]) -> int:
    """The step every one of ``values`` (an input's lengths) is a multiple of, when that reads
    as padding to buckets (at least 8, or 16 for two lengths: lengths padded to the longest
    of each batch rarely share one), else 0. The analysis and the live notices alike."""
    if len(values) < 2:
        return 0
    g = 0
    for v in values:
        g = math.gcd(g, int(v))
    return g if g >= (16 if len(values) == 2 else 8) else 0


def micro_batch_change(sig: Sequence[tuple[str, Sequence[int], str, str]],
                       seen: Iterable[Sequence[tuple[str, Sequence[int], str, str]]],
                       index: SigIndex | None = None) -> tuple[int, int, str] | None:
    """(micro-batches before, now, the input) when this signature differs from a seen one
    only in how many micro-batches the step held (``input_ids``, ``input_ids#2`` ...: a
    gradient-accumulation window cut short at an epoch's end), every shape seen before.
    ``index``: ``seen`` as indexed (caught up with it): only the seen signatures of the same
    base names are looked at, the latest first."""
    now = _base_counts(sig)
    if not now:
        return None
    shapes = {(base_input_name(n), tuple(shape)) for n, shape, _, _ in sig}
    if index is not None:
        candidates = ((index.counts[k], index.base_shapes[k]) for k in reversed(index.same_bases(frozenset(now))))
    else:
        candidates = ((_base_counts(prev), {(base_input_name(n), tuple(shape)) for n, shape, _, _ in prev})
                      for prev in reversed(list(seen)))
    for was, prev_shapes in candidates:
        if set(was) != set(now) or was == now:
            continue
        if shapes <= prev_shapes:
            base = max(now, key=lambda b: abs(was[b] - now[b]))
            return was[base], now[base], base
    return None


def _base_counts(s: Sequence[tuple[str, Sequence[int], str, str]]) -> dict[str, int]:
    """How many inputs of each base name a signature has (``x#2`` is ``x``)."""
    out: dict[str, int] = {}
    for n, _, _, _ in s:
        b = base_input_name(n)
        out[b] = out.get(b, 0) + 1
    return out


def added_inputs(sig: Sequence[tuple[str, Sequence[int], str, str]],
                 earlier: Iterable[Sequence[tuple[str, Sequence[int], str, str]]],
                 index: SigIndex | None = None) -> list[str]:
    """The inputs ``sig`` has beyond the first of ``earlier`` whose every input it has, with
    the same shape (a step's own inputs and another pass's; read the other way round, an
    input moved in some steps only); empty when none is. The analysis and the live notices
    alike. ``index``: ``earlier`` as indexed (caught up with it): only the signatures that
    may lie within ``sig`` are looked at."""
    mine = {n: tuple(shape) for n, shape, _, _ in sig}
    if index is not None:
        known = (index.items[k] for k in index.within(mine))
    else:
        known = ({n: tuple(shape) for n, shape, _, _ in prev} for prev in earlier)
    for theirs in known:
        if theirs and len(mine) > len(theirs) and all(mine.get(n) == shape for n, shape in theirs.items()):
            return [n for n in mine if n not in theirs]
    return []


def listed_inputs(names: Sequence[str], most: int = 3) -> str:
    """``vx, vy`` for ``vx, vy, vx#2, vy#2`` (a micro-batch's copy is the same input), the
    first ``most``, and how many more."""
    bases = list(dict.fromkeys(base_input_name(n) for n in names))
    return ", ".join(bases[:most]) + (f" and {len(bases) - most} more" if len(bases) > most else "")
