"""torch.compile (dynamo) on XLA: the graphs its bridge extracts, its recompile limit, and its
failed guards (why it recompiled).
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

from xprof.recorder.core import Recorder
from xprof.recorder.hooks.patching import Patches


def install_dynamo(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Count the graphs torch.compile's XLA bridge extracts (a trace or a retrace for new
    shapes): compiles in a step where it ran are dynamo's. Only where torch_xla already
    loaded its bridge (importing it here would cost the user seconds)."""
    bridge = sys.modules.get("torch_xla._dynamo.dynamo_bridge")
    if bridge is None:
        return
    original = getattr(bridge, "extract_graph_helper", None)
    if original is None:
        return
    bump = rec.on_dynamo_graph

    def extract_graph_helper(*args: Any, **kwargs: Any) -> Any:
        if rec.active:
            bump()
        return original(*args, **kwargs)

    extract_graph_helper.__name__ = original.__name__
    extract_graph_helper.__doc__ = original.__doc__
    patches.set(bridge, "extract_graph_helper", extract_graph_helper)
    _install_optimized_module(rec, patches)


def _install_optimized_module(rec: Recorder, patches: Patches) -> None:
    """A compile inside a ``torch.compile``'d module's call (the bridge running a graph for a
    new input shape the first time) is dynamo's: two counter reads around each call."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    module_type = getattr(eval_frame, "OptimizedModule", None)
    if module_type is None:
        return
    original = module_type.__call__
    uncached = rec.counters.compile_counts
    bump = rec.on_dynamo_graph

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not rec.active:
            return original(self, *args, **kwargs)
        before = uncached()[0]
        result = original(self, *args, **kwargs)
        after = uncached()[0]
        if after != before and (after > before or after > 0):  # a reset by the bridge counts from 0
            bump()
        return result

    __call__.__name__ = "__call__"
    patches.set(module_type, "__call__", __call__)


DYNAMO_LOGGER = "torch._dynamo.convert_frame"
"""Where torch._dynamo says it hit a recompile limit and gave up compiling a function."""

_DYNAMO_FUNC = re.compile(r"'(?P<func>[^']*)' \((?P<file>.*):(?P<line>\d+)\)")


class _DynamoLimitHandler(logging.Handler):
    """Marks the step where torch.compile gave up on a function (its ``recompile_limit``
    warning, with the function and the last failed guard): from then on the function runs
    without torch.compile, as plain lazy tensor ops."""

    def __init__(self, rec: Recorder) -> None:
        super().__init__(logging.WARNING)
        self.rec = rec

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if not (isinstance(msg, str) and msg.startswith("torch._dynamo hit config.") and self.rec.active):
            return
        try:
            args = tuple(record.args) if isinstance(record.args, tuple) else ()
            limit, value, func, reason = (args + (None,) * 4)[:4]
            m = _DYNAMO_FUNC.search(str(func))
            self.rec.mark("dynamo_limit", limit=str(limit), value=value if isinstance(value, int) else None,
                          func=m.group("func") if m else str(func)[:200],
                          file=m.group("file") if m else None, line=int(m.group("line")) if m else None,
                          reason=str(reason)[:300] if reason is not None else None)
        except Exception as exc:
            self.rec.error("dynamo limit hook", exc)


def install_dynamo_limit(rec: Recorder, patches: Patches, torch: Any) -> None:
    """Listen for torch._dynamo's recompile-limit warning (it still reaches the user)."""
    logger = logging.getLogger(DYNAMO_LOGGER)
    handler = _DynamoLimitHandler(rec)
    logger.addHandler(handler)
    patches.on_restore(lambda: logger.removeHandler(handler))


def dynamo_guard_counts() -> dict[Any, int]:
    """How many failed guards torch._dynamo has kept per function so far (at watch start)."""
    failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
    return {code: len(reasons) for code, reasons in list(failures.items())} if failures else {}


_ENTRY_ID = re.compile(r"^\s*\[?(\d+/\d+)\]?\s*:")


def _first_per_entry(reasons: list[Any]) -> list[Any]:
    """Each recompile re-checks every cached entry and dynamo keeps every failure, so the
    list grows with the square of the recompiles; an entry's later failures repeat its first
    (``0/0: ... expected 4, actual 9``). Its first failure is why its successor was traced."""
    seen: set[str] = set()
    out = []
    for r in reasons:
        m = _ENTRY_ID.match(str(r))
        if m is not None:
            if m.group(1) in seen:
                continue
            seen.add(m.group(1))
        out.append(r)
    return out


def dynamo_guard_failures(since: dict[Any, int] | None = None) -> list[dict[str, Any]]:
    """Why torch.compile recompiled: torch._dynamo's own record of failed guards, by function,
    those added after ``since`` (the counts at watch start)."""
    failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
    if not failures:
        return []
    since = since or {}
    out = []
    for code, reasons in list(failures.items())[:32]:
        new = _first_per_entry(list(reasons)[since.get(code, 0):])[:32]
        if new:
            out.append({"func": getattr(code, "co_name", str(code)),
                        "file": getattr(code, "co_filename", "?"),
                        "line": getattr(code, "co_firstlineno", 0),
                        "reasons": [str(r)[:500] for r in new]})
    return out
