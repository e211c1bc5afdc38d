"""The run file: its format, its writer and its loader (the one thing the recorder and the
analysis share).

This module owns the format: the record keys are spelled here and nowhere else. The
recorder writes records through :class:`RunWriter`; :func:`load_run` decodes each line
once into a typed record (:class:`Step`, :class:`Sync`, :class:`Site`, ...) and every
reader after it works on those fields.

A run file is JSON Lines. Its first line is a header object that says what the file
is (``"format": "xprof-run"``) and which version of the format wrote it; every other
line is one record with a ``"type"`` key. The recorder appends records as the run goes
and flushes them, so a process that is killed still leaves a readable file; a complete
run ends with an ``end`` record. ``docs/run-format.md`` documents every record.

This module imports nothing heavy: it is used inside the training process (writing)
and on a laptop without torch (reading).
"""

from __future__ import annotations

import gc
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from xprof.runcolumns import RunColumns

FORMAT = "xprof-run"
VERSION = 1
"""The newest run-file version this build writes and reads."""


_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False).encode
"""One encoder for every record: ``json.dumps`` with options builds a new one per call."""


def encode_record(record: dict[str, Any]) -> str:
    """One record as the writer writes it (without the newline)."""
    return _ENCODE(record)


class EncodedRecord(dict):  # type: ignore[type-arg]
    """A record that carries its own encoded line (``line``, newline included), written as
    is: the recorder builds the lines of steady steps from parts it encoded once. It is
    still the record (a dict) for whoever reads the records as they are written."""

    __slots__ = ("line", "steady")

    line: str
    steady: dict[str, Any]
    """The fields it shares with every step written like it (the same object for each): a
    reader that saw one such step can tell the next one is the same kind without comparing."""


def _line(record: dict[str, Any]) -> str:
    if type(record) is EncodedRecord:
        return record.line
    return _ENCODE(record) + "\n"


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
    columns: RunColumns | None = None
    """The bulk records (steps, syncs, compiles, samples) as columns, when the run was read by
    :func:`xprof.runcolumns.load_columns`: their typed lists above are then empty
    (:func:`xprof.runcolumns.with_records` fills them)."""

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
        return _time_or_none(self.header.get("started_unix"))

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
        return Spmd(_plain_int(merged.get("devices")), _plain_int(merged.get("local_devices")),
                    _plain_int(merged.get("process_index")), _plain_int(merged.get("process_count")),
                    _int_tuple(merged.get("mesh_shape")),
                    tuple(None if n is None else str(n) for n in names) if isinstance(names, list) else None)

    @property
    def rank(self) -> int | None:
        """This process's rank in a multi-process run (None for a single process)."""
        rank, world = self.meta.get("rank"), self.meta.get("world_size")
        if isinstance(rank, int) and not isinstance(rank, bool) and isinstance(world, int) and world > 1:
            return rank
        return None


class RunWriter:
    """Appends records to a run file, one JSON object a line, flushed as it goes.

    Thread-safe: hooks may fire on a data-loading thread. Write errors (a full disk, a
    removed folder) are raised to the caller once and then the writer goes quiet, so the
    recorder can log the failure and let training carry on.
    """

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any]) -> None:
        self.path = str(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        self._file: IO[str] | None = open(self.path, "w", encoding="utf-8")
        st = os.fstat(self._file.fileno())
        self._identity = (st.st_dev, st.st_ino)
        self._lock = threading.Lock()
        self.failed: BaseException | None = None
        full = {"format": FORMAT, "version": VERSION, **header}
        self.write(full, flush=True)

    def write(self, record: dict[str, Any], flush: bool = True) -> None:
        self._emit(_ENCODE(record) + "\n", flush)

    def write_many(self, records: list[dict[str, Any]], flush: bool = True) -> None:
        """Several records in one write call (the recorder's batched flushes)."""
        if records:
            self._emit("".join([_line(r) for r in records]), flush)

    def flush(self) -> None:
        self._emit("", True)

    def _emit(self, text: str, flush: bool) -> None:
        with self._lock:
            f = self._file
            if f is None:
                return
            try:
                if text:
                    f.write(text)
                if flush:
                    f.flush()
            except BaseException as exc:
                self.failed = exc
                self._file = None
                try:
                    f.close()
                except OSError:
                    pass
                raise

    def close(self) -> None:
        with self._lock:
            f, self._file = self._file, None
        if f is not None:
            f.close()

    def gone(self) -> bool:
        """The file is no longer at its path: it, or its folder, was removed or replaced
        (writes would still succeed, into a file nobody can open again)."""
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False
        return (st.st_dev, st.st_ino) != self._identity

    def forget_in_child(self) -> None:
        """In a process forked from the writer's: never write the parent's file. The file's
        descriptor is pointed at ``/dev/null`` (the copy of its buffer would otherwise be
        flushed into the parent's file when the child exits); nothing is flushed or closed,
        and the lock (maybe held by a thread the child does not have) is a new one."""
        f, self._file = self._file, None
        self._lock = threading.Lock()
        if f is None:
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, f.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass


def append_records(path: str | os.PathLike[str], records: list[dict[str, Any]]) -> None:
    """Append records to a finished run file (``xprof run`` adds torch_xla's debug entries
    after the ``end`` record), encoded like the writer's. Raises ``OSError``."""
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join([_ENCODE(r) + "\n" for r in records]))


