"""The run file's format and what it reads into: the header's name and version, the
torch_xla counter names, the typed records (:class:`Step`, :class:`Sync`, :class:`Site`,
...) and the :class:`Run` that holds them.

This module owns the names; the short keys are read in :mod:`xprof.runfile.decoders`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from xprof.runfile.values import int_tuple, plain_int, time_or_none

FORMAT = "xprof-run"
VERSION = 1
"""The newest run-file version this build writes and reads."""


# -- counter names ---------------------------------------------------------------------
# The torch_xla counters a step record's ``c`` may hold. The recorder reads them by these
# names and the analysis reads them back by the same names: both import them from here.

UNCACHED = "UncachedCompile"
CACHED = "CachedCompile"
EXECUTE = "ExecuteComputation"
REPLICATED = "ExecuteReplicated"
"""Executions under SPMD (one process driving all its devices): counted here, and
``ExecuteComputation`` stays 0."""
EXECUTION_COUNTERS = (EXECUTE, REPLICATED)
"""Graph executions, of either kind: a run counts in one of them."""
MARK_STEP = "MarkStep"
LOCAL_SCALAR = "aten::_local_scalar_dense"
TO_CPU = "xla::_to_cpu"


def is_fallback_counter(name: str) -> bool:
    """``aten::`` counters count ops that ran on the CPU (no XLA lowering); the scalar read
    ``aten::_local_scalar_dense`` is a host read, not a fallback op."""
    return name.startswith("aten::") and name != LOCAL_SCALAR


def base_input_name(name: str) -> str:
    """``input_ids#2`` (the second tensor of that name in one step) -> ``input_ids``."""
    head, sep, tail = name.rpartition("#")
    return head if sep and tail.isdigit() else name


# -- typed records -----------------------------------------------------------------------
# What ``load_run`` hands on: each record decoded once, here, from its short keys
# (docs/run-format.md) into named fields. NamedTuples rather than dataclasses: built in
# one call per line, and a list of them turns into columns with ``zip(*records)`` at C
# speed, which is how the analysis builds its tables.


class Step(NamedTuple):
    """One step barrier (``step``): the step from the previous barrier to the end of this one."""

    i: int
    t0: float
    """Step start: the end of the previous barrier (or the start of the watch)."""
    tb: float
    """Barrier start."""
    t1: float
    """Barrier end."""
    barrier: str
    """Which API asked for the barrier (``mark_step``, ``sync``, ``optimizer_step``, ...)."""
    counters: dict[str, int]
    """Counter deltas over the step, only those that moved (``c``)."""
    barrier_uncached: int
    """Uncached compiles inside the barrier itself (``bu``)."""
    barrier_cached: int
    """Cached compiles inside the barrier itself (``bc``)."""
    sig: int | None
    """Id of the step's input signature."""
    opt: int = 0
    """Optimizer steps (any ``torch.optim`` optimizer) since the previous barrier (``o``)."""
    nograd: bool = False
    """Grad mode was off at the barrier (``ng``)."""
    dynamo_graphs: int = 0
    """Graphs torch.compile's XLA bridge traced or compiled since the previous barrier (``dz``)."""
    site: int | None = None
    """Where the barrier was asked for (a ``site`` of access ``barrier``), written when the
    step compiled."""
    eval_mode: bool = False
    """The last ``Module.train()``/``eval()`` call before the barrier set eval mode (``ev``)."""
    backward: int = 0
    """Backward passes since the previous barrier (``bw``)."""
    mid_graphs: int = 0
    """Graphs compiled or looked up in the cache between the previous barrier and this one,
    outside the host reads (``mg``): ops run one by one in eager mode, or a sync xprof does
    not hook. The step ran a graph even when its barrier had nothing left to run."""
    grad_off: bool = False
    """``torch.no_grad()`` or ``torch.inference_mode()`` was entered since the previous
    barrier (``gd``): an eval forward under no_grad, with its barrier outside it."""

    @property
    def ran_graph(self) -> bool:
        """The step ran a graph: its barrier had one to run (an empty barrier compiles
        nothing, cached or not), or its ops ran before the barrier (eager mode: ``mg``)."""
        return (self.barrier_uncached + self.barrier_cached) > 0 or self.mid_graphs > 0


class Site(NamedTuple):
    """Where a host read was made (``site``): the user's line, once per distinct line."""

    id: int
    access: str
    """The tensor method that read the value: ``item``, ``tolist``, ``repr``, ``bool``... (``kind``)."""
    file: str
    line: int
    func: str
    via: str | None
    """The library function the user's line called that made the read, if any."""
    code: str
    inner: str | None = None
    """The innermost installed-library function on the way, when it is not ``via``."""
    chain: tuple[str, ...] = ()
    """Installed-library functions between the read and the user's line, innermost first."""
    inner_at: tuple[str, int, str] | None = None
    """File, line and source of the innermost installed-library frame (``inner_at``)."""
    caller: tuple[str, int, str] | None = None
    """A direct read inside a user function: file, line and source of the user line that
    called that function (``caller``)."""


