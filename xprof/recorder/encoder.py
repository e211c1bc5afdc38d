"""The writer thread's side of the recorder: queued events into run-file records.

A step like one already written (same barrier, counter increases, inputs and evidence;
nothing compiled) is written from that step's encoded parts (:meth:`RecordEncoder._steady_step`,
a :class:`~xprof.runfile.EncodedRecord`); every other step, read and site field by field.
"""

from __future__ import annotations

from operator import sub
from typing import Any

from xprof.recorder import metrics as m
from xprof.recorder.events import MESH_KEYS, InputEntry, RawInput
from xprof.recorder.frames import Site
from xprof.recorder.inputs import dtype_name
from xprof.recorder.spmd import mesh_facts, spmd_enabled, spmd_meta
from xprof.runfile import CACHED, EXECUTE, LOCAL_SCALAR, REPLICATED, TO_CPU, UNCACHED, EncodedRecord, encode_record

SAMPLE_BATCH = 256
"""Executions between two reads of the ExecuteTime / TensorsGraphSize sample lists.

Their ring buffers keep 1024 samples (XLA_METRICS_SAMPLES), so reading every 256
executions loses nothing in a loop with up to four syncs a step. The writer thread reads
them (copying a full ring costs 25-40 µs)."""


RAW_SIG_LIMIT = 65536
"""Raw signatures remembered for a fast lookup (a run with more still interns correctly)."""

STEADY_LIMIT = 4096
"""Kinds of steady step remembered with their encoded line (see ``Recorder._steady_step``)."""

_STEP_HEAD = '{"type":"step","i":%d,"t0":%s,"tb":%r,"t1":%s'


