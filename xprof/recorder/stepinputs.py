"""The hooks' side of the recorder for a step's inputs: loader batches, ``torch_xla.compile``
arguments and tensors moved to the device, and in an SPMD run their device tensors, whose
shardings are read at the barrier. Training thread only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from xprof.recorder import metrics as m
from xprof.recorder.events import MESH_KEYS, RECORD_EVENT, RawInput
from xprof.recorder.inputs import MAX_LEAVES
from xprof.recorder.spmd import ShardingsOf, shardings_reader, spmd_enabled, spmd_meta


class StepInputs:
    """The inputs and SPMD part of the :class:`~xprof.recorder.core.Recorder` (a base class
    of it; its state is set up in ``Recorder.__init__``)."""

    _inputs: list[RawInput]
    _batch_ids: set[int]
    """ids of the CPU leaves of the step's loader batch (their `.to(device)` adds no input)."""
    _events: deque[tuple[Any, ...]]
    counters: m.CounterReader
    spmd: bool
    keep_devices: bool
    _want_inputs: bool
    _spmd_undecided: bool
    _read_shardings: ShardingsOf | None
    _devices: list[tuple[int, Any]]
    _batch_index: dict[int, int]
    _mesh: dict[str, Any]
    error: Callable[[str, BaseException], None]

    def _init_spmd(self) -> None:
        """SPMD (the hooks' side)."""
        self.spmd = False
        """An SPMD run: set once, by ``watch()`` or at the barrier that finds it on."""
        self.keep_devices = False
        """Keep the device tensors of the step's inputs for a sharding read at the barrier:
        in an SPMD run that records inputs, and, while it is not known yet whether the run
        is one (``xprof run`` starts before the script calls ``xr.use_spmd()``), until the
        first graph runs."""
        self._want_inputs = False
        self._spmd_undecided = False
        self._read_shardings = None
        self._devices = []
        """(index in ``_inputs``, the device tensor whose sharding is read at the barrier)."""
        self._batch_index = {}
        """id of a CPU batch leaf -> its index in ``_inputs`` (its ``.to`` result is sharded)."""

    # -- the hooks' side: inputs -----------------------------------------------------

    def on_batch(self, leaves: list[tuple[str, Any]], source: str) -> None:
        """Training thread only: the named tensor leaves of a loader batch."""
        inputs = self._inputs
        if not inputs:
            self._batch_ids.clear()
        ids = self._batch_ids
        room = 256 - len(inputs)
        first = len(inputs)
        for name, t in leaves[:room] if room < len(leaves) else leaves:
            inputs.append((name, t.shape, t.dtype, source))
            ids.add(id(t))
        if self.keep_devices:
            self._keep_batch_devices(leaves[:room], source, first)

    def on_batch_items(self, names: Sequence[str], items: Sequence[Any], tensor_type: type, source: str) -> bool:
        """Training thread only: a loader batch that is a list or tuple, its items named by
        ``names``, recorded as :meth:`on_batch` records its leaves, in one pass. False, with
        nothing recorded, when an item is not a tensor or the batch needs more (it would pass
        the step's 256 inputs, or the SPMD bookkeeping): the caller flattens it instead."""
        inputs = self._inputs
        first = len(inputs)
        if first + len(items) > 256 or len(items) > MAX_LEAVES or self.keep_devices:
            return False
        for t in items:
            if type(t) is not tensor_type and not isinstance(t, tensor_type):
                return False
        ids = self._batch_ids
        if not first:
            ids.clear()
        for name, t in zip(names, items):
            inputs.append((name, t.shape, t.dtype, source))
            ids.add(id(t))
        return True

    def on_call_args(self, leaves: list[tuple[str, Any]]) -> None:
        """Training thread only: the tensor arguments of a ``torch_xla.compile`` call,
        inputs of the step it runs. A tensor already recorded under the same name and
        shape (moved just before the call), or as a leaf of this step's loader batch (an
        ``MpDeviceLoader`` batch passed on as ``fn(data, target)``), is not added twice."""
        inputs = self._inputs
        have = {(e[0], tuple(e[1])) for e in inputs}
        batch = self._batch_ids if inputs else ()
        keep = self.keep_devices
        for name, t in leaves:
            if len(inputs) >= 256:
                break
            if (name, tuple(t.shape)) not in have and id(t) not in batch:
                if keep:
                    self._devices.append((len(inputs), t))
                inputs.append((name, t.shape, t.dtype, "arg"))

    def on_to_device(self, tensor: Any, name: str, moved: Any = None) -> None:
        """Training thread only: a CPU tensor moved to the device (as ``moved``) outside a batch."""
        if len(self._inputs) < 256 and id(tensor) not in self._batch_ids:
            if self.keep_devices and moved is not None:
                self._devices.append((len(self._inputs), moved))
            self._inputs.append((name, tensor.shape, tensor.dtype, "to"))

    def on_batch_leaf_moved(self, tensor: Any, moved: Any) -> None:
        """Training thread only, SPMD: a CPU batch leaf was moved to the device as ``moved``,
        the tensor ``mark_sharding`` shards (read at the barrier)."""
        k = self._batch_index.get(id(tensor))
        if k is not None:
            self._devices.append((k, moved))

    # -- the hooks' side: SPMD -------------------------------------------------------

    def enable_spmd(self, inputs: bool, meta: dict[str, Any]) -> None:
        """Before :meth:`start`: an SPMD run, whose header (``meta``) is written already;
        each input's sharding is read at the barrier when ``inputs`` are recorded."""
        self.spmd = True
        self._spmd_undecided = False
        self.counters.count_replicated()
        self._mesh = {k: meta[k] for k in MESH_KEYS if k in meta}
        self._read_shardings = shardings_reader() if inputs else None
        self.keep_devices = self._read_shardings is not None

    def watch_for_spmd(self, inputs: bool) -> None:
        """Before :meth:`start`: SPMD is off now, but the script may switch it on before
        its first device use (``xprof run``): look again at each barrier until a graph runs,
        keeping the inputs' device tensors meanwhile."""
        self._spmd_undecided = True
        self._want_inputs = inputs
        self.keep_devices = inputs

    def _decide_spmd(self, ran_graph: bool) -> None:
        if spmd_enabled():
            self.spmd = True
            self._spmd_undecided = False
            # From the next barrier on (this one's counters are read already): the graphs
            # that ran before it count in the next step's ExecuteReplicated delta.
            self.counters.count_replicated()
            meta = spmd_meta() or {}
            # The mesh is the writer thread's to write (with the step's signature).
            self._events.append((RECORD_EVENT, {"type": "spmd", **{k: v for k, v in meta.items()
                                                              if k not in MESH_KEYS}}))
            self._read_shardings = shardings_reader() if self._want_inputs else None
            self.keep_devices = self._read_shardings is not None
            if not self.keep_devices:
                self._devices.clear()
                self._batch_index.clear()
        elif ran_graph:  # use_spmd() comes before any device use: this run is not SPMD
            self._spmd_undecided = False
            self.keep_devices = False
            self._devices.clear()
            self._batch_index.clear()

    def _keep_batch_devices(self, leaves: list[tuple[str, Any]], source: str, first: int) -> None:
        if not first:
            self._batch_index.clear()
        if source == "batch":  # CPU tensors: their .to(device) results get sharded
            for k, (_, t) in enumerate(leaves):
                self._batch_index[id(t)] = first + k
        else:  # MpDeviceLoader's batches are on the device, sharded by its input_sharding
            self._devices.extend((first + k, t) for k, (_, t) in enumerate(leaves))

    def _read_input_shardings(self, inputs: list[RawInput]) -> None:
        """SPMD: each input's sharding spec, read now that ``mark_sharding`` has run.

        One private call for all of the step's inputs (2.4 µs for 3 on the CPU); the spec
        joins the input's signature, so it reaches the file only when it changes."""
        devices, self._devices = self._devices, []
        self._batch_index.clear()
        read = self._read_shardings
        if read is None:
            return
        try:
            specs = read([t for _, t in devices])
        except Exception as exc:
            self._read_shardings = None
            self.keep_devices = False
            self.error("sharding read", exc)
            return
        n = len(inputs)
        for (k, _), spec in zip(devices, specs):
            if k < n:
                e = inputs[k]
                inputs[k] = (e[0], e[1], e[2], e[3], spec)
