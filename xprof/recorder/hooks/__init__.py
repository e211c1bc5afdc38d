"""The hooks ``watch()`` installs, and the bookkeeping that takes every one of them out.

- the step barrier: ``torch_xla._XLAC._xla_step_marker``, which every barrier ends in
  (``xm.mark_step``, ``torch_xla.sync``, ``xm.optimizer_step(barrier=True)``, each
  ``MpDeviceLoader`` batch, the end of ``torch_xla.step()`` / ``torch_xla.compile``);
- host reads of an XLA tensor's value: ``Tensor.item``, ``tolist``, ``numpy``, ``cpu``,
  ``to`` (to the CPU), ``__bool__``, ``__int__``, ``__float__``, ``__index__``,
  ``__repr__`` (so ``print`` and ``str``), ``__format__`` (f-strings), ``__array__``;
- step closures: callbacks given to ``xm.add_step_closure`` run with reads marked deferred;
- step inputs: batches from ``DataLoader`` iterators and ``PerDeviceLoader``
  (``MpDeviceLoader``), and CPU tensors moved to the device with ``.to``/``.cuda``-style
  calls.

One module for each thing patched: the barrier (:mod:`~xprof.recorder.hooks.barrier`), host
reads and step closures (:mod:`~xprof.recorder.hooks.reads`), loaders
(:mod:`~xprof.recorder.hooks.loaders`), the evidence of what a step is and where a warning
came from (:mod:`~xprof.recorder.hooks.evidence`), data-dependent shapes
(:mod:`~xprof.recorder.hooks.data_dependent`), torch.compile
(:mod:`~xprof.recorder.hooks.dynamo`), ``xmp.spawn`` under a notebook's watch
(:mod:`~xprof.recorder.hooks.spawn`); the patches and their restore
(:mod:`~xprof.recorder.hooks.patching`). ``watch()`` takes them all from here.

Each wrapper checks ``rec.active`` first, so a wrapper left behind by someone else's
later patch turns into a plain pass-through once the watch has ended.
"""


from __future__ import annotations

from xprof.recorder.hooks.barrier import install_barrier
from xprof.recorder.hooks.data_dependent import DATA_DEPENDENT, MASK_INDEX_COUNTER, install_data_dependent
from xprof.recorder.hooks.dynamo import (
    DYNAMO_LOGGER,
    dynamo_guard_counts,
    dynamo_guard_failures,
    install_dynamo,
    install_dynamo_limit,
)
from xprof.recorder.hooks.evidence import (
    install_optimizer_steps,
    install_phase_evidence,
    install_warning_location,
)
from xprof.recorder.hooks.loaders import install_loaders, make_next
from xprof.recorder.hooks.patching import Patches, posing_as, user_frames_only
from xprof.recorder.hooks.reads import (
    HOST_READS,
    install_closures,
    install_host_reads,
    install_sync_multi,
    make_reader,
    make_to,
)
from xprof.recorder.hooks.spawn import RankWatch, install_spawn

__all__ = [
    "DATA_DEPENDENT",
    "DYNAMO_LOGGER",
    "HOST_READS",
    "MASK_INDEX_COUNTER",
    "Patches",
    "RankWatch",
    "dynamo_guard_counts",
    "dynamo_guard_failures",
    "install_barrier",
    "install_closures",
    "install_data_dependent",
    "install_dynamo",
    "install_dynamo_limit",
    "install_host_reads",
    "install_loaders",
    "install_optimizer_steps",
    "install_phase_evidence",
    "install_spawn",
    "install_sync_multi",
    "install_warning_location",
    "make_next",
    "make_reader",
    "make_to",
    "posing_as",
    "user_frames_only",
]