class RecordEncoder:
    """The writer thread's side of the :class:`~xprof.recorder.core.Recorder` (a base class
    of it): the events the hooks queued turned into records (counter deltas, steady steps
    written from parts encoded once, signatures and sites interned, compile and sample
    reads), and the state only the writer thread keeps for that."""

    # Kept by the Recorder (the hooks' side), read here.
    step: int
    syncs: int
    spmd: bool
    counters: m.CounterReader
    tail_compile_s: list[float]

    def _init_encoder(self, source: m.MetricsSource) -> None:
        self._mesh: dict[str, Any] = {}
        """SPMD: the mesh last written (header or ``spmd`` record)."""
        self._compile_cursor = m.SampleCursor(source, m.COMPILE_TIME)
        self._op_compile_cursor = m.SampleCursor(source, m.EAGER_COMPILE_TIME)
        self._exec_cursor = m.SampleCursor(source, m.EXECUTE_TIME)
        self._rexec_cursor = m.SampleCursor(source, m.EXECUTE_REPLICATED_TIME)
        self._size_cursor = m.SampleCursor(source, m.GRAPH_SIZE)
        self._xfer_cursor = m.SampleCursor(source, m.TRANSFER_FROM)
        self._compile_buf: list[tuple[float, float, str]] = []
        """Compile samples not written yet: (end, ns, ``at``; "" until the step is known)."""
        self._steps_written = 0
        """Step events turned into records: the index of the step a read or mark belongs to."""
        self._exec_pending = 0
        self._xfer_pending = 0
        self._dtypes: dict[Any, str] = {}
        self._sigs: dict[tuple[InputEntry, ...], int] = {}
        self._raw_sigs: dict[tuple[Any, ...], int] = {}
        """The same signatures keyed by the raw inputs the hooks queued (writer thread)."""
        self._sites: dict[tuple[Any, ...], int] = {}
        self._prev: dict[str, int] = {}
        """The counters at the last step written (those not zero), by name."""
        self._prev_names: tuple[str, ...] = ()
        self._prev_vals: list[int] = []
        """The same, as the barrier read them; ``_prev`` is rebuilt from these when stale."""
        self._prev_stale = False
        self._steady: dict[tuple[Any, ...], tuple[str, dict[str, Any], int, int]] = {}
        """Steady steps seen (see :meth:`_steady_step`), for the counter names in ``_steady_names``."""
        self._steady_names: tuple[str, ...] = ()
        self._t_text: tuple[float, str] = (-1.0, "")
        """The last ``t1`` written and its text: the next step's ``t0`` is the same time."""

    # -- the writer thread's side ----------------------------------------------------

    def _prev_snapshot(self) -> dict[str, int]:
        if self._prev_stale:
            self._prev = {n: v for n, v in zip(self._prev_names, self._prev_vals) if v}
            self._prev_stale = False
        return self._prev

    def _steady_step(self, ev: tuple[Any, ...], out: list[dict[str, Any]]) -> bool:
        """Write a step like one already written (same barrier, counter increases, inputs
        and evidence; nothing compiled) from that step's encoded parts: only its index and
        times are new. Most steps of a training loop are such a step. False when it is not
        one seen before (the caller builds it field by field, and :meth:`_learn_steady`
        keeps its parts). The writer's hot path: every step of a steady loop comes here."""
        names = ev[7]
        if ev[10] is not None or ev[11] is not None or names is not self._steady_names \
                or names is not self._prev_names:
            return False  # a step with notes or a site, or the counter names changed
        inputs = ev[9]
        sid = None
        if inputs:
            sid = self._raw_sigs.get(tuple(inputs))
            if sid is None:
                return False
        vals = ev[8]
        known = self._steady.get(_steady_key(ev, tuple(map(sub, vals, self._prev_vals)), sid))
        if known is None:
            return False
        tail, fields, executions, transfers = known
        i, t0, tb, t1 = ev[1], ev[2], ev[3], ev[4]
        self._steps_written = i + 1
        self._prev_vals = vals
        self._prev_stale = True
        last_t, t0_text = self._t_text
        if t0 != last_t:
            t0_text = repr(t0)
        t1_text = repr(t1)
        self._t_text = (t1, t1_text)
        rec = EncodedRecord(fields)
        rec["i"], rec["t0"], rec["tb"], rec["t1"] = i, t0, tb, t1
        rec.line = _STEP_HEAD % (i, t0_text, tb, t1_text) + tail
        rec.steady = fields
        if executions or transfers:
            self._exec_pending += executions
            self._xfer_pending += transfers
            if self._exec_pending >= SAMPLE_BATCH or self._xfer_pending >= SAMPLE_BATCH:
                self._flush_samples(out)
        out.append(rec)
        return True

    def _learn_steady(self, ev: tuple[Any, ...], rec: dict[str, Any], executions: int, transfers: int) -> None:
        """Keep the parts of a step written field by field that a later step like it reuses:
        its fields after the times, encoded, and what it adds to the pending sample reads."""
        names, vals, prev = ev[7], ev[8], self._prev_vals
        if ev[10] is not None or ev[11] is not None or names is not self._prev_names:
            return  # (the same names: the values line up)
        increases = tuple(map(sub, vals, prev))
        if min(increases) < 0 or increases[0] or rec.get("bu") or len(self._steady) >= STEADY_LIMIT:
            return  # a counter reset (read as counting from 0), or a compile: not reusable
        fields = {k: v for k, v in rec.items() if k not in ("type", "i", "t0", "tb", "t1")}
        if names is not self._steady_names:
            self._steady = {}
            self._steady_names = names
        self._steady[_steady_key(ev, increases, rec.get("sig"))] = (
            "," + encode_record(fields)[1:] + "\n", {"type": "step", **fields}, executions, transfers)

    def _step_records(self, ev: tuple[Any, ...], out: list[dict[str, Any]]) -> None:
        """A step that is not one already written (see :meth:`_steady_step`), field by field."""
        (_, i, t0, tb, t1, kind, before, names, vals, inputs, extra, site, opt, graphs, no_grad, eval_mode,
         backwards, mid, turned_off) = ev
        self._steps_written = i + 1
        snap = {n: v for n, v in zip(names, vals) if v}
        d = m.delta(snap, self._prev_snapshot())
        rec: dict[str, Any] = {"type": "step", "i": i, "t0": t0, "tb": tb, "t1": t1, "barrier": kind}
        if d:
            rec["c"] = d
        bu = m.increase(snap.get(UNCACHED, 0), before[0])
        bc = m.increase(snap.get(CACHED, 0), before[1])
        if bu:
            rec["bu"] = bu
        if site is not None and (bu or d.get(UNCACHED)):
            rec["site"] = self._intern_site("barrier", site, out)
        # What tells a training step from the other barriers: optimizer steps since the
        # last barrier (``o``), graphs torch.compile extracted (``dz``), grad mode (``ng``),
        # modules in eval mode (``ev``), backward passes (``bw``).
        _put_nonzero(rec, (("bc", bc), ("o", opt), ("dz", graphs), ("ng", 1 if no_grad else 0),
                           ("ev", 1 if eval_mode else 0), ("bw", backwards), ("mg", mid),
                           ("gd", 1 if turned_off else 0)))
        if inputs:
            rec["sig"] = self._intern_sig(inputs, out)
        if extra:
            rec.update(extra)
        if d.get(UNCACHED):
            buf = self._compile_buf
            buf.extend((ts, ns, "") for ts, ns in self._compile_cursor.new())
            # An op run eagerly (eager mode) compiles on its own, timed in another metric.
            op = self._op_compile_cursor.new()
            if op:
                buf.extend((ts, ns, "op") for ts, ns in op)
                buf.sort()
            kept = []
            for ts, ns, at in buf:
                if ts <= t1:
                    out.append({"type": "compile", "i": i, "t": ts, "ns": ns,
                                "at": at or ("barrier" if ts >= tb else "step")})
                else:
                    kept.append((ts, ns, at))  # a later step's (the writer runs behind)
            self._compile_buf = kept
        executions = d.get(EXECUTE, 0) + d.get(REPLICATED, 0)
        transfers = d.get(TO_CPU, 0) + d.get(LOCAL_SCALAR, 0)
        self._exec_pending += executions
        self._xfer_pending += transfers
        if bu or d.get(UNCACHED) or self._exec_pending >= SAMPLE_BATCH or self._xfer_pending >= SAMPLE_BATCH:
            # (a step that compiled: its graphs' sizes come before it, for the live notices)
            self._flush_samples(out)
        out.append(rec)
        self._learn_steady(ev, rec, executions, transfers)
        self._prev = snap
        self._prev_names = names
        self._prev_vals = vals
        self._t_text = (-1.0, "")

    def _tail_compiles(self, out: list[dict[str, Any]]) -> None:
        """Compiles after the last barrier (a final print's graph; every graph of a loop that
        never reached a barrier): ``compile`` records of step ``self.step``, which has no step
        record (the ``end`` record's ``tail`` counts them)."""
        buf = self._compile_buf
        buf.extend((ts, ns, "") for ts, ns in self._compile_cursor.new())
        buf.extend((ts, ns, "op") for ts, ns in self._op_compile_cursor.new())
        buf.sort()
        self._compile_buf = []
        out.extend({"type": "compile", "i": self.step, "t": ts, "ns": ns, "at": at or "step"} for ts, ns, at in buf)
        self.tail_compile_s = [ns / 1e9 for _, ns, _ in buf]

    def _flush_samples(self, out: list[dict[str, Any]]) -> None:
        self._exec_pending = 0
        execs = self._exec_cursor.new()
        replicated = self._rexec_cursor.new()
        if replicated:  # SPMD: one sample per execution over all of the process's devices
            execs = sorted(execs + replicated) if execs else replicated
        if execs:
            out.append({"type": "exec", "samples": [list(s) for s in execs]})
        if self._xfer_pending:
            self._xfer_pending = 0
            xfer = self._xfer_cursor.new()
            if xfer:
                out.append({"type": "xfer", "samples": [list(s) for s in xfer]})
        sizes = self._size_cursor.new()
        if sizes:
            out.append({"type": "graph_sizes", "samples": [list(s) for s in sizes]})

    def _name_inputs(self, inputs: list[RawInput]) -> list[InputEntry]:
        """The step's inputs as recorded: a name taken twice gets ``#2``, dtypes as text."""
        taken: dict[str, int] = {}
        dtypes = self._dtypes
        out: list[InputEntry] = []
        for e in inputs:
            name, shape, dtype, src = e[0], e[1], e[2], e[3]
            n = taken.get(name, 0)
            taken[name] = n + 1
            if n:
                name = f"{name}#{n + 1}"
            dt = dtypes.get(dtype)
            if dt is None:
                dt = dtypes[dtype] = dtype_name(dtype)
            out.append((name, tuple(shape), dt, src) if len(e) == 4 else (name, tuple(shape), dt, src, e[4]))
        return out

    def _intern_sig(self, inputs: list[RawInput], out: list[dict[str, Any]]) -> int:
        # Steps repeat a few signatures: the raw tuples (names, torch.Size, dtypes) are looked
        # up first, so naming and converting happen once per distinct signature, not per step.
        raw = tuple(inputs)
        sid = self._raw_sigs.get(raw)
        if sid is not None:
            return sid
        key = tuple(self._name_inputs(inputs))
        sid = self._sigs.get(key)
        if sid is None:
            sid = len(self._sigs)
            self._sigs[key] = sid
            out.append({"type": "sig", "id": sid, "inputs": [_input_record(e) for e in key]})
            if self.spmd:
                self._note_mesh(out)
        if len(self._raw_sigs) < RAW_SIG_LIMIT:
            self._raw_sigs[raw] = sid
        return sid

    def _note_mesh(self, out: list[dict[str, Any]]) -> None:
        """SPMD: write the global mesh when it differs from the one written last (it is
        often set after ``watch()`` started). Looked at with each new signature and at the end."""
        facts = mesh_facts()
        if facts and facts != self._mesh:
            self._mesh = facts
            out.append({"type": "spmd", **facts})

    def _spmd_at_stop(self, out: list[dict[str, Any]]) -> None:
        """The mesh as it is at the end; and a run that switched SPMD on after its first
        graph (``use_spmd()`` forces it then) is said to be one, late."""
        if not self.spmd and spmd_enabled():
            self.spmd = True
            self.counters.count_replicated()
            out.append({"type": "spmd", **{k: v for k, v in (spmd_meta() or {}).items() if k not in MESH_KEYS}})
        if self.spmd:
            self._note_mesh(out)

    def _sync_records(self, ev: tuple[Any, ...], out: list[dict[str, Any]]) -> None:
        _, kind, site, t0, t1, before, after, deferred, thread = ev
        # The step a read belongs to is where it sits in the queue, after the barriers of
        # the steps before it. A read in a step closure runs inside a barrier, before that
        # barrier's step is queued, and belongs to the step before.
        i = self._steps_written - 1 if deferred else self._steps_written
        self.syncs += 1
        rec: dict[str, Any] = {"type": "sync", "i": i, "site": self._intern_site(kind, site, out),
                               "t0": t0, "t1": t1}
        increase = m.increase  # a counter reset (torch.compile's bridge) counts from 0
        _put_nonzero(rec, (("u", increase(after[0], before[0])), ("c", increase(after[1], before[1])),
                           ("x", increase(after[2], before[2])), ("deferred", bool(deferred))))
        if thread is not None:
            rec["thread"] = thread
        out.append(rec)

    def _intern_site(self, kind: str, site: Site | None, out: list[dict[str, Any]]) -> int:
        file, line, func, via, inner, chain, inner_file, inner_line, caller_file, caller_line = (
            site if site is not None else ("?", 0, "?", None, None, (), None, 0, None, 0))
        # The chain is part of a site's identity: the same user line reaches a barrier or a
        # read through different library paths (the HF Trainer's logging and its evaluation
        # both run under ``trainer.train()`` and both end in xm.mark_step's wrapper).
        key = (kind, file, line, func, via, inner, chain, inner_file, inner_line, caller_file, caller_line)
        sid = self._sites.get(key)
        if sid is None:
            sid = len(self._sites)
            self._sites[key] = sid
            rec: dict[str, Any] = {"type": "site", "id": sid, "kind": kind, "file": file, "line": line,
                                   "func": func, "via": via, "code": site.code() if site else ""}
            if inner:
                rec["inner"] = inner
            if chain:
                rec["chain"] = list(chain)
            if inner_file and site is not None:
                rec["inner_at"] = [inner_file, inner_line, site.inner_code()]
            if caller_file and site is not None:
                rec["caller"] = [caller_file, caller_line, site.caller_code()]
            out.append(rec)
        return sid


def _put_nonzero(rec: dict[str, Any], fields: tuple[tuple[str, Any], ...]) -> None:
    """Set each field whose value is not zero or false, in order: a record leaves out a count
    or a flag that is zero."""
    for key, value in fields:
        if value:
            rec[key] = value


def _steady_key(ev: tuple[Any, ...], increases: tuple[int, ...], sid: int | None) -> tuple[Any, ...]:
    """What makes a step written like another: its barrier kind, counter increases,
    compiles at the barrier (uncached, cached), optimizer steps, dynamo graphs, grad and
    eval mode, backward passes, graphs run mid-step outside host reads, grad turned off
    (``ev[12:19]``) and input signature."""
    vals, before = ev[8], ev[6]
    return (ev[5], increases, vals[0] - before[0], vals[1] - before[1], ev[12:19], sid)


def _input_record(entry: InputEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"name": entry[0], "shape": list(entry[1]), "dtype": entry[2], "src": entry[3]}
    if len(entry) > 4:
        out["sharding"] = entry[4]  # type: ignore[misc]
    return out
