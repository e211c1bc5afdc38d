"""Live notices and the exit summary: what xprof says on stderr while it records.

The writer thread hands every batch of records it wrote to :class:`LiveNotices` (in file
order), so nothing here runs on the training thread. It applies a simplified, online
version of the analysis' causes (docs/diagnosis.md) and prints one line the first time
each cause appears at each place after warm-up:

- a steady-state barrier compile in a step whose ops include a CPU-fallback op never seen
  before (``cpu_fallback``), else whose input signature no earlier steady step had
  (``input_shape``: the input that changed against the closest earlier signature; under
  SPMD ``input_sharding`` when every shape was seen before and an input's sharding is
  new), else, with no new host read in the step, ``graph_change``;
- a host read at a new site that ran the device (executions or compiles inside the read:
  ``implicit_sync``); reads inside ``xm.add_step_closure`` callbacks never count;
- a CPU-fallback op running in a steady step for the first time;
- a value-dependent op (``t[mask]``, ``nonzero``, ``masked_select``, ``unique``) at a new
  line that ran the device (``data_dependent``); the recompiles after it are its own.

Steps are numbered as the report numbers them (issue 11): training steps from the
optimizer-step evidence (``o``) when the run has any, else barriers that ran a graph, and
warm-up is every compile of the first two, host reads included (but not a read site's
second and later compiles in a step where its graph grew from read to read). torch.compile's own
barriers and the graphs it retraced for (``dynamo``), eval passes (``ng``), step-closure
graphs and reads made inside an installed library (a mechanism the report groups) are
never notices.

A cause the analysis gives to a compile is never contradicted: when the online rules are
not sure (a host read that changed the graph, an eval pass), they stay quiet. At the end
:meth:`LiveNotices.summary` gives three lines (steps, compile share, the first thing to
change) from the same records, without pandas.

Every string that comes from the run (input names, code lines, file names, op names)
goes through :func:`clean` before it is printed.
"""

from __future__ import annotations

import os
import re
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from xprof.runfile import (
    GROWING_GRAPHS,
    NOTHING_TO_JUDGE,
    added_inputs,
    bucket_step,
    dynamo_func,
    grew,
    is_condition,
    is_fallback_counter,
    is_logging_call,
    is_own_barrier_call,
    listed_inputs,
    micro_batch_change,
    of_other_kinds,
)
from xprof.runfile import GROWING_READS as GROWING_READS  # (the analysis' too)
from xprof.untrusted import visible

WARMUP_STEPS = 2
"""Steps that ran a graph before the steady state (the analysis' ``WARMUP_STEPS``)."""

GROWS_KEY = ("graph_change", "grows")
GROWS_ADVICE = ("the step graph grows: clear a list of device tensors after reading it (losses.clear()), "
                "or keep a running sum on the device")

MINOR_SHARE = 0.01
"""A cost under this share of the run is no first thing to change (the analysis' ``MINOR_SHARE``)."""

EXEC_KEPT = 1024
"""Execution samples kept for the reads' costs (about as many as torch_xla's ring holds)."""

SETTLED_AFTER = 20
"""Steps with no new input shape after its last compile for it to read as settled (the
analysis' ``SETTLED_AFTER``)."""

DATA_DEPENDENT_ACCESSES = frozenset({"nonzero", "masked_select", "unique", "argwhere",
                                     "repeat_interleave", "mask_index", "mask_assign"})
"""Reads of ops whose output shape depends on values (the analysis' ``data_dependent``)."""

DATA_DEPENDENT_FALLBACKS = frozenset({"aten::nonzero", "aten::masked_select", "aten::_unique2",
                                      "aten::unique_dim", "aten::unique_consecutive",
                                      "aten::repeat_interleave", "aten::argwhere"})
"""Their CPU-fallback counters: the data-dependent finding's, never a ``cpu_fallback``."""


def clean(text: object, limit: int = 120) -> str:
    """Run-file text made safe for one terminal line: characters a terminal acts on
    (escape sequences, newlines, bidi overrides) shown as escapes, long text cut."""
    s = visible(str(text), one_line=True)
    return s if len(s) <= limit else s[: limit - 1] + "…"