class Sync(NamedTuple):
    """One host read of an XLA tensor (``sync``)."""

    i: int
    """The step it fell in."""
    site: int
    t0: float
    t1: float
    uncached: int
    """Uncached compiles during the read (``u``)."""
    cached: int
    """Cached compiles during the read (``c``)."""
    executions: int
    """Graph executions during the read (``x``)."""
    deferred: bool
    """Inside an ``xm.add_step_closure`` callback: after the barrier, forces nothing."""
    thread: str | None
    """The thread's name when it was not the training thread."""

    @property
    def live(self) -> bool:
        """A read that made the host wait for the device (not a deferred step-closure read)."""
        return not self.deferred


class Input(NamedTuple):
    """One input of a step signature (an entry of a ``sig`` record's ``inputs``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    src: str
    """``batch`` (a DataLoader batch), ``loader`` (MpDeviceLoader) or ``to`` (``.to(device)``)."""
    sharding: str | None = None
    """SPMD runs: the device tensor's sharding spec at the barrier (``{devices=[4,1]0,1,2,3}``,
    ``{replicated}``, ``""`` when it had none); None when not recorded (not an SPMD run)."""


class Spmd(NamedTuple):
    """An SPMD run's layout: the header's ``meta.spmd`` merged with later ``spmd`` records."""

    devices: int | None
    """Devices of the whole run (every process's)."""
    local_devices: int | None
    """Devices this process drives."""
    process_index: int | None
    process_count: int | None
    mesh_shape: tuple[int, ...] | None
    """The global mesh (``xs.set_global_mesh``), when one was set."""
    axis_names: tuple[str | None, ...] | None


class Compile(NamedTuple):
    """One uncached compile (``compile``), from torch_xla's ``CompileTime`` samples."""

    i: int
    t: float
    """When the compile ended (Unix seconds)."""
    ns: float
    at: str
    """``barrier``, or ``step`` for a compile forced mid-step by a host read."""


class Error(NamedTuple):
    """One of the profiler's own failures while recording (``error``)."""

    t: float | None
    where: str
    error: str
    trace: str | None


class Debug(NamedTuple):
    """One entry of torch_xla's own debug output, appended by ``xprof run`` (``debug``).

    ``kind`` is the entry's kind (``compile``, ``execute``, ``capture``, ``hf_log``, ...);
    ``fields`` the rest of the record as written, since each kind has its own fields.
    """

    kind: str
    fields: dict[str, Any]

    @property
    def graph_hash(self) -> str | None:
        h = self.fields.get("graph_hash")
        return str(h) if h else None


class GraphLine(NamedTuple):
    """Where a graph change starts, at one user line (a ``graph`` record's ``lines``)."""

    file: str
    line: int
    func: str
    code: str
    what: str
    """In a few words: ``slice 20 -> 24``, ``multiply: an input became the constant 1``."""
    kind: str
    """``bound``, ``constant``, ``grows``, ``added``, ``removed``, ``shape``, ``value`` or ``ops``
    (:data:`xprof.hlo.CHANGE_KINDS`)."""
    op: str
    """The opcode of the first op that changed there."""
    ops: int
    """Ops of the new graph that changed at this line."""


class GraphChange(NamedTuple):
    """A new graph seen by ``--explain`` (``debug`` record of kind ``graph``), compared with
    the closest graph seen before it (``base``, the step it was seen in; None for the first)."""

    i: int
    """The step (barrier index) whose barrier ran it."""
    at: str
    hash: str
    ops: int
    inputs: int
    base: int | None
    lines: tuple[GraphLine, ...]
    more_lines: int
    backward: int
    """Changed ops with no Python frame (a backward pass)."""
    library: int
    """Changed ops whose frames are all in libraries."""
    changed: int
    compared_after: bool = False
    """Not recorded: the analysis' reading of a new graph that had no earlier graph to be
    compared with, told by the comparison of the next barrier's graph (one seen before, the
    step after went back to) with it, reversed (:func:`xprof.analysis.findings.explained.per_compile`)."""


class End(NamedTuple):
    """How the run ended (``end``), written when ``watch()`` exits."""

    t: float | None
    status: str
    """``ok``, ``error`` (the loop raised) or ``interrupted``."""
    exception: str | None
    steps: int
    syncs: int
    errors: int
    tail: dict[str, int]
    """Counter deltas after the last barrier."""
    samples_dropped: tuple[str, ...]
    """Metrics whose sample ring buffer wrapped between two reads."""
    tail_opt: int = 0
    """Optimizer steps after the last barrier (``tail_opt``)."""
    tail_graphs: int = 0
    """Graphs run after the last barrier outside host reads (``tail_graphs``): with
    ``tail_opt``, a last training step that ran op by op (eager mode) and never reached a
    barrier, so it is in no step record."""
    events_dropped: int = 0
    """Events the recorder dropped because its writer thread was stuck on the disk (its queue
    full): steps, host reads and marks after ``dropped_from`` are partly missing."""
    dropped_from: int | None = None
    """The step in progress when the first event was dropped."""
    tail_bw: int = 0
    """Backward passes after the last barrier (``tail_bw``): a loop that trains with no
    barrier, with or without an optimizer (``p.data.add_`` updates count here only)."""


class RunFileError(Exception):
    """A run file that cannot be read; the message is one line meant for a person."""


@dataclass
class Run:
    """A loaded run file: its header and its records by type, in file order (steps by index)."""

    path: str
    header: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    syncs: list[Sync] = field(default_factory=list)
    sites: dict[int, Site] = field(default_factory=dict)
    signatures: dict[int, tuple[Input, ...]] = field(default_factory=dict)
    compiles: list[Compile] = field(default_factory=list)
    executions: list[tuple[float, float]] = field(default_factory=list)
    """``(end_unix_s, duration_ns)`` ExecuteTime samples (under SPMD ExecuteReplicatedTime),
    from ``exec`` records."""
    graph_sizes: list[tuple[float, float]] = field(default_factory=list)
    """``(unix_s, nodes)`` TensorsGraphSize samples, from ``graph_sizes`` records."""
    transfers: list[tuple[float, float]] = field(default_factory=list)
    """``(end_unix_s, duration_ns)`` TransferFromDeviceTime samples, from ``xfer`` records."""
    errors: list[Error] = field(default_factory=list)
    debug: list[Debug] = field(default_factory=list)
    graph_changes: list[GraphChange] = field(default_factory=list)
    """``--explain``'s new graphs and what changed in each (``debug`` records of kind ``graph``)."""
    dynamo: list[dict[str, Any]] = field(default_factory=list)
    """torch._dynamo's failed guards (why torch.compile recompiled), from ``dynamo`` records:
    ``{func, file, line, reasons}`` per function."""
    end: End | None = None
    skipped_lines: int = 0
    impossible: int = 0
    """Records skipped for a number no recorder writes (see :class:`Impossible`): negative,
    NaN or infinite times, durations and counts, a step index repeated or out of order."""
    truncated_tail: bool = False
    spmd_updates: list[dict[str, Any]] = field(default_factory=list)
    """The fields of ``spmd`` records as written (SPMD found, or the mesh set, after the header)."""

    @property
    def complete(self) -> bool:
        """True when the recorder wrote its ``end`` record (the process did not die)."""
        return self.end is not None

    @property
    def name(self) -> str:
        return str(self.header.get("name") or Path(self.path).stem)

    @property
    def meta(self) -> dict[str, Any]:
        """The header's ``meta`` object as written (versions, host, argv, rank...)."""
        meta = self.header.get("meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def started_unix(self) -> float | None:
        return time_or_none(self.header.get("started_unix"))

    @property
    def started_at(self) -> str | None:
        t = self.header.get("started_at")
        return str(t) if t else None

    @property
    def xprof_version(self) -> str | None:
        """The xprof that wrote the file."""
        v = self.header.get("xprof_version") or self.meta.get("xprof")
        return str(v) if v else None

    @property
    def spmd(self) -> Spmd | None:
        """The SPMD layout when the run used SPMD (``xr.use_spmd()``), else None; later
        ``spmd`` records override the header's fields (the mesh is often set later)."""
        meta = self.meta.get("spmd")
        if not isinstance(meta, dict) and not self.spmd_updates:
            return None
        merged: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
        for update in self.spmd_updates:
            merged.update(update)
        names = merged.get("axis_names")
        return Spmd(plain_int(merged.get("devices")), plain_int(merged.get("local_devices")),
                    plain_int(merged.get("process_index")), plain_int(merged.get("process_count")),
                    int_tuple(merged.get("mesh_shape")),
                    tuple(None if n is None else str(n) for n in names) if isinstance(names, list) else None)

    @property
    def rank(self) -> int | None:
        """This process's rank in a multi-process run (None for a single process)."""
        rank, world = self.meta.get("rank"), self.meta.get("world_size")
        if isinstance(rank, int) and not isinstance(rank, bool) and isinstance(world, int) and world > 1:
            return rank
        return None
