"""``xmp.spawn`` under a ``watch()`` in a notebook: each process it starts records its own rank.

In a notebook, ``with xprof.watch("run.json"): xmp.spawn(fn, start_method="fork")`` puts the
watch around processes whose steps it cannot see. While such a watch records, ``xmp.spawn``
(and ``torch_xla.launch``, which calls it) hands the processes ``fn`` wrapped in
:class:`RankWatch`, which runs it inside a ``watch()`` of the same path and options: each
process writes ``run.rankN.json`` and hands it to the kernel (:mod:`xprof.notebook`). One
``watch()`` records per process: where the ranks are threads of one process (torch_xla's CPU
backend, a TPU v2/v3 host), the other threads run ``fn`` as it is. Only in a notebook kernel:
a script's ``watch()`` (and ``xprof run``) leaves ``xmp.spawn`` alone.
"""

from __future__ import annotations

import sys
from typing import Any

from xprof.recorder.hooks.patching import Patches, posing_as

XMP = "torch_xla.distributed.xla_multiprocessing"


class RankWatch:
    """``fn(index, *args)`` inside ``watch(path, **options)``; picklable when ``fn`` is (a
    process started with ``fork`` or ``spawn`` gets it through pickle)."""

    def __init__(self, fn: Any, path: str, options: dict[str, Any], watch: Any, active: Any) -> None:
        self.fn = fn
        self.path = path
        self.options = options
        self.watch = watch
        """The ``watch`` class and its ``active()`` (passed in: this module is below them)."""
        self.active = active

    def __call__(self, index: int, *args: Any, **kwargs: Any) -> Any:
        if self.active() is not None:  # another thread of this process records already
            return self.fn(index, *args, **kwargs)
        w = self.watch(self.path, **self.options)
        w.spawned = True
        with w:
            return self.fn(index, *args, **kwargs)


def install_spawn(w: Any, patches: Patches, active: Any) -> None:
    """Wrap ``xmp.spawn``'s function while ``w`` records, when torch_xla's multiprocessing
    module is loaded (the notebook imported it to call it)."""
    xmp = sys.modules.get(XMP)
    if xmp is None or not callable(getattr(xmp, "spawn", None)):
        return
    original = xmp.spawn

    def spawn(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if w.recorder is not None and w.recorder.active and not isinstance(fn, RankWatch):
            fn = RankWatch(fn, w.requested_path, w.rank_options(), type(w), active)
            w.spawned_ranks = True
        return original(fn, *args, **kwargs)

    patches.set(xmp, "spawn", posing_as(spawn, original, "spawn"))