_UNDECODED = (ValueError, RecursionError, MemoryError)
"""What the JSON decoder raises for a line it cannot take: bad JSON (``JSONDecodeError`` is a
``ValueError``), a number longer than Python's int limit (``ValueError``), nesting deeper
than its recursion limit, a value too large for memory."""


def _parse_header(path: str, first: str) -> dict[str, Any]:
    try:
        header = json.loads(first)
    except _UNDECODED:
        if first.lstrip().startswith("{") and not first.endswith("\n"):
            raise RunFileError(f"{path}: truncated run file (the header line is incomplete)")
        raise RunFileError(f"{path}: not an xprof run file (the first line is not JSON)")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RunFileError(f"{path}: not an xprof run file (no \"format\": \"{FORMAT}\" header)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunFileError(f"{path}: run file header has an invalid version {version!r}")
    if version > VERSION:
        writer = header.get("xprof_version", "a newer xprof")
        raise RunFileError(
            f"{path}: run file format version {version} (written by xprof {writer}) is newer "
            f"than this xprof reads (up to version {VERSION}); upgrade xprof"
        )
    return header


def _num_pairs(value: Any) -> list[tuple[float, float]]:
    """``[[a, b], ...]`` as float pairs; items that are not two numbers are dropped."""
    if not isinstance(value, list):
        return []
    # Fast path: every item a list of two floats (what the recorder writes), checked at C
    # speed. Anything else (ints, bools, odd items) goes through the item-by-item check.
    if (set(map(type, value)) <= {list} and set(map(len, value)) <= {2}
            and set(map(type, chain.from_iterable(value))) <= {float}):
        return list(map(tuple, value))
    out: list[tuple[float, float]] = []
    for item in value:
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item)
        ):
            out.append((float(item[0]), float(item[1])))
    return out


