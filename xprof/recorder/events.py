"""What the hooks queue for the writer thread: the kinds of event (the first item of each
queued tuple) and the inputs as the hooks saw them and as they are recorded.
"""

from __future__ import annotations

from typing import Any

InputEntry = tuple[str, tuple[int, ...], str, str] | tuple[str, tuple[int, ...], str, str, str]
"""``(name, shape, dtype, source)``, and in an SPMD run the sharding spec last."""
RawInput = tuple[str, Any, Any, str] | tuple[str, Any, Any, str, str]
"""``(name, shape, dtype, source)`` as the hook saw it: ``torch.Size`` and ``torch.dtype``
objects, named and deduplicated on the writer thread; an SPMD run adds the sharding spec
read at the barrier."""

MESH_KEYS = ("mesh_shape", "axis_names")

STEP_EVENT = 0
SYNC_EVENT = 1
MARK_EVENT = 2
RECORD_EVENT = 3
LAZY_EVENT = 4
"""A record made on the writer thread by a callable given the index of the step it lands
before (``--explain``'s graphs, read and compared there, off the training thread)."""
EVENT_KINDS = (STEP_EVENT, SYNC_EVENT, MARK_EVENT, RECORD_EVENT, LAZY_EVENT)