_READ_LABEL = {
    "item": ".item()", "tolist": ".tolist()", "numpy": ".numpy()", "cpu": ".cpu()",
    "to_cpu": ".to('cpu')", "bool": "a tensor used as a condition", "int": "int() of a tensor",
    "float": "float() of a tensor", "index": "a tensor used as an index",
    "repr": "printing a tensor", "format": "formatting a tensor", "materialize": "materializing tensors",
    "mask_index": "boolean-mask indexing", "mask_assign": "boolean-mask assignment",
    "nonzero": "nonzero()", "masked_select": "masked_select()",
    "unique": "unique()", "argwhere": "argwhere()", "repeat_interleave": "repeat_interleave()",
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
                call = code[m.start(): close + 1] if 0 < close - at < 30 else f"{code[m.start():at]}.{method}()"
                return call
    return _READ_LABEL.get(kind, kind)


def _is_checkpoint(via: object) -> bool:
    """A read inside a checkpoint save (the analysis' ``checkpoint`` kind, info when rare)."""
    if not isinstance(via, str):
        return False
    low = via.lower()
    return "serialization" in low or ".save" in low or "checkpoint" in low or "state_dict" in low


def _dd_cost_key(site: dict[str, Any]) -> tuple[str, str]:
    """The data-dependent cost key of a read site: its file and line (the analysis' ``dd:``)."""
    return ("data_dependent", f"{site.get('file', '?')}:{site.get('line', 0)}")


def _where(file: str, line: int) -> str:
    if not file or file == "?":
        return "?"
    try:
        rel = os.path.relpath(file)
    except ValueError:
        rel = file
    return f"{rel if not rel.startswith('..') else os.path.basename(file)}:{line}"


def _shape(shape: Any) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _spec(spec: str) -> str:
    """A sharding spec as recorded; ``""`` (none) is replicated by XLA."""
    return spec or "unsharded"


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 0.95 else f"{s:.2f} s"


class LiveNotices:
    """Follows the run's records as they are written; says what is new, once."""

    def __init__(self, started: float, emit: Callable[[str], None] | None = None) -> None:
        self.started = started
        self.emit = emit
        """Prints one line; None keeps quiet (the summary is still computed)."""
        self.lines: list[str] = []
        self.said: list[tuple[tuple[str, str], str]] = []
        """(cause key, line) of every notice, in order: ``("sync", site id)``,
        ``("input_shape", name)``, ``("input_sharding", name)``, ``("cpu_fallback", ops)``, ``("fallback", op)``,
        ``("graph_change", "")``."""
        self.first: tuple[str, str] | None = None
        """The cause key the summary named as the first thing to change."""
        self._said: set[tuple[str, str]] = set()
        self._sigs: dict[int, list[tuple[str, tuple[int, ...], str, str]]] = {}
        self._specs: dict[int, dict[str, str]] = {}
        """SPMD: signature id -> input name -> sharding spec, where recorded."""
        self._sites: dict[int, dict[str, Any]] = {}
        self._work = 0
        """Steps that ran a graph so far (the next such step has this ordinal)."""
        self._barriers = 0
        self._steady_sigs: set[int] = set()
        self._train_sigs: set[int] = set()
        """Signatures of training barriers past the first step, torch.compile's steps included
        (the analysis' ``seen_sigs``)."""
        self._seen_fallback: set[str] = set()
        self._compiles = 0
        self._compile_s = 0.0
        self._recompiles = 0
        self._grown: list[tuple[tuple[str, str], float, int, int]] = []
        """Step graphs each larger than the last, same inputs: (cost key, seconds, compiles, nodes)."""
        self._grown_top = 0
        self._first_sigs: set[int] = set()
        self._sig_runs: dict[int, int] = {}
        """Training steps that ran each signature so far."""
        self._recompile_s = 0.0
        self._pending_compiles: list[dict[str, Any]] = []
        self._last_c: dict[str, Any] | None = None
        self._cut: dict[str, list[int]] = {}
        """CPU-fallback ops -> [steady steps that ran them and graphs early, those graphs]."""
        self._last_fallback: list[str] = []
        """The fallback counters of the last step's counters (steady steps share that dict)."""
        self._step_syncs: list[dict[str, Any]] = []
        self._site_steps: dict[int, tuple[int, int]] = {}
        """Read site -> (the last step it read in, how many steps it read in)."""
        self._site_first: dict[int, int] = {}
        """Read site -> the first step that read it."""
        self._armed: dict[str, int] = {}
        """A hook armed mid-run (``mask_index``) -> the first step it saw whole."""
        self._trained_in_train_mode = False
        """A steady training step ran with the model in train mode (the analysis'
        ``first_in_train_mode``): one in eval mode after it is a change."""
        self._words: dict[int, tuple[str, str, str]] = {}
        """Read site -> how the notices say it (see :meth:`_site_words`)."""
        self._forced: set[int] = set()
        self._forced_lib: set[tuple[str, str]] = set()
        """Library reads (by function and user line) that ran the device."""
        self._held: list[tuple[tuple[str, str], str]] = []
        """Read notices waiting for their step's barrier."""
        self._op_call: dict[str, tuple[str, str]] = {}
        """A CPU-fallback op first seen with a library call's first run -> that call's cost key."""
        self._value_shape_sites: set[int] = set()
        """Slice-bound read sites whose value set a shape (see :meth:`_value_shape_key`)."""
        self._last_was_work = False
        """The last barrier ran a graph (optimizer steps after it never reached one)."""
        self._last_steady = False
        """The last barrier was a steady training step's (past warm-up, not apart)."""
        self._fast: tuple[dict[str, Any], bool, int] | None = None
        """The kind of steady step the next may repeat (its shared fields, an optimizer step,
        cached compiles at its barrier): see :meth:`_step`."""
        self._loop_lines: set[tuple[Any, Any]] = set()
        """User lines step barriers were asked for from (barrier sites): a library call at one
        runs the training loop (the analysis' ``mechanisms.loop_lines``)."""
        self._lib_call: dict[tuple[str, str], tuple[tuple[str, str], tuple[Any, Any]]] = {}
        """Cost key of a library read -> (its library call's cost key, the call's user line)."""
        self._forced_dd: set[tuple[str, str]] = set()
        """Sites whose reads ran the device at least once."""
        self._sites_read: set[int] = set()
        """Sites read (not deferred) in an earlier step."""
        self._cost: dict[tuple[str, str], list[Any]] = {}
        """cause key -> [seconds, compiles, what to say]."""
        self._shape_last: dict[str, int] = {}
        """Input name -> the last step a new shape of it compiled."""
        self._last_t = started
        self._sizes: list[tuple[float, int]] = []
        """The latest TensorsGraphSize samples: the node count of a graph just compiled."""
        self._train_nodes: int | None = None
        self._first_sig: int | None = None
        self._first_seen = False
        self._second: tuple[int, float, int] | None = None
        """(sig, barrier compile seconds, compiles) of the second step that ran a graph, when
        it compiled with other inputs than the first (the analysis may blame the shape)."""
        self._first_sig_back: bool | None = None
        self._k = -1
        """The last training step (an optimizer step's barrier; the analysis' ordinal)."""
        self._opt_seen = False
        self._bw_seen = False
        self._grad_on_seen = False
        """A backward pass ran; a graph barrier ran with grad on and the model in train mode.
        With neither, nor an optimizer step: an inference run so far (the analysis' test)."""
        self._prev_dynamo = False
        self._dynamo_sigs: set[int] = set()
        self._closure_compiled = False
        """A read in a step closure compiled since the last barrier (its graph, not the step's)."""
        self._op_compiled = False
        """An op compiled on its own (eager mode: a ``compile`` record ``at`` ``op``)."""
        self._graphs: list[int] = [-1, 0, 0]
        """The training step in progress: [its index, graphs run between barriers outside
        host reads, graphs its barriers ran]. The analysis' eager-mode evidence."""
        self._eager: tuple[int, int] | None = None
        """(step, graphs) of the first steady step that ran op by op."""
        self._reads: dict[tuple[str, str], int] = {}
        """Reads counted per cost key."""
        self._open: list[tuple[tuple[str, str], float]] = []
        """(cost key, wait) of the reads since the last barrier: after the last one (a final
        print or evaluation), the analysis counts them in no finding, and nor does the summary."""
        self._open_t0 = 0.0
        """When the first of those reads began."""
        self._waited: deque[tuple[float, float, float, float, list[tuple[tuple[str, str], float]]]] = deque()
        """Steps whose reads waited, until the execution samples say how long the graph they
        began with ran: (step start, first read's start, barrier, waits, their reads)."""
        self._ran: deque[tuple[float, float]] = deque(maxlen=EXEC_KEPT)
        """(start, end) of the latest executions, kept once a read has waited."""

    def _user_step(self) -> int:
        """The training step in progress, as the report numbers them: optimizer steps when
        the run has any (a barrier after an optimizer step closes it), else barriers that
        ran a graph."""
        return self._k + 1 if self._opt_seen else self._work

    # -- feeding ---------------------------------------------------------------------

    def feed(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            kind = rec.get("type")
            if kind == "step":
                self._step(rec)
            elif kind == "sync":
                self._sync(rec)
            elif kind == "compile":
                self._pending_compiles.append(rec)
                if rec.get("at") == "op":
                    self._op_compiled = True
            elif kind == "exec":
                self._executions(rec.get("samples") or [])
            elif kind == "graph_sizes":
                samples = rec.get("samples") or []
                self._sizes = (self._sizes + [(float(t), int(n)) for t, n in samples])[-256:]
            elif kind == "sig":
                sid = int(rec["id"])
                self._sigs[sid] = [(str(x["name"]), tuple(x["shape"]), str(x["dtype"]), str(x["src"]))
                                   for x in rec["inputs"]]
                specs = {str(x["name"]): x["sharding"] for x in rec["inputs"] if isinstance(x.get("sharding"), str)}
                if specs:
                    self._specs[sid] = specs
            elif kind == "site":
                self._sites[int(rec["id"])] = rec
                if rec.get("kind") == "barrier" and not is_own_barrier_call(rec.get("via"), rec.get("chain") or ()):
                    self._loop_lines.add((rec.get("file"), rec.get("line")))  # (not a library's own sync)
            elif kind == "debug" and rec.get("kind") == "hook":
                # A hook armed mid-run (the mask hooks, once aten::nonzero first ran): its
                # reads are seen from the next step on (the step it was armed in may have read
                # before), so "every step so far" counts from there.
                self._armed.setdefault(str(rec.get("hook")), self._user_step() + 1)
            elif kind == "debug" and rec.get("kind") == "dynamo_limit":
                func = dynamo_func(str(rec.get("func") or "?"), rec.get("file"), rec.get("line"))
                value = rec.get("value")
                limit = f"torch._dynamo.config.{rec.get('limit') or 'recompile_limit'}"
                if isinstance(value, int):
                    limit += f" = {value}"
                self._say(("dynamo_limit", func), f"step {self._user_step()}: torch.compile gave up on {func} at its "
                          f"recompile limit ({limit}): it runs uncompiled from now on, and XLA compiles a graph "
                          "for each new shape")
            elif kind == "debug" and rec.get("kind") == "no_barrier":
                self._say(("no_barrier", ""), f"{rec.get('opt')} optimizer steps and no step barrier yet: the "
                          "pending graph grows with every step until a value is read; end each step with "
                          "torch_xla.sync() (or iterate an MpDeviceLoader)")

    def _say(self, key: tuple[str, str], text: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        line = f"xprof: {text}"
        self.lines.append(line)
        self.said.append((key, line))
        if self.emit is not None:
            self.emit(line)

    def _grow(self, key: tuple[str, str], seconds: float, compiles: int, nodes: int, i: int, so_far: str) -> bool:
        """A step graph larger than every one before, from the same inputs, charged to ``key``:
        at the third in a row, they are one graph that grows, their costs moved to it and said.
        True when said (so the caller says nothing more)."""
        self._grown.append((key, seconds, compiles, nodes))
        self._grown_top = nodes
        if len(self._grown) < GROWING_GRAPHS:
            return False
        for k, s, n, _ in self._grown:
            entry = self._cost.get(k)
            if entry is not None:
                entry[0] = max(entry[0] - s, 0.0)
                entry[1] = max(entry[1] - n, 0)
            self._add_cost(GROWS_KEY, s, n, GROWS_ADVICE)
        sizes = ", ".join(str(n) for _, _, _, n in self._grown)
        self._say(GROWS_KEY, f"step {i} recompiled: same input shapes, a graph larger each time it changed "
                  f"({sizes} nodes): something kept across steps grows in it (a list of device tensors "
                  f"stacked at a read?); {so_far}")
        return True

    def _add_cost(self, key: tuple[str, str], seconds: float, compiles: int, advice: str) -> None:
        entry = self._cost.setdefault(key, [0.0, 0, advice])
        entry[0] += seconds
        entry[1] += compiles
        entry[2] = advice

    # -- host reads ------------------------------------------------------------------

    def _sync(self, rec: dict[str, Any]) -> None:
        if rec.get("deferred"):
            if rec.get("u"):
                self._closure_compiled = True  # the analysis' step_closure: info, never a notice
            return
        sid = int(rec["site"])
        i = self._user_step()
        self._step_syncs.append(rec)
        # Steps that read at the site so far: reads come in step order, so a count will do
        # (a set of steps, counted at every read, made a read every step quadratic).
        last, seen = self._site_steps.get(sid, (-1, 0))
        if not seen:
            self._site_first[sid] = i
        if i != last:
            self._site_steps[sid] = (i, seen + 1)
        site = self._sites.get(sid, {})
        if _is_checkpoint(site.get("via")):
            # A checkpoint save reads every tensor; the report says whether it is often. One
            # that compiled to read them ran before the barrier: a cost (the analysis'
            # checkpoint_mid_step), its waits from then on included.
            key = ("ckpt", str(sid))
            if key in self._cost or (rec.get("u") and i >= WARMUP_STEPS):
                where = self._site_words(sid)[1]
                self._add_cost(key, max(float(rec["t1"]) - float(rec["t0"]), 0.0), 1 if rec.get("u") else 0,
                               f"the checkpoint save at {where} runs before the step's barrier and compiles "
                               "parts of the step to read them: save right after torch_xla.sync()")
            return
        if (site.get("via") or site.get("chain")) and not is_logging_call(site.get("via")):
            # A library's read: no notice (the report groups them by mechanism), but its cost
            # counts for the exit summary; torch.compile's own reads are dynamo's. (The logging
            # module formatting the user's tensor is the user's own read, at their line.)
            via = str(site.get("via") or "")
            if not via.startswith(("torch._dynamo", "torch_xla._dynamo")):
                key = self._lib_key(sid)
                name, where = key[1].rsplit("@", 1)
                if key not in self._lib_call:
                    self._lib_call[key] = (self._call_key(sid), (site.get("file"), site.get("line")))
                wait = max(float(rec["t1"]) - float(rec["t0"]), 0.0)
                self._read_cost(key, wait, float(rec["t0"]))
                self._add_cost(key, wait, 0, f"{name} (called from {where}) reads values on the host: "
                               "see the report for the library's line")
                if rec.get("x") or rec.get("u"):
                    self._forced_lib.add(key)
            return
        if str(site.get("kind", "")) in DATA_DEPENDENT_ACCESSES:
            self._data_dependent(rec, sid, site, i)
            return
        wait = max(float(rec["t1"]) - float(rec["t0"]), 0.0)
        if sid in self._value_shape_sites:  # its value sets a shape: the data-dependent cost
            key = self._value_shape_key(sid)
            self._read_cost(key, wait, float(rec["t0"]))
            self._cost[key][0] += wait
            return
        key = ("sync", str(sid))
        entry = self._cost.get(key)
        if entry is None:
            label, where, via = self._site_words(sid)
            entry = self._cost[key] = [0.0, 0, f"{label} at {where}{via} forces a host sync: read it less "
                                                "often, or in xm.add_step_closure"]
        self._read_cost(key, wait, float(rec["t0"]))
        entry[0] += wait
        if not (rec.get("x") or rec.get("u")):
            return  # the value was on the host already: nothing ran
        self._forced.add(sid)
        if i < WARMUP_STEPS or key in self._said:
            return  # warm-up: not a notice yet (it is one if the site reads again later)
        how = self._how_often(sid, i)
        label, where, via = self._site_words(sid)
        also = " and a compile" if rec.get("u") else ""
        # Said when the step's barrier comes: a read after the last one (a final print of a
        # metric) is in no step, and the analysis counts it in no finding either.
        self._held.append((("sync", str(sid)), f"step {i}: {label} at {where}{via} forces a host sync{also} ({how})"))

    def _growing_reads(self, compiles: list[dict[str, Any]]) -> set[int]:
        """The analysis' ``growing_reads``: read sites whose graphs grew in this step
        (:func:`xprof.runfile.grew`), from the first graph-size sample at or after each compile."""
        nodes: dict[int, list[int | None]] = {}
        for comp in compiles:
            if comp.get("at") != "step":
                continue
            site = self._read_of(comp)
            if site is not None:
                t = float(comp.get("t") or 0)
                nodes.setdefault(site, []).append(next((n for ts, n in self._sizes if 0 <= ts - t < 1.0), None))
        return {site for site, ns in nodes.items() if grew(ns)}

    def _how_often(self, sid: int, i: int, since: int = 0) -> str:
        """How often site ``sid`` was read up to step ``i``: every step so far, every step since
        its first (a read after the barrier lands in the next step: step 0 has none), or
        ``N of M``. ``since``: the first step its hook could see."""
        seen = self._site_steps[sid][1]
        total = i + 1 - min(since, i)
        if seen >= total:
            return "every step so far"
        first = self._site_first.get(sid, 0)
        if first > 0 and seen >= 2 and seen >= i + 1 - first:
            return "every step since step " + str(first)
        return f"{seen} of {total} steps so far"

    def _site_words(self, sid: int) -> tuple[str, str, str]:
        """(what was read, where, `` (via ...)``) of a read site, as the notices say them."""
        words = self._words.get(sid)
        if words is None:
            site = self._sites.get(sid, {})
            where = _where(str(site.get("file", "?")), int(site.get("line", 0) or 0))
            caller = site.get("caller")
            if isinstance(caller, list) and len(caller) == 3 and not site.get("via"):
                where += f" (called from {_where(str(caller[0]), int(caller[1] or 0))})"
            words = self._words[sid] = (
                "logging a tensor" if is_logging_call(site.get("via")) else
                clean(read_label(str(site.get("kind", "")), str(site.get("code", ""))), 60),
                clean(where, 120),
                f" (via {clean(site['via'], 60)})" if site.get("via") else "")
        return words

    def _data_dependent(self, rec: dict[str, Any], sid: int, site: dict[str, Any], i: int) -> None:
        key = _dd_cost_key(site)
        wait = max(float(rec["t1"]) - float(rec["t0"]), 0.0)
        self._read_cost(key, wait, float(rec["t0"]))
        entry = self._cost.get(key)
        if entry is None:
            label, where, _ = self._site_words(sid)
            entry = self._cost[key] = [0.0, 0, f"{label} at {where} has a value-dependent shape: keep shapes "
                                                "static (torch.where(mask, x, fill), or multiply by the mask)"]
        entry[0] += wait
        if not (rec.get("x") or rec.get("u")):
            return
        self._forced_dd.add(key)
        if i < WARMUP_STEPS or key in self._said:
            return
        label, where, _ = self._site_words(sid)
        since = self._armed.get("mask_index", 0) if site.get("kind") in ("mask_index", "mask_assign") else 0
        how = self._how_often(sid, i, since)
        self._say(key, f"step {i}: {label} at {where} has a value-dependent shape; it runs on the CPU "
                  f"and runs the graph early ({how})")

    # -- steps -----------------------------------------------------------------------

    def _read_cost(self, key: tuple[str, str], seconds: float, t0: float) -> None:
        """A read's wait, kept apart until a barrier closes its step (see :meth:`summary`)."""
        self._reads[key] = self._reads.get(key, 0) + 1
        if not self._open:
            self._open_t0 = t0
        self._open.append((key, seconds))

    def _close_reads(self, rec: dict[str, Any]) -> None:
        """A barrier closed a step whose reads waited: what they cost waits for the execution
        samples (see :meth:`_settle`)."""
        waits = sum(s for _, s in self._open)
        if waits > 0:
            self._waited.append((float(rec.get("t0") or 0.0), self._open_t0, float(rec.get("tb") or 0.0),
                                 waits, self._open))
            self._settle()
        self._open = []

    def _executions(self, samples: list[Any]) -> None:
        if self._waited or self._reads:
            self._ran.extend((float(t) - float(ns) / 1e9, float(t)) for t, ns in samples)
            self._settle()

    def _settle(self) -> None:
        """Take off the reads' costs what the host would have waited for at the barrier anyway,
        as the analysis does (``tables.sync_savings``): a step began with the graph an earlier
        barrier launched still running (until E); without its reads the host would still have
        waited at its barrier for as long as that graph outlasted the host's own work (H):
        ``max(0, E - H)`` of the waits, shared by the reads by wait."""
        ran = self._ran
        while self._waited:
            t0, first, tb, waits, reads = self._waited[0]
            while ran and ran[0][1] <= t0:
                ran.popleft()  # ended before this step (and every later one) began
            if not ran or ran[-1][0] < first:
                return  # no execution from after its reads began yet: wait for more samples
            self._waited.popleft()
            ended = t0
            for start, end in ran:  # (in the order they ended)
                if start >= first:
                    break
                ended = max(ended, end)
            anyway = min(max((ended - t0) - ((tb - t0) - waits), 0.0), waits)
            if anyway <= 0:
                continue
            for key, seconds in reads:
                entry = self._cost.get(key)
                if entry is not None:
                    entry[0] = max(entry[0] - anyway * seconds / waits, 0.0)

    def _step(self, rec: dict[str, Any]) -> None:
        fast = self._fast
        if (fast is not None and getattr(rec, "steady", None) is fast[0] and not self._held
                and not self._pending_compiles and not self._step_syncs and not self._open
                and not self._closure_compiled):
            # A steady step like the last one (the same written fields, see EncodedRecord),
            # with nothing read, compiled or held since: what the full path would do, but for
            # the counters, is already done (most steps of a run take this path).
            self._barriers += 1
            if fast[1]:
                self._k += 1
            self._count_graphs(self._k if self._opt_seen else self._work, 0, fast[2])
            self._work += 1
            return
        self._fast = None
        quiet_before = not (self._held or self._pending_compiles or self._step_syncs or self._open)
        carried = []
        if rec.get("barrier") == "compile_entry" and rec.get("sig") is None and self._pending_compiles:
            # Ops run eagerly on the inputs of the torch_xla.compile call this entry leads to:
            # their compiles are the call's (its shapes), as the analysis has it.
            carried = [x for x in self._pending_compiles if x.get("at") == "op"]
            self._pending_compiles = [x for x in self._pending_compiles if x.get("at") != "op"]
        self._full_step(rec)
        if carried:
            self._pending_compiles = carried + self._pending_compiles
        # A step the next one may repeat through the path above: past warm-up, a training
        # step that compiled nothing and ran no graph outside its barrier, no reads, no op on
        # the CPU, and nothing the first steps still wait to learn.
        kind = getattr(rec, "steady", None)
        if (kind is not None and quiet_before and self._last_was_work and self._last_steady
                and not rec.get("bu") and not rec.get("mg") and not self._last_fallback
                and self._first_seen and (self._first_sig_back is not None or rec.get("sig") != self._first_sig)):
            self._fast = (kind, bool(rec.get("o")), int(rec.get("bc") or 0))

    def _full_step(self, rec: dict[str, Any]) -> None:
        self._barriers += 1
        self._last_was_work = bool(rec.get("bu") or rec.get("bc") or rec.get("mg"))
        if self._open:
            self._close_reads(rec)
        held, self._held = self._held, []
        for key, text in held:
            self._say(key, text)
        c = rec.get("c") or {}
        bu = rec.get("bu")
        at_dynamo = rec.get("barrier") == "dynamo"
        work = bool(bu or rec.get("bc") or rec.get("mg"))
        # The analysis' phases (analysis/steps.py): torch.compile's own barriers, eval
        # (grad off or eval mode, no optimizer step or backward) and a step closure's graph
        # are never notices.
        sig = rec.get("sig")
        sig = int(sig) if sig is not None else None
        dynamo = (at_dynamo or self._prev_dynamo or bool(rec.get("dz"))
                  or (sig is not None and sig in self._dynamo_sigs))
        if sig is not None and (rec.get("dz") or at_dynamo):
            self._dynamo_sigs.add(sig)  # the shapes torch.compile retraced for compile on first use
        self._prev_dynamo = at_dynamo
        if rec.get("o"):
            self._opt_seen = True
            self._k += 1
        i = self._k if self._opt_seen else self._work
        # The training step a graph barrier belongs to (the analysis' ``ordinal``): once the
        # run has optimizer steps, the optimizer step it follows, so a step's several
        # barriers (a Trainer's loader sync before its optimizer step) share one; but a
        # micro-batch's (a backward pass, no optimizer step) is the next one's, whose update
        # its gradients feed.
        if rec.get("bw"):
            self._bw_seen = True
        if work and not (rec.get("ng") or rec.get("ev")):
            self._grad_on_seen = True
        if self._opt_seen and rec.get("bw") and not rec.get("o"):
            i = self._k + 1
        ordinal = i if work else -1
        # torch.compile's own barrier or an eval pass's: not a training step (never warm-up)
        # (a run with no optimizer step yet is read as the analysis reads a run with none: an
        # inference loop's barriers, grad off, are its steps)
        eval_barrier = (work and self._opt_seen and bool(rec.get("ng") or rec.get("ev")) and not rec.get("bw")
                        and not rec.get("o"))
        apart = at_dynamo or eval_barrier
        if work and not apart:  # the analysis' training barriers (eager_steps)
            self._count_graphs(i, int(rec.get("mg") or 0), int(bu or 0) + int(rec.get("bc") or 0))
        # A new input shape at the user's own barrier in a step torch.compile traced in (its
        # eager part saw the shape too): the barrier's compile is the shape's, as the analysis
        # has it (a new signature before dynamo); dynamo keeps the compiles it traced.
        shape_at_barrier = (dynamo and not at_dynamo and bool(bu) and not eval_barrier and sig is not None
                            and sig not in self._train_sigs and i >= WARMUP_STEPS)
        quiet = (dynamo and not shape_at_barrier) or apart or self._closure_compiled
        self._closure_compiled = False
        steady = i >= WARMUP_STEPS and not quiet
        self._last_steady = steady and work and not apart and not at_dynamo
        warm = i < WARMUP_STEPS and (at_dynamo or not eval_barrier)
        # (the analysis' warm-up: every compile of the first two training steps, reads' too,
        # and torch.compile's own syncs while it traces them)
        compiles = self._pending_compiles
        barrier_s = 0.0
        n_barrier = 1 if bu else 0
        own = bool(bu)
        # (own: the step's graph compiled, at its barrier or op by op as it ran: eager mode)
        if compiles:
            self._pending_compiles = []
            at_barrier = [x for x in compiles if x.get("at") != "step"]
            barrier_s = sum(float(x.get("ns") or 0) / 1e9 for x in at_barrier)
            n_barrier = len(at_barrier) or n_barrier
            own = own or any(x.get("at") == "op" for x in at_barrier)
        op_only = bool(compiles) and not bu and all(x.get("at") == "op" for x in compiles)
        asker = self._sites.get(int(rec["site"])) if rec.get("site") is not None else None
        if asker is not None and (rec.get("o") or rec.get("bw")):
            # whoever asked for a training step's barrier runs the loop (trainer.train())
            self._loop_lines.add((asker.get("file"), asker.get("line")))
        if (eval_barrier and bu and asker is not None
                and is_own_barrier_call(asker.get("via"), asker.get("chain") or ())
                and (asker.get("file"), asker.get("line")) not in self._loop_lines):
            # A library call's own sync after an evaluation (xm.mesh_reduce's rendezvous): its
            # graphs are the call's, as the analysis has them, not the evaluation's.
            own_call = self._call_key(int(rec["site"]))
            own_name, own_where = own_call[1].rsplit("@", 1)
            self._add_cost(own_call, barrier_s, n_barrier, f"{own_name} (called from {own_where}) syncs by itself "
                           "and runs a graph of its own: call it where little is pending")
            self._forced_lib.add(own_call)
        if c is not self._last_c:  # a steady step's counters are the same dict as the last one's
            self._last_c = c
            self._last_fallback = [k for k in c if is_fallback_counter(k) and k not in DATA_DEPENDENT_FALLBACKS]
        fallback = self._last_fallback
        new_ops = [k for k in fallback if k not in self._seen_fallback]
        # A steady step with inputs no steady step had: its compiles inside host reads are
        # the new shape's too (the read only ran the graph the new shape needs).
        new_shape = (steady and own and not new_ops and sig is not None
                     and sig not in self._steady_sigs)
        read_n, read_s = 0, 0.0
        step_warm = warm
        read_compiled: set[int] = set()
        growing = self._growing_reads(compiles) if warm else set()
        for comp in compiles:
            self._compiles += 1
            ns = float(comp.get("ns") or 0) / 1e9
            warm = step_warm
            if comp.get("at") == "step":
                site = self._read_of(comp)
                if warm and site is not None and site in growing:
                    # (the analysis' rule: a read whose graph grows from read to read in a
                    # warm-up step runs a longer graph each time, not warm-up's first graphs)
                    warm = site not in read_compiled
                    read_compiled.add(site)
                if site is None:
                    call = self._library_call_around(comp)
                    if call is not None:  # inside a library call, between two of its reads
                        if not warm:
                            self._cost[call][0] += ns
                            self._cost[call][1] += 1
                    elif new_ops and not warm:  # compiled mid-step around ops that ran on the CPU
                        self._fallback_cost(new_ops, ns, 1)
                elif new_shape or warm:
                    # The read waited for a compile another cause owns (a new input shape's,
                    # or warm-up's first graphs): counted there, not in the read's cost.
                    if new_shape:
                        read_n += 1
                        read_s += ns
                    key = self._site_key(site)
                    if key in self._cost:
                        self._cost[key][0] = max(self._cost[key][0] - ns, 0.0)
                else:
                    key = self._site_key(site)
                    dd_key = self._dd_before(site, float(comp.get("t") or 0)) if site in self._sites_read else None
                    if dd_key is not None:
                        # The same read compiling again after an op with a value-dependent shape
                        # earlier in the step: the op's new shape (the analysis' rule), not the read's.
                        if key in self._cost:
                            self._cost[key][0] = max(self._cost[key][0] - ns, 0.0)
                        self._cost[dd_key][0] += ns
                        self._cost[dd_key][1] += 1
                    elif key in self._cost:
                        self._cost[key][1] += 1
            if not warm:  # what the analysis counts as recompiles
                self._recompiles += 1
                self._recompile_s += ns
                if dynamo and not eval_barrier and not (shape_at_barrier and comp.get("at") != "step"):
                    # torch.compile traced a new graph: the dynamo finding's. One traced for an
                    # eval pass is left to the report: a grad-mode retrace is a one-off (info),
                    # which only the guard text, written at the end, can tell.
                    self._add_cost(("dynamo", ""), ns, 1, "torch.compile (dynamo) traced new graphs: keep "
                                   "input shapes fixed (drop_last=True, pad to a fixed length)")
            self._compile_s += ns
        nodes = self._graph_nodes(float(rec.get("tb") or 0), float(rec.get("t1") or 0)) if n_barrier else None
        if work and ordinal == 0 and not self._first_seen:
            self._first_seen = True  # the analysis' first step graph: its first barrier's
            self._first_sig = sig
        if work and ordinal == 0 and sig is not None:
            self._first_sigs.add(sig)  # (step 0's barriers: a teacher's sync and the update are two)
        if work and ordinal <= 1 and nodes is not None:
            self._train_nodes = nodes  # the graph the steady state runs
        if work and ordinal == 1:
            if own and sig is not None and self._first_sig is not None and sig not in self._first_sigs:
                self._second = (sig, barrier_s, n_barrier)
        elif work and ordinal > 1 and sig is not None and sig == self._first_sig and self._first_sig_back is None:
            self._first_sig_back = not own
        if steady and own:
            so_far = (f"{self._recompiles} recompile{'s' if self._recompiles != 1 else ''} so far, "
                      f"{_seconds(self._recompile_s)}")
            read_sites = {int(s["site"]) for s in self._step_syncs}
            # (only a read that ran a graph can have taken ops out of the barrier's: the analysis' rule 4)
            ran_sites = {int(s["site"]) for s in self._step_syncs if s.get("x") or s.get("u") or s.get("c")}
            train = self._train_nodes
            # A graph larger than the training graph and every one since, same inputs: maybe a
            # step graph that grows (the analysis' graph_grows, said at the third).
            bigger = (nodes is not None and train is not None and sig is not None and sig in self._steady_sigs
                      and nodes > max(self._grown_top, train))
            dd = [k for k in (self._dd_key(int(s["site"])) for s in self._step_syncs) if k is not None]
            if nodes is not None and train and nodes < 0.75 * train and not (rec.get("o") or rec.get("bw")):
                pass  # a much smaller graph, no optimizer step or backward: an eval pass (info)
            elif dd:
                # a value-dependent op gave the graph a new shape: the data-dependent finding's
                self._cost[dd[0]][0] += barrier_s
                self._cost[dd[0]][1] += n_barrier
            elif new_ops and (call := self._new_library_call(read_sites)) is not None:
                # A library call outside the loop's lines ran here for the first time and the
                # op on the CPU came with it (model.generate()'s torch.isin): the graph it left
                # pending changed the barrier's. The analysis' rule, told from this step alone.
                lib_name, where = call[1].rsplit("@", 1)
                self._add_cost(call, barrier_s, n_barrier, f"{lib_name} (called from {where}) reads values on "
                               "the host: see the report for the library's lines")
                self._forced_lib.add(call)
                for op in new_ops:
                    self._op_call[op] = call  # its later calls are said to be the call's
                ops = ", ".join(clean(op, 60) for op in new_ops)
                self._say(call, f"step {i} recompiled: {clean(lib_name, 80)} at {where} ran for the first time "
                          f"(with {ops} on the CPU); {so_far}")
            elif new_ops:
                ops = ", ".join(clean(op, 60) for op in new_ops)
                key = self._fallback_cost(new_ops, barrier_s, n_barrier)
                for op in new_ops:
                    self._said.add(("fallback", op))
                self._say(key, f"step {i} recompiled: {ops} has no XLA lowering and ran on the CPU; {so_far}")
            elif sig is not None and sig not in self._steady_sigs:
                name, _old, new = self._changed_input(sig)
                resharded = self._changed_sharding(sig, self._steady_sigs) if name is None else None
                # (more or fewer micro-batches of the step's own inputs: x#3 is no new input)
                micro = (micro_batch_change(self._sigs.get(sig, []), (self._sigs[s] for s in self._steady_sigs
                                                                        if s in self._sigs))
                         if resharded is None else None)
                if micro is not None:
                    # A gradient-accumulation window of another length (the analysis'
                    # micro_batches): every shape seen, another number of micro-batches.
                    was, now, base = micro
                    key = ("input_shape", "micro")
                    self._add_cost(key, barrier_s + read_s, n_barrier + read_n,
                                   f"steps accumulating {now} micro-batches of {clean(base, 60)} instead of {was} "
                                   "are graphs of their own: keep the count fixed (batches per epoch a multiple "
                                   "of it), or torch_xla.sync() after each micro-batch's backward")
                    self._say(key, f"step {i} recompiled: it accumulated {now} micro-batches instead of {was}; "
                              f"{so_far}")
                elif resharded is not None:
                    name, before, after = resharded
                    self._sharding_cost(name, barrier_s + read_s, n_barrier + read_n)
                    self._say(("input_sharding", name), f"step {i} recompiled: {clean(name, 60)} sharded "
                              f"{clean(_spec(after), 60)} (before: {clean(_spec(before), 60)}), same shapes; "
                              f"{so_far}")
                elif (added := self._added_inputs(sig)) and nodes is not None and train and nodes > train:
                    # (the analysis' pass_joined: another pass's inputs and ops in the step's graph)
                    key = ("graph_change", "joined")
                    self._add_cost(key, barrier_s + read_s, n_barrier + read_n,
                                   "another pass (an evaluation) with no barrier of its own ran inside a training "
                                   "step's graph: end it with torch_xla.sync()")
                    self._say(key, f"step {i} recompiled: another pass's ops and inputs "
                              f"({clean(listed_inputs(added), 160)}), with no barrier of their own, ran in this "
                              f"training step's graph; {so_far}")
                else:
                    if name is None:
                        name, _old = self._gone_input(sig)  # (moved to the device in some steps only)
                    self._shape_cost(name, barrier_s + read_s, n_barrier + read_n, i)
                    had = name is not None and new is not None and any(
                        n == name and tuple(sh) == tuple(new) for other in self._steady_sigs
                        for n, sh, _, _ in self._sigs.get(other, []))
                    seen = (", which only the one-off first step had" if sig == self._first_sig and self._first_seen
                            else ", seen before but not with the other inputs' shapes" if had
                            else " (first seen)")
                    what = (f"{clean(name, 60)} took shape {_shape(new)}{seen}" if name and new is not None
                            else f"{clean(name, 60)} is missing from its inputs" if name and _old is not None
                            else f"new input {clean(name, 60)}" if name else "the input shapes changed")
                    self._say(("input_shape", name or "?"), f"step {i} recompiled: {what}; {so_far}")
            elif bigger and len(self._grown) >= GROWING_GRAPHS:
                self._add_cost(GROWS_KEY, barrier_s, n_barrier, GROWS_ADVICE)  # (said already)
                self._grown_top = nodes or 0
            elif ran_sites - self._sites_read:
                first_new = min(ran_sites - self._sites_read)
                key = ("sync", str(first_new))
                if key in self._cost:
                    self._cost[key][0] += barrier_s
                    self._cost[key][1] += n_barrier
                    if bigger:
                        self._grow(key, barrier_s, n_barrier, nodes or 0, i, so_far)
            elif ((ix := self._index_read(read_sites)) is not None and nodes is not None and train
                  and abs(nodes - train) <= max(2, train // 20)):
                # The same inputs, a graph of the training graph's size: a tensor read as a slice
                # bound in the step set a shape from its value (the analysis' data_dependent).
                key = self._value_shape_key(ix)
                self._cost[key][0] += barrier_s
                self._cost[key][1] += n_barrier
                self._say(key, f"step {i} recompiled: a tensor used as a slice bound at "
                          f"{self._site_words(ix)[1]} set a new shape from its value; {so_far}")
            elif sig is not None and rec.get("ev") and self._trained_in_train_mode:
                # (the analysis' eval_mode_training: model.eval() not undone after an evaluation)
                key = ("eval_mode", "")
                self._add_cost(key, barrier_s, n_barrier,
                               "training steps run with the model in eval mode: call model.train() after "
                               "evaluating")
                self._say(key, f"step {i} recompiled: it trains with the model in eval mode (model.eval() "
                          f"not undone: dropout off, batch-norm statistics frozen); {so_far}")
            elif op_only:
                pass  # an op run eagerly, compiled on its first run (the analysis' eager_op: info)
            elif sig is not None and self._sig_runs.get(sig, 0) == 1 and self._kinds_of_batches():
                pass  # a kind's second step (the analysis' input_kinds: its own warm-up, info)
            elif sig is not None:
                key = ("graph_change", "")
                sites = [(sid, self._sites.get(sid, {})) for sid in sorted(read_sites)]
                cond = next((sid for sid, site in sites
                             if is_condition(str(site.get("kind", "")), str(site.get("code", "")))), None)
                advice = ("the graph changes with the same inputs: look for a Python value that changes "
                          "between steps")
                why = ""
                if cond is not None:
                    # (the analysis' condition_graph: an `if` on a tensor picked other ops)
                    where = self._site_words(cond)[1]
                    advice = (f"the condition on a tensor at {where} picks the step's ops: keep the decision "
                              "on the device (torch.where)")
                    why = f"; the condition on a tensor at {where}, read in this step, picks its ops"
                self._add_cost(key, barrier_s, n_barrier, advice)
                if not (bigger and self._grow(key, barrier_s, n_barrier, nodes or 0, i, so_far)):
                    self._say(key, f"step {i} recompiled: same input shapes, different graph{why}; {so_far}")
            elif sig is None and nodes is not None:
                # Nothing came from the host: the analysis' graph change on tensors kept on the device.
                key = ("graph_change", "device")
                self._add_cost(key, barrier_s, n_barrier,
                               "the graph changes with nothing new from the host: a tensor kept on the device "
                               "grows (preallocate a cache and write in place), the step uses other tensors "
                               "(frozen or unfrozen, gradients kept or cleared), or a Python number changed")
                self._say(key, f"step {i} recompiled: nothing new came from the host, yet the graph is new: a tensor "
                          f"kept on the device changed shape (a cache grown with torch.cat?), the step used other "
                          f"tensors, or a Python number changed; {so_far}")
        elif steady:
            for op in fallback:
                inside = self._op_call.get(op)
                self._say(("fallback", op), f"step {i}: {clean(op, 60)} has no XLA lowering and runs on the CPU "
                          + (f"inside {inside[1].replace('@', ' at ')} " if inside else "")
                          + f"({c[op]} call{'s' if c[op] != 1 else ''} this step)")
        if self._last_steady and i >= 1 and not rec.get("ev"):
            self._trained_in_train_mode = True
        if work and not at_dynamo:
            self._work += 1
            if sig is not None and not apart:
                self._sig_runs[sig] = self._sig_runs.get(sig, 0) + 1
            if ordinal >= 1 and sig is not None and not quiet:
                self._steady_sigs.add(sig)
            if ordinal >= 1 and sig is not None and not apart:
                self._train_sigs.add(sig)
        if fallback:
            self._seen_fallback.update(fallback)
            if self._last_steady and rec.get("mg"):  # the analysis' graph_cut: graphs run at the ops
                cut = self._cut.setdefault(",".join(sorted(fallback)), [0, 0])
                cut[0] += 1
                cut[1] += int(rec.get("mg") or 0)
        if self._step_syncs:
            self._sites_read.update(int(s["site"]) for s in self._step_syncs)
            self._step_syncs = []

    def _index_read(self, read_sites: set[int]) -> int | None:
        """A site among ``read_sites`` where a device tensor was read as an index or slice bound."""
        for sid in sorted(read_sites):
            if self._sites.get(sid, {}).get("kind") == "index":
                return sid
        return None

    def _value_shape_key(self, sid: int) -> tuple[str, str]:
        """The data-dependent cost key of a slice-bound read whose value set a shape; the first
        time, the read's host-sync cost moves there (the analysis makes them one finding)."""
        key = _dd_cost_key(self._sites.get(sid, {}))
        if sid not in self._value_shape_sites:
            self._value_shape_sites.add(sid)
            where = self._site_words(sid)[1]
            entry = self._cost.setdefault(key, [0.0, 0, f"a tensor used as a slice bound at {where} sets a shape "
                                                       "from its value: slice to a fixed length and mask"])
            old = self._cost.pop(("sync", str(sid)), None)
            if old is not None:
                entry[0] += old[0]
                entry[1] += old[1]
            self._reads[key] = self._reads.get(key, 0) + self._reads.pop(("sync", str(sid)), 0)
            self._forced_dd.add(key)
        return key

    def _dd_key(self, sid: int) -> tuple[str, str] | None:
        """The data-dependent cost key of a read site (None for other reads)."""
        site = self._sites.get(sid, {})
        if str(site.get("kind", "")) not in DATA_DEPENDENT_ACCESSES or site.get("via") or site.get("chain"):
            return None
        key = _dd_cost_key(site)
        return key if key in self._cost else None

    def _fallback_cost(self, ops: list[str], seconds: float, compiles: int) -> tuple[str, str]:
        key = ("cpu_fallback", ",".join(sorted(ops)))
        names = ", ".join(clean(op, 60) for op in sorted(ops))
        self._add_cost(key, seconds, compiles, f"{names} has no XLA lowering and runs on the CPU: "
                       "use an op XLA lowers")
        return key

    def _kinds_of_batches(self) -> bool:
        """An input came with another rank or dtype (a task's targets): batches of different
        kinds take turns (the analysis' input_kinds)."""
        forms: dict[str, list[tuple[Sequence[int], str]]] = {}
        for entries in self._sigs.values():
            for n, shape, dtype, _ in entries:
                forms.setdefault(n, []).append((shape, dtype))
        return any(of_other_kinds(f) for f in forms.values())

    def _shape_cost(self, name: str | None, seconds: float, compiles: int, step: int = 1) -> None:
        self._shape_last[name or "?"] = max(step, self._shape_last.get(name or "?", 0))
        if of_other_kinds((s, d) for v in self._sigs.values() for n, s, d, _ in v if n == name):
            return  # another rank or dtype: batches of another kind, expected (input_kinds: info)
        seen = {tuple(s) for v in self._sigs.values() for n, s, _, _ in v if n == name}
        shapes = len(seen)
        # several non-batch dims changing together is a size (images), not a padded length
        rank = max((len(s) for s in seen), default=0)
        varying = [d for d in range(1, rank) if len({s[d] for s in seen if len(s) > d}) > 1]
        rows = sorted({s[0] for s in seen if s})
        shown = clean(name or "the inputs", 60)
        lengths = sorted({s[varying[0]] for s in seen if len(s) > varying[0]}) if len(varying) == 1 else []
        step = bucket_step(lengths)
        if rank and not varying and len(rows) >= 2:
            # only dim 0 changes: a batch size (the analysis' partial_batch / batch_size_change)
            listed = ", ".join(str(r) for r in rows[:5]) + (" ..." if len(rows) > 5 else "")
            infer = not (self._opt_seen or self._bw_seen or self._grad_on_seen)  # (no sample may be dropped)
            advice = (f"{shown}'s batch size changes ({listed} rows): keep it fixed: "
                      + (f"pad the short batch to {rows[-1]} rows and drop the padded rows' outputs" if infer
                         else f"drop the short batch (DataLoader(..., drop_last=True)) or pad it to {rows[-1]} rows"
                         if len(rows) == 2 else f"pad short batches to {rows[-1]} rows and mask them"))
        elif shapes == 1:
            # one shape, moved in some steps only (the analysis' input_set)
            advice = (f"{shown} is an input of some steps and not others: move the same inputs every step, "
                      "or choose on the device (torch.where)")
        elif step:
            # every length a multiple of one step: padded to buckets already (the analysis' too)
            advice = (f"{shown} is padded to multiples of {step} ({len(lengths)} lengths), a graph each: the price "
                      "of its buckets (fewer, wider ones compile fewer graphs)")
        else:
            advice = (f"{shown} took {shapes} shape{'s' if shapes != 1 else ''}: "
                      + ("resize it to a fixed size" if len(varying) >= 2 else "pad it to a few fixed sizes"))
        self._add_cost(("input_shape", name or "?"), seconds, compiles, advice)

    def _sharding_cost(self, name: str, seconds: float, compiles: int) -> None:
        self._add_cost(("input_sharding", name), seconds, compiles,
                       f"{clean(name, 60)} is sharded more than one way with the same shape: shard every "
                       "batch the same way (xs.mark_sharding each step, or MpDeviceLoader(..., "
                       "input_sharding=xs.ShardingSpec(...)))")

    def _changed_sharding(self, sig: int, among: set[int]) -> tuple[str, str, str] | None:
        """SPMD: (input, earlier spec, new spec) when a signature in ``among`` had the same
        inputs and shapes but sharded one of them another way."""
        now = self._specs.get(sig)
        mine = self._sigs.get(sig)
        if not now or mine is None:
            return None
        shapes = [(n, s) for n, s, _, _ in mine]
        ordered = sorted(mine, key=lambda e: 0 if e[3] in ("batch", "loader", "arg") else 1)
        for other in sorted(among):
            if other == sig or [(n, s) for n, s, _, _ in self._sigs.get(other, [])] != shapes:
                continue
            before = self._specs.get(other, {})
            for name, _, _, _ in ordered:
                if name in before and name in now and before[name] != now[name]:
                    return name, before[name], now[name]
        return None

    def _graph_nodes(self, tb: float, t1: float) -> int | None:
        """Nodes of the graph the barrier compiled (its TensorsGraphSize sample)."""
        for t, n in reversed(self._sizes):
            if tb <= t <= t1:
                return n
        return None

    def _dd_before(self, site: int, t: float) -> tuple[str, str] | None:
        """The cost key of a value-dependent op read in this step before the read at ``site``
        that was running at ``t`` (a compile inside it), if one."""
        start = next((float(s["t0"]) for s in self._step_syncs
                      if int(s["site"]) == site and float(s["t0"]) <= t <= float(s["t1"])), None)
        if start is None:
            return None
        found = None
        for s in self._step_syncs:
            if float(s["t1"]) <= start:
                key = self._dd_key(int(s["site"]))
                if key is not None:
                    found = key
        return found

    def _read_of(self, comp: dict[str, Any]) -> int | None:
        """The site of the host read a mid-step compile ran in (its time is in the read's
        wait), None when it ran in no read."""
        t = float(comp.get("t") or 0)
        for s in self._step_syncs:
            if float(s["t0"]) <= t <= float(s["t1"]):
                return int(s["site"])
        return None

    def _library_call_around(self, comp: dict[str, Any]) -> tuple[str, str] | None:
        """The cost key of the library call a compile outside any read happened inside: the
        step's reads just before and just after it went through the same call (``via``) from
        the same user line (the analysis' rule in ``causes._library_call_around``)."""
        t = float(comp.get("t") or 0)
        start = t - float(comp.get("ns") or 0) / 1e9
        before = after = None
        for s in self._step_syncs:
            if float(s["t1"]) <= start and (before is None or float(s["t1"]) > float(before["t1"])):
                before = s
            if float(s["t0"]) >= t and (after is None or float(s["t0"]) < float(after["t0"])):
                after = s
        if before is None or after is None:
            return None
        a, b = self._sites.get(int(before["site"]), {}), self._sites.get(int(after["site"]), {})
        via = a.get("via")
        if not via or str(via).startswith(("torch._dynamo", "torch_xla._dynamo")) \
                or (via, a.get("file"), a.get("line")) != (b.get("via"), b.get("file"), b.get("line")):
            return None
        key = self._lib_key(int(before["site"]))
        return key if key in self._cost else None

    def _new_library_call(self, read_sites: set[int]) -> tuple[str, str] | None:
        """The cost key (by call) of the one library call outside the loop's own lines whose
        reads in this step are the first at their sites, if there is one."""
        calls = set()
        for sid in read_sites - self._sites_read:
            site = self._sites.get(sid, {})
            if site.get("via") and (site.get("file"), site.get("line")) not in self._loop_lines:
                calls.add(self._call_key(sid))
        return calls.pop() if len(calls) == 1 else None

    def _merge_library_calls(self) -> None:
        """A library call outside the loop's own lines is one cost (``model.generate()``), not
        one per innermost function (the analysis' ``mechanisms.group_key``)."""
        for key, (target, line) in self._lib_call.items():
            entry = self._cost.get(key)
            if entry is None or line in self._loop_lines or target == key:
                continue
            del self._cost[key]
            name, where = target[1].rsplit("@", 1)
            merged = self._cost.setdefault(target, [0.0, 0, f"{name} (called from {where}) reads values on "
                                                              "the host: see the report for the library's lines"])
            merged[0] += entry[0]
            merged[1] += entry[1]
            if key in self._forced_lib:
                self._forced_lib.add(target)

    def _lib_key(self, sid: int) -> tuple[str, str]:
        """The cost key of a library read's site: its innermost library function and user line
        (the analysis' grouping inside the training loop, ``mechanisms.group_key``)."""
        site = self._sites.get(sid, {})
        return ("lib", f"{clean(str(site.get('inner') or site.get('via') or 'a library'), 80)}@"
                       f"{self._site_words(sid)[1]}")

    def _call_key(self, sid: int) -> tuple[str, str]:
        """The cost key of the library call a read site went through: ``via`` and user line
        (the analysis' grouping outside the training loop's lines)."""
        return ("lib", f"{clean(str(self._sites.get(sid, {}).get('via')), 80)}@{self._site_words(sid)[1]}")

    def _site_key(self, sid: int) -> tuple[str, str]:
        """The cost key of a read site: a library's reads group by call, the others by site."""
        site = self._sites.get(sid, {})
        if site.get("via") or site.get("chain"):
            return self._lib_key(sid)
        return ("sync", str(sid))

    def _gone_input(self, sig: int) -> tuple[str | None, tuple[int, ...] | None]:
        """An input of a steady signature that ``sig``, with every other input alike, lacks."""
        mine = self._sigs.get(sig, [])
        for other in self._steady_sigs:
            theirs = self._sigs.get(other, [])
            gone = added_inputs(theirs, [mine]) if mine else []
            if gone:
                return gone[0], next(tuple(sh) for n, sh, _, _ in theirs if n == gone[0])
        return None, None

    def _added_inputs(self, sig: int) -> list[str]:
        """Inputs of ``sig`` beyond a steady signature whose every input it has, same shapes."""
        return added_inputs(self._sigs.get(sig, []), (self._sigs[s] for s in self._steady_sigs if s in self._sigs))

    def _changed_input(self, sig: int) -> tuple[str | None, tuple[int, ...] | None, tuple[int, ...] | None]:
        """The input that changed against the closest earlier steady signature."""
        mine = self._sigs.get(sig, [])
        best: tuple[int, list[tuple[str, tuple[int, ...], str, str]]] | None = None
        for other in self._steady_sigs:
            prev = self._sigs.get(other)
            if prev is None:
                continue
            pmap = {n: s for n, s, _, _ in prev}
            d = sum(0 if pmap.get(n) == s else 1 for n, s, _, _ in mine) + abs(len(mine) - len(prev))
            if best is None or d < best[0]:
                best = (d, prev)
        if best is None:
            return (mine[0][0], None, mine[0][1]) if mine else (None, None, None)
        pmap = {n: s for n, s, _, _ in best[1]}
        # a loader's batch names its inputs best, then a compiled function's parameters
        changed = [(0 if src in ("batch", "loader") else 1 if src == "arg" else 2, n, pmap.get(n), s)
                   for n, s, _, src in mine if pmap.get(n) != s]
        if not changed:
            return None, None, None
        changed.sort(key=lambda c: c[0])
        _, name, old, new = changed[0]
        return name, old, new

    # -- the end ---------------------------------------------------------------------

    def site(self, sid: int) -> dict[str, Any]:
        """The ``site`` record of a host-read site id (empty when not seen)."""
        return self._sites.get(sid, {})

    def _count_graphs(self, step: int, mid: int, at_barrier: int) -> None:
        """Add a training barrier's graphs to its step's; a step that is over is judged: all
        its graphs ran op by op (eager mode), none at a barrier."""
        g = self._graphs
        if step != g[0]:
            self._judge_step()
            g[0], g[1], g[2] = step, 0, 0
        g[1] += mid
        g[2] += at_barrier
        if not self._opt_seen:
            self._judge_step()  # without optimizer steps every graph barrier is a step

    def _judge_step(self) -> None:
        step, mid, at_barrier = self._graphs
        if step < WARMUP_STEPS or not mid or at_barrier or not self._op_compiled or self._eager is not None:
            return
        self._eager = (step, mid)
        self._say(("eager_mode", ""), f"step {step} ran op by op (eager mode): {mid} graph{'s' if mid != 1 else ''} "
                  "dispatched one at a time; compile the step with torch_xla.compile")

    def summary(self, ended: float, run_path: str, tail_step: bool = False, tail_opt: int = 0,
                tail_compile_s: Sequence[float] = (), raised: bool = False,
                exception: str | None = None) -> list[str]:
        """Three lines (steps, compile share, the first thing to change) and the command
        that opens the report; ``raised``: the loop ended with an exception. ``tail_step``:
        the run's last training step ran after its last barrier (eager mode), so no step
        record has it; it counts as the analysis counts it.
        ``tail_opt``, ``tail_compile_s``: optimizer steps and compiles after the last barrier
        (the analysis' ``no_barrier`` finding when the steps never reached one)."""
        wall = max(ended - self.started, 0.0)
        self._compiles += len(tail_compile_s)
        self._compile_s += sum(tail_compile_s)
        # Optimizer steps after the last barrier that nothing read or compiled: they never ran
        # (the analysis' never_ran); with reads or compiles and no barrier at all, no_barrier.
        never_ran = (tail_opt >= 1 and not tail_step and self._work > 0 and self._last_was_work
                     and not tail_compile_s and not self._step_syncs)
        no_barrier = (not never_ran and tail_opt >= 2 and not tail_step
                      and (self._work == 0 or self._last_was_work))
        self._judge_step()  # the last step's barriers are all in
        if self._second is not None and self._first_sig_back:
            # The first graph served later steps: the second step's compile was its new shape's.
            sig, seconds, n = self._second
            self._second = None
            saved, self._steady_sigs = self._steady_sigs, {self._first_sig} if self._first_sig is not None else set()
            name, _, _ = self._changed_input(sig)
            resharded = self._changed_sharding(sig, self._steady_sigs) if name is None else None
            self._steady_sigs = saved
            if resharded is not None:
                self._sharding_cost(resharded[0], seconds, n)
            else:
                self._shape_cost(name, seconds, n)
            self._recompiles += n
        steps = (self._k + 1 if self._opt_seen else self._work) + (max(tail_opt, 1) if tail_step else 0)
        warm = min(steps, WARMUP_STEPS)
        share = self._compile_s / wall if wall > 0 else 0.0
        raised_as = f", then the loop raised {clean(exception.split(':', 1)[0], 60)}" if raised and exception else ""
        lines = [
            f"xprof: {steps} step{'s' if steps != 1 else ''} ({warm} warm-up) in {_seconds(wall)}{raised_as}; "
            f"{self._compiles} compile{'s' if self._compiles != 1 else ''}, {self._recompiles} after warm-up",
            f"xprof: compiling took {_seconds(self._compile_s)}, {share:.0%} of the run",
        ]
        for key, seconds in self._open:
            self._reads[key] -= 1
            entry = self._cost.get(key)
            if entry is not None:
                entry[0] = max(entry[0] - seconds, 0.0)
                if not self._reads[key]:
                    del self._cost[key]
        self._open = []
        self._merge_library_calls()
        ranked = sorted(self._cost.items(), key=lambda kv: (-kv[1][0], kv[0]))
        # (the analysis folds a minor one away: under 1% of the run, or, for a read that runs
        # the device every step, of the run past warm-up's compiles)
        past_warm = max(wall - (self._compile_s - self._recompile_s), 0.0)

        def minor(key: tuple[str, str], seconds: float) -> bool:
            every = (key[0] == "sync" and int(key[1]) in self._forced
                     and self._site_steps.get(int(key[1]), (0, 0))[1] >= 0.9 * max(steps - 1, 1))
            return seconds < MINOR_SHARE * (past_warm if every else wall)

        ranked = [kv for kv in ranked if (kv[0][0] != "sync" or int(kv[0][1]) in self._forced)
                  and (kv[0][0] != "data_dependent" or kv[0] in self._forced_dd)
                  and (kv[0][0] != "lib" or kv[0] in self._forced_lib)
                  and not minor(kv[0], kv[1][0])]
        if raised and steps == 0 and not tail_opt:
            # (a read in the forward of the step that raised is no first thing to change: the error is)
            lines.append(NOTHING_TO_JUDGE)
        elif no_barrier:
            self.first = ("no_barrier", "")
            since = "the last barrier" if self._work else "the start"
            lines.append(f"xprof: first thing to change: no step barrier for {tail_opt} optimizer steps, so "
                         f"each graph held every step since {since}: end each step with torch_xla.sync() "
                         f"({len(tail_compile_s)} compile{'s' if len(tail_compile_s) != 1 else ''}, "
                         f"{_seconds(sum(tail_compile_s))})")
        elif ranked:
            self.first, (seconds, n, advice) = ranked[0]
            if self.first[0] == "input_shape":
                # The analysis' settled shapes: all compiled early, none in a long stretch after.
                last = self._shape_last.get(self.first[1], steps)
                after = steps - 1 - last
                if after >= SETTLED_AFTER and after >= 3 * max(last, 1):
                    advice = (advice.split(":")[0] + f", all by step {last}, none in the {after} steps after: "
                              "a one-off cost")
            cost = f"{n} compile{'s' if n != 1 else ''}, " if n else ""
            lines.append(f"xprof: first thing to change: {advice} ({cost}{_seconds(seconds)})")
        elif never_ran:
            self.first = ("no_barrier", "")
            lines.append(f"xprof: first thing to change: the last {tail_opt} optimizer step"
                         f"{'s' if tail_opt != 1 else ''} never ran (no barrier after "
                         f"{'them' if tail_opt != 1 else 'it'}): end the loop with torch_xla.sync()")
        elif self._eager is not None:
            self.first = ("eager_mode", "")
            lines.append(f"xprof: first thing to change: the step runs op by op (eager mode, {self._eager[1]} "
                         "graphs a step): compile it with torch_xla.compile")
        elif self._cut and max(n for n, _ in self._cut.values()) * 2 >= max(steps - WARMUP_STEPS, 1):
            ops, (n, graphs) = max(self._cut.items(), key=lambda kv: (kv[1][0], kv[0]))
            self.first = ("cpu_fallback", ops)
            names = ", ".join(clean(op, 60) for op in ops.split(","))
            lines.append(f"xprof: first thing to change: {names} ran on the CPU in {n} steps, each cut there "
                         f"({graphs / n:.3g} graphs run early a step): use an op XLA lowers")
        else:
            lines.append("xprof: first thing to change: nothing stands out "
                         + ("(the compiles after warm-up are expected, such as an evaluation pass's own "
                            "graphs, or too small to matter)" if self._recompiles else
                            "(no recompile or host sync with a known cause after warm-up)"))
        lines.append(f"xprof: open the report: xprof report {_quote(run_path)} --open")
        return lines


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(clean(path, 400))


def stderr_line(line: str) -> None:
    """Write one line to the process's stderr now; a closed stderr is not an error."""
    try:
        err = sys.stderr
        if err is not None:
            err.write(line + "\n")
            err.flush()
    except Exception:
        pass