def _int(v: Any, default: int = 0) -> int:
    return default if v is None else int(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _plain_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _int_tuple(v: Any) -> tuple[int, ...] | None:
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return None


_NO_COUNTS: dict[str, int] = {}
"""Shared by every step without counter deltas (never modified)."""


def _counts(v: Any) -> dict[str, int]:
    return v if type(v) is dict else {}


# -- numbers no recorder writes -------------------------------------------------------------
# A record with one is an impossible record: skipped and counted (``Run.impossible``), and
# said wherever the run is shown; ``xprof compare`` will not judge such a file.

MAX_COUNT = 1 << 40
"""The largest count a record may hold (a step index, compiles, a counter's delta in one step):
far past any real run, and small enough that a million of them sum without overflow."""
MAX_SECONDS = 1e12
"""Times and durations in seconds are below this (the year 33658)."""
MAX_NS = MAX_SECONDS * 1e9


class Impossible(ValueError):
    """A record holding a number no recorder writes: negative, NaN, infinite or past the
    limits above, a duration that ends before it starts, a step index not after the last."""


def _counts_possible(counts: dict[str, Any]) -> bool:
    """Every number among a step's counter deltas is a count (other values read as 0)."""
    for v in counts.values():
        if type(v) is int:
            if not 0 <= v <= MAX_COUNT:
                return False
        elif type(v) is float and not (0.0 <= v <= MAX_COUNT and v.is_integer()):
            return False
    return True


def _step_possible(s: Step) -> bool:
    return (0 <= s.i <= MAX_COUNT and 0.0 <= s.t0 <= s.tb <= s.t1 < MAX_SECONDS
            and 0 <= s.barrier_uncached <= MAX_COUNT and 0 <= s.barrier_cached <= MAX_COUNT
            and 0 <= s.opt <= MAX_COUNT and 0 <= s.dynamo_graphs <= MAX_COUNT and 0 <= s.backward <= MAX_COUNT
            and 0 <= s.mid_graphs <= MAX_COUNT and _counts_possible(s.counters))


def _sync_possible(s: Sync) -> bool:
    return (0 <= s.i <= MAX_COUNT and 0.0 <= s.t0 <= s.t1 < MAX_SECONDS and 0 <= s.uncached <= MAX_COUNT
            and 0 <= s.cached <= MAX_COUNT and 0 <= s.executions <= MAX_COUNT)


def _pair_possible(pair: tuple[float, float]) -> bool:
    """A sample: (a time in seconds, a duration in ns or a node count)."""
    return 0.0 <= pair[0] < MAX_SECONDS and 0.0 <= pair[1] <= MAX_NS


def _time_or_none(t: Any) -> float | None:
    """A time in seconds as written, or None when it is not one (absent, NaN, negative, huge)."""
    if isinstance(t, (int, float)) and not isinstance(t, bool) and 0.0 <= t < MAX_SECONDS:
        return float(t)
    return None


_new_tuple = tuple.__new__


def step_record(rec: dict[str, Any]) -> Step | None:
    """A ``step`` record decoded (None when it has no barrier index)."""
    i = rec.get("i")
    if type(i) is not int:
        return None
    g = rec.get
    t0, tb, t1, barrier, c, bu, bc, sig = (g("t0", 0.0), g("tb", 0.0), g("t1", 0.0), g("barrier", "sync"),
                                           g("c", _NO_COUNTS), g("bu", 0), g("bc", 0), g("sig"))
    o, ng, dz, site, ev, bw, mg, gd = (g("o", 0), g("ng", 0), g("dz", 0), g("site"), g("ev", 0), g("bw", 0),
                                       g("mg", 0), g("gd", 0))
    if (type(t0) is float and type(tb) is float and type(t1) is float and type(barrier) is str
            and type(c) is dict and type(bu) is int and type(bc) is int and (sig is None or type(sig) is int)
            and type(o) is int and type(dz) is int and (site is None or type(site) is int) and type(bw) is int
            and type(mg) is int):
        # What the recorder writes: the fields are already of their types. Building the tuple
        # directly skips the NamedTuple's Python-level __new__ (a long run has a million steps).
        return _new_tuple(Step, (i, t0, tb, t1, barrier, c, bu, bc, sig, o, bool(ng), dz, site,  # type: ignore[no-any-return]
                                 bool(ev), bw, mg, bool(gd)))
    return Step(i, float(t0), float(tb), float(t1), str(barrier), _counts(c), int(bu), int(bc),
                _opt_int(sig), int(o), bool(ng), int(dz), _opt_int(site), bool(ev), int(bw),
                int(mg), bool(gd))


def _add_step(run: Run, rec: dict[str, Any]) -> bool:
    step = step_record(rec)
    if step is None:
        return False
    if not _step_possible(step) or (run.steps and step.i <= run.steps[-1].i):
        raise Impossible  # (a step index repeated or out of order is one too)
    run.steps.append(step)
    return True


def sync_record(rec: dict[str, Any]) -> Sync:
    """A ``sync`` record (a host read) decoded."""
    g = rec.get
    return Sync(int(g("i", 0)), int(g("site", -1)), float(g("t0", 0.0)), float(g("t1", 0.0)),
                int(g("u", 0)), int(g("c", 0)), int(g("x", 0)), bool(g("deferred", False)), _opt_str(g("thread")))


def _add_sync(run: Run, rec: dict[str, Any]) -> bool:
    sync = sync_record(rec)
    if not _sync_possible(sync):
        raise Impossible
    run.syncs.append(sync)
    return True


def site_record(rec: dict[str, Any]) -> Site | None:
    """A ``site`` record decoded (None when it has no id)."""
    sid = rec.get("id")
    if not isinstance(sid, int):
        return None
    g = rec.get
    chain_ = g("chain")
    return Site(sid, str(g("kind", "?")), str(g("file", "?")), int(g("line", 0) or 0),
                str(g("func", "?")), _opt_str(g("via")), str(g("code", "") or ""), _opt_str(g("inner")),
                tuple(str(n) for n in chain_) if isinstance(chain_, list) else (),
                _inner_at(g("inner_at")), _inner_at(g("caller")))


def _add_site(run: Run, rec: dict[str, Any]) -> bool:
    site = site_record(rec)
    if site is None:
        return False
    run.sites[site.id] = site
    return True


def _inner_at(value: Any) -> tuple[str, int, str] | None:
    if isinstance(value, list) and len(value) == 3 and isinstance(value[1], int):
        return str(value[0]), value[1], str(value[2])
    return None


def _input(entry: dict[str, Any]) -> Input:
    shape = entry.get("shape")
    sharding = entry.get("sharding")
    return Input(str(entry.get("name", "?")), tuple(int(x) for x in shape) if isinstance(shape, list) else (),
                 str(entry.get("dtype", "?")), str(entry.get("src", "?")),
                 sharding if isinstance(sharding, str) else None)


def signature_record(rec: dict[str, Any]) -> tuple[int, tuple[Input, ...]] | None:
    """A ``sig`` record decoded: its id and inputs (None when either is missing)."""
    inputs = rec.get("inputs")
    if not isinstance(rec.get("id"), int) or not isinstance(inputs, list):
        return None
    return rec["id"], tuple(_input(i) for i in inputs if isinstance(i, dict))


def _add_sig(run: Run, rec: dict[str, Any]) -> bool:
    found = signature_record(rec)
    if found is None:
        return False
    sid, sig = found
    if not all(0 <= d <= MAX_COUNT for entry in sig for d in entry.shape):
        raise Impossible
    run.signatures[sid] = sig
    return True


def compile_record(rec: dict[str, Any]) -> Compile | None:
    """A ``compile`` record decoded (None when it has no barrier index)."""
    i = rec.get("i")
    if type(i) is not int:
        return None
    g = rec.get
    return Compile(i, float(g("t", 0.0)), float(g("ns", 0.0)), str(g("at", "barrier")))


def _add_compile(run: Run, rec: dict[str, Any]) -> bool:
    c = compile_record(rec)
    if c is None:
        return False
    if not (0 <= c.i <= MAX_COUNT and 0.0 <= c.t < MAX_SECONDS and 0.0 <= c.ns <= MAX_NS):
        raise Impossible
    run.compiles.append(c)
    return True


def _samples(rec: dict[str, Any]) -> list[tuple[float, float]]:
    pairs = _num_pairs(rec.get("samples"))
    if not all(map(_pair_possible, pairs)):
        raise Impossible
    return pairs


def _add_exec(run: Run, rec: dict[str, Any]) -> bool:
    run.executions.extend(_samples(rec))
    return True


def _add_spmd(run: Run, rec: dict[str, Any]) -> bool:
    run.spmd_updates.append({k: v for k, v in rec.items() if k != "type"})
    return True


def _add_xfer(run: Run, rec: dict[str, Any]) -> bool:
    run.transfers.extend(_samples(rec))
    return True


def _add_graph_sizes(run: Run, rec: dict[str, Any]) -> bool:
    run.graph_sizes.extend(_samples(rec))
    return True


def _add_error(run: Run, rec: dict[str, Any]) -> bool:
    run.errors.append(Error(_time_or_none(rec.get("t")), str(rec.get("where", "?")),
                            str(rec.get("error", "")), _opt_str(rec.get("trace"))))
    return True


def _add_dynamo(run: Run, rec: dict[str, Any]) -> bool:
    failures = rec.get("guard_failures")
    if not isinstance(failures, list):
        return False
    run.dynamo.extend(f for f in failures if isinstance(f, dict))
    return True


def _add_debug(run: Run, rec: dict[str, Any]) -> bool:
    fields = {k: v for k, v in rec.items() if k not in ("type", "kind")}
    run.debug.append(Debug(str(rec.get("kind", "")), fields))
    return True


def _add_end(run: Run, rec: dict[str, Any]) -> bool:
    g = rec.get
    t = g("t")
    dropped = g("samples_dropped")
    end = End(float(t) if t else None, str(g("status", "ok") or "ok"), _opt_str(g("exception")),
              _int(g("steps")), _int(g("syncs")), _int(g("errors")), _counts(g("tail")),
              tuple(str(d) for d in dropped) if isinstance(dropped, list) else (),
              _int(g("tail_opt")), _int(g("tail_graphs")))
    counts = (end.steps, end.syncs, end.errors, end.tail_opt, end.tail_graphs)
    if ((end.t is not None and not 0.0 <= end.t < MAX_SECONDS) or not all(0 <= n <= MAX_COUNT for n in counts)
            or not _counts_possible(end.tail)):
        raise Impossible
    run.end = end
    return True


_ADDERS: dict[str, Callable[[Run, dict[str, Any]], bool]] = {
    "step": _add_step, "sync": _add_sync, "site": _add_site, "sig": _add_sig,
    "compile": _add_compile, "exec": _add_exec, "xfer": _add_xfer, "spmd": _add_spmd,
    "graph_sizes": _add_graph_sizes, "error": _add_error, "debug": _add_debug, "dynamo": _add_dynamo, "end": _add_end,
}
"""Record type -> the function that files it (a dict lookup per line, not an if-chain)."""


_SCANNER: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The JSON value scanner ``json.loads`` ends in (C): ``(value, end)`` or StopIteration."""


_UNDECODABLE = re.compile("[\udc80-\udcff]")
"""Bytes that are not UTF-8 come back from ``surrogateescape`` decoding as these."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while building many small objects.

    Every few hundred new dicts the collector runs, and its full passes walk every record
    loaded so far: on a 100k-step run that was a third of the load time. Records are
    plain acyclic JSON values, so nothing is left for the collector to find; any cycles
    made meanwhile are collected once it is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


MAX_LINE = 64 << 20
"""The longest record line read (64 MiB; the recorder's longest are a few KiB): a longer line
is skipped and counted, never held in memory whole (``/dev/zero`` has no newline at all)."""

MAX_HEADER = 1 << 20
"""The longest header line read: past it the file is not a run file."""


def _kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is, in words (None for a regular file)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe or FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _regular(p: str) -> None:
    """Refuse, without opening it, anything but a regular file: opening a FIFO waits for a
    writer, a pipe (``<(cat run.json)``) can be read only once, and a device never ends."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file")
    except OSError as exc:
        raise RunFileError(f"{p}: cannot open ({exc.strerror or exc})")
    kind = _kind_of(mode)
    if kind == "a directory":
        raise RunFileError(f"{p}: is a directory, not a run file")
    if kind is not None:
        raise RunFileError(f"{p}: {kind}, not a run file: xprof reads a run file more than once, "
                           "so it reads regular files only (save the stream to a file first)")


def open_run(path: str | os.PathLike[str]) -> tuple[IO[str], dict[str, Any]]:
    """Open a run file and read its header; :class:`RunFileError` (one line) on bad input.

    The file is returned positioned after the header line, opened with
    ``surrogateescape``: a byte that is not UTF-8 damages only its own line (that line is
    skipped like any unreadable one); only a header that is not UTF-8 refuses the file.
    Only a regular file is opened (see :func:`_regular`).
    """
    p = str(path)
    _regular(p)
    try:
        f = open(p, encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise RunFileError(f"{p}: no such file")
    except PermissionError:
        raise RunFileError(f"{p}: permission denied")
    except OSError as exc:
        raise RunFileError(f"{p}: cannot open ({exc.strerror or exc})")
    try:
        first = f.readline(MAX_HEADER)
        if not first.strip():
            raise RunFileError(f"{p}: empty file, not an xprof run file")
        if len(first) >= MAX_HEADER and not first.endswith("\n"):
            raise RunFileError(f"{p}: not an xprof run file (its first line is longer than "
                               f"{MAX_HEADER >> 20} MiB)")
        if _UNDECODABLE.search(first):
            raise RunFileError(f"{p}: not an xprof run file (not UTF-8 text)")
        return f, _parse_header(p, first)
    except BaseException:
        f.close()
        raise


_TOO_LONG = "\x00too long"
"""What :func:`bounded_lines` gives for a line longer than :data:`MAX_LINE` (no JSON line
starts with a NUL, so it can only be skipped)."""


def bounded_lines(f: IO[str], limit: int | None = None) -> Iterator[str]:
    """The lines of ``f``, each read at most ``limit`` (:data:`MAX_LINE`) characters at a time:
    a longer line is read past in pieces and given as :data:`_TOO_LONG`."""
    limit = limit or MAX_LINE
    readline = f.readline
    while True:
        line = readline(limit)
        if not line:
            return
        if len(line) < limit or line[-1] == "\n":
            yield line
            continue
        while line and line[-1] != "\n":
            line = readline(limit)
        yield _TOO_LONG


class Undecodable(Exception):
    """A line the JSON decoder cannot take (see :func:`decode_line`)."""


def decode_line(line: str, scan: Callable[[str, int], tuple[Any, int]] = _SCANNER) -> Any:
    """The JSON value of one line, or :class:`Undecodable` (bad JSON, bytes that are not
    UTF-8, nesting deeper than the decoder goes, a number too long, a value too large).

    ``json.loads(line)`` is decode() -> raw_decode() -> scan_once(); calling the scanner
    directly saves two regex matches and three calls per line (a million lines in a long
    run); anything else goes through ``json.loads``, which accepts or rejects it exactly as
    it always did.
    """
    if not line.isascii() and _UNDECODABLE.search(line):
        raise Undecodable
    try:
        rec, end = scan(line, 0)
        if end != len(line) and (end != len(line) - 1 or line[end] != "\n"):
            raise ValueError  # more than the newline after the value: let loads() judge
        return rec
    except RecursionError:
        raise Undecodable
    except (StopIteration, ValueError):
        try:
            return json.loads(line)
        except _UNDECODED:
            raise Undecodable


def file_record(run: Run, rec: Any) -> bool:
    """Decode one record into ``run`` (its typed list or field); False when it is not a
    record this version reads (not an object, an unknown type, a field of the wrong type)."""
    if type(rec) is not dict:
        return False
    kind = rec.get("type")
    add = _ADDERS.get(kind) if type(kind) is str else None
    if add is None:
        return False
    try:
        return add(run, rec)
    except Impossible:
        run.impossible += 1
        return True  # (read, and counted apart from the unreadable lines)
    except (TypeError, ValueError, OverflowError):
        return False  # a field of the wrong type: the record is skipped like a bad line


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read and validate a run file; raise :class:`RunFileError` with one line on bad input.

    This is the record-by-record reader: every record becomes a typed record (``Step``,
    ``Sync``...). The analysis and the CLI read through :func:`xprof.runcolumns.load_columns`,
    which reads the bulk records into columns instead, with the same rules.

    A file whose last line was cut off mid-write (the process was killed) loads with
    ``truncated_tail`` set and without an ``end`` record; unknown record types from a
    newer minor change, lines that are not JSON, lines with bytes that are not UTF-8 and
    records whose fields have the wrong type are skipped and counted in ``skipped_lines``,
    never fatal. Lines are parsed one at a time on purpose: parsing a batch as one JSON
    array can merge two damaged lines into one valid value and so hide them from the count.
    """
    f, header = open_run(path)
    run = Run(path=str(path), header=header)
    with f, gc_paused():
        pending: str | None = None
        scan = _SCANNER
        for line in bounded_lines(f):
            if pending is not None:
                # A bad line followed by more lines is corruption in the middle.
                run.skipped_lines += 1
                pending = None
            if not line.strip():
                continue
            try:
                rec = decode_line(line, scan)
            except Undecodable:
                pending = line
                continue
            if not file_record(run, rec):
                run.skipped_lines += 1
        if pending is not None:
            run.truncated_tail = True
    return run  # (steps in index order: a step index not after the last one is impossible)


# -- finding run files -------------------------------------------------------------------

RANK_IN_NAME = re.compile(r"\.rank(\d+)\.[^.]+$")
"""``run.rank3.json``: the file of rank 3 of a multi-process run."""


def _looks_like_run(path: str) -> bool:
    try:
        if _kind_of(os.stat(path).st_mode) is not None:
            return False  # (a FIFO named run.json would wait for a writer)
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline(4096)
    except OSError:
        return False
    return f'"{FORMAT}"' in first


def rank_of_path(path: str, position: int) -> int:
    """The N of ``*.rankN.json``, else ``position``."""
    m = RANK_IN_NAME.search(path)
    return int(m.group(1)) if m else position


def _rank_key(path: str) -> tuple[int, str]:
    m = RANK_IN_NAME.search(path)
    return (int(m.group(1)) if m else 1 << 30, path)


def expand_run_paths(paths: Sequence[str]) -> list[str]:
    """Run files named by ``paths``: a folder stands for the run files in it.

    In a folder, ``*.rankN.json`` files are taken when there are any (sorted by rank),
    otherwise every ``*.json`` file that starts with an xprof run header. Files named
    directly are kept as given (the loader reports bad ones). Raises ``ValueError`` with
    one line when a path does not exist or a folder holds no run file.
    """
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if n.endswith(".json"))
            ranked = [os.path.join(p, n) for n in names if RANK_IN_NAME.search(n)]
            found = ranked or [os.path.join(p, n) for n in names
                               if not n.endswith(".trace.json") and _looks_like_run(os.path.join(p, n))]
            if not found:
                raise ValueError(f"{p}: no xprof run files in this folder")
            out.extend(sorted(found, key=_rank_key))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise ValueError(f"{p}: no such file or folder")
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique
