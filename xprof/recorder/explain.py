"""``--explain``: what changed in a new graph, and at which user line.

On the training thread, before each step barrier (one call from the barrier hook, only
while the mode is on): the graph hash of the tensors the recorder knows (the optimizers'
parameters, their gradients and state, the losses given to ``backward()`` since the last
barrier, and any the user registered) tells a new graph from a known one
(``_get_graph_hash``, ~0.1-0.6 ms); only for a new one, the graph itself
(``_get_xla_tensors_hlo_proto``, ~1-5 ms) is queued. On the writer thread, the graph is
read (:mod:`xprof.hlo.reader`), compared with the closest graph seen before
(:mod:`xprof.hlo.diff`) and written as a ``debug`` record of kind ``graph``.

torch_xla records each IR node's Python frames only under ``_set_ir_debug(True)`` (~2 µs a
traced node; graph hashes and compiles are the same), so the mode is one: on from the start
under ``watch(explain=True)`` / ``xprof run --explain``, and switched on by itself after the
first compile the live diagnosis can only call a changed graph (the rules of
``diagnosis.registry.UNEXPLAINED``: the same verdict the report gives), so later ones get their
lines. The previous ``ir_debug`` value is restored when the watch ends.
"""

from __future__ import annotations

import linecache
import weakref
from dataclasses import dataclass
from typing import Any

from xprof.hlo import Graph, GraphDiff, diff, distance, keys, read_module
from xprof.recorder.frames import FrameClassifier, FrameKind

MAX_KNOWN = 32
"""Graphs kept to compare a new one with (the first two, then the latest)."""


@dataclass
class _Known:
    i: int
    graph: Graph
    keys: list[int]


class Explain:
    """The mode's state: the hashes seen (training thread), the graphs kept (writer thread)."""

    def __init__(self, rec: Any, xlac: Any, frames: FrameClassifier, since: int = 0, auto: bool = False) -> None:
        self.rec = rec
        self.xlac = xlac
        self.frames = frames
        self.since = since
        """The step the mode was switched on at."""
        self.auto = auto
        self.hashes: set[bytes] = set()
        self.losses: list[weakref.ref[Any]] = []
        """The tensors given to ``backward()`` since the last barrier (weak: a loss the loop
        dropped must not join the barrier's graph)."""
        self.registered: list[weakref.ref[Any]] = []
        self.known: dict[str, list[_Known]] = {}
        """Graphs kept by where they ran: ``barrier``, or ``read FILE:LINE`` (a read's graph is
        compared with the graphs the same line read before)."""
        self.captured = 0
        """New graphs captured (their protos queued)."""
        self._user: dict[str, bool] = {}

    # -- the training thread ---------------------------------------------------------

    def saw_backward(self, tensors: Any) -> None:
        """``torch.autograd.backward``'s first argument (the loss, or a sequence of them)."""
        try:
            items = tensors if isinstance(tensors, (list, tuple)) else (tensors,)
            for t in items:
                if getattr(t, "is_xla", False):
                    self.losses.append(weakref.ref(t))
        except Exception as exc:
            self.rec.error("explain", exc)

    def register(self, tensors: Any) -> None:
        for t in tensors:
            if getattr(t, "is_xla", False):
                self.registered.append(weakref.ref(t))

    def tensors(self) -> list[Any]:
        """The tensors whose pending graph is hashed: losses, registered ones, the optimizers'
        parameters, gradients and state (XLA tensors only, each once)."""
        out: list[Any] = []
        seen: set[int] = set()

        def add(t: Any) -> None:
            if t is not None and id(t) not in seen and getattr(t, "is_xla", False):
                seen.add(id(t))
                out.append(t)

        for ref in self.losses:
            add(ref())
        self.losses = []
        live = [r for r in self.registered if r() is not None]
        self.registered = live
        for ref in live:
            add(ref())
        for opt in list(self.rec.optimizers or ()):
            state = opt.state
            for group in opt.param_groups:
                for p in group["params"]:
                    add(p)
                    add(p.grad)
                    st = state.get(p)
                    if st:
                        for v in st.values():
                            add(v)
        return out

    def before_barrier(self) -> None:
        """Hash the pending graph; for a new one, queue its proto. Never raises."""
        try:
            ts = self.tensors()
            if not ts:
                return
            h = self.xlac._get_graph_hash(ts)
            if h in self.hashes:
                return
            self.hashes.add(h)
            proto = self.xlac._get_xla_tensors_hlo_proto(ts)
            self.captured += 1
            self.rec.queue_lazy(lambda i: self.record(i, bytes(h), proto, "barrier", "barrier"))
        except Exception as exc:
            self.rec.error("explain", exc)

    def before_read(self, tensor: Any, frame: Any) -> None:
        """A host read of ``tensor`` from ``frame``: the graph it runs (``stack(losses).mean()``
        read with ``.item()``), hashed and, when new, queued like a barrier's. Never raises."""
        try:
            h = self.xlac._get_graph_hash([tensor])
            if h in self.hashes:
                return
            self.hashes.add(h)
            proto = self.xlac._get_xla_tensors_hlo_proto([tensor])
            group = f"read {frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "read"
            self.captured += 1
            self.rec.queue_lazy(lambda i: self.record(i, bytes(h), proto, "read", group))
        except Exception as exc:
            self.rec.error("explain", exc)

    # -- the writer thread -----------------------------------------------------------

    def _is_user(self, path: str) -> bool:
        got = self._user.get(path)
        if got is None:
            got = self._user[path] = self.frames.kind(path) == FrameKind.USER
        return got

    def record(self, i: int, h: bytes, proto: bytes, at: str, group: str) -> dict[str, Any] | None:
        """The ``graph`` record of a new graph captured in step ``i`` at a barrier or a read
        (``at``), compared with the closest graph of its ``group``; None for a graph with no op
        (nothing was pending)."""
        graph = read_module(proto)
        if not any(op.opcode not in ("parameter", "tuple") for op in graph.ops):
            return None
        ks = keys(graph)
        known = self.known.setdefault(group, [])
        base = min(known, key=lambda k: distance(k.keys, ks)) if known else None
        out: dict[str, Any] = {"type": "debug", "kind": "graph", "i": i, "at": at, "hash": h.hex(),
                               "ops": len(graph.ops), "inputs": graph.parameters}
        if base is not None:
            d = diff(base.graph, graph, self._is_user, base.keys, ks)
            out["base"] = base.i
            out.update(diff_fields(d))
        known.append(_Known(i, graph, ks))
        if len(known) > MAX_KNOWN:
            del known[2]  # (the first two stay: the one-off first step and the steady one)
        return out


def diff_fields(d: GraphDiff) -> dict[str, Any]:
    """A diff as the ``graph`` record's fields, each line with its source."""
    lines = []
    for c in d.lines:
        c.code = linecache.getline(c.file, c.line).strip()
        lines.append(c.as_record())
    out: dict[str, Any] = {"changed": d.changed, "lines": lines}
    if d.more_lines:
        out["more_lines"] = d.more_lines
    if d.backward:
        out["backward"] = d.backward
    if d.library:
        out["library"] = d.library
    return out
