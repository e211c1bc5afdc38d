"""Where a CPU fallback in the backward pass came from: the forward call that made it.

An op with no XLA lowering in the backward pass (``aten::upsample_bilinear2d_backward`` on
torch_xla 2.9) runs from autograd's C++ engine: no Python frame is on the stack, so its counter
has no line. The forward call that created its autograd node has one. Once such a counter
appears, autograd's anomaly mode is on for one step (``check_nan=False``: it reads no values):
each node made in that step keeps the stack of its forward call, and at that step's backward
the nodes of the fallen-back ops are found in the graph and their user line recorded (a
``debug`` record of kind ``fallback_site``). Anomaly mode leaves what torch_xla traces as it is
(the same compiles, checked on a transformer loop); a ``TorchDispatchMode`` did not (it changed
how composite ops decompose, and a graph compiled again).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from xprof.recorder.frames import FrameClassifier, FrameKind

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n\s*(?P<code>[^\n]*)')

NODE_LIMIT = 20_000
"""Autograd nodes looked at, at most, in the located step's graph."""


def node_key(name: str) -> str:
    """An autograd node's name or a fallback counter's, as one key:
    ``UpsampleBilinear2DBackward0`` and ``aten::upsample_bilinear2d_backward`` ->
    ``upsamplebilinear2dbackward``."""
    name = name.split("::", 1)[-1]
    return re.sub(r"\d+$", "", name).replace("_", "").lower()


class BackwardFallbacks:
    """Finds the forward line of each backward op that fell back to the CPU, once per op."""

    def __init__(self, frames: FrameClassifier, mark: Callable[..., None],
                 error: Callable[[str, BaseException], None]) -> None:
        self._frames = frames
        self._mark = mark
        self._error = error
        self._seen: set[str] = set()
        self.pending: dict[str, str] = {}
        """Node key -> counter name, waiting for the next step."""
        self.active: dict[str, str] | None = None
        """The ops looked for in the step in progress (anomaly mode on)."""
        self._restore: tuple[bool, bool] | None = None
        self._lock = threading.Lock()

    def want(self, counters: Iterable[str]) -> None:
        """New fallback counters (either thread): the backward ones are looked for next step."""
        new = [n for n in counters if n.endswith("_backward") and n not in self._seen]
        if new:
            with self._lock:
                self._seen.update(new)
                self.pending = {**self.pending, **{node_key(n): n for n in new}}

    def at_barrier(self) -> None:
        """A barrier (training thread): end the located step, start one if ops wait."""
        try:
            if self.active is not None:
                self._anomaly_off()
            if self.pending:
                with self._lock:
                    self.active, self.pending = self.pending, {}
                self._anomaly_on()
        except Exception as exc:
            self.active = None
            self._error("fallback sites", exc)

    def on_backward(self, tensors: Any) -> None:
        """``torch.autograd.backward``'s first argument, in a located step."""
        wanted = self.active
        if not wanted:
            return
        try:
            for key, node in _nodes_named(tensors, wanted):
                site = self._user_frame(node)
                if site is not None:
                    self._mark("fallback_site", op=wanted[key], node=node.name(), **site)
        except Exception as exc:
            self._error("fallback sites", exc)

    def close(self) -> None:
        """The recording stops: anomaly mode back as it was."""
        if self.active is not None:
            try:
                self._anomaly_off()
            except Exception as exc:
                self._error("fallback sites", exc)

    def _anomaly_on(self) -> None:
        import torch

        if torch.is_anomaly_enabled():
            return  # the user's own: its stacks are there already
        self._restore = (False, torch.is_anomaly_check_nan_enabled())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ("Anomaly Detection has been enabled...")
            torch.autograd.set_detect_anomaly(True, check_nan=False)

    def _anomaly_off(self) -> None:
        self.active = None
        restore, self._restore = self._restore, None
        if restore is not None:
            import torch

            torch.autograd.set_detect_anomaly(restore[0], check_nan=restore[1])

    def _user_frame(self, node: Any) -> dict[str, Any] | None:
        """The innermost user frame of the stack anomaly mode kept for ``node``."""
        stack = node.metadata.get("traceback_") if hasattr(node, "metadata") else None
        if not stack:
            return None
        kind = self._frames.kind
        for entry in reversed(stack if isinstance(stack, list) else [stack]):
            m = _FRAME.search(str(entry))
            if m and kind(m["file"]) == FrameKind.USER:
                return {"file": m["file"], "line": int(m["line"]), "func": m["func"].strip(),
                        "code": m["code"].strip()}
        return None


def _nodes_named(tensors: Any, wanted: dict[str, str]) -> list[tuple[str, Any]]:
    """The autograd nodes behind ``tensors`` whose name is one of ``wanted``'s keys, first each."""
    roots = tensors if isinstance(tensors, (list, tuple)) else [tensors]
    todo = [t.grad_fn for t in roots if getattr(t, "grad_fn", None) is not None]
    seen: set[Any] = set()
    found: dict[str, Any] = {}
    while todo and len(seen) < NODE_LIMIT and len(found) < len(wanted):
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        key = node_key(node.name())
        if key in wanted and key not in found:
            found[key] = node
        todo.extend(f for f, _ in node.next_functions)
    return list(found.items())
