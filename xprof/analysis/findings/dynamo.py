"""torch.compile (dynamo) as findings: why it retraced (its failed guards, as it words them)
and the functions it gave up on."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.model import Finding
from xprof.diagnosis.cause import Cause, CauseName
from xprof.diagnosis.evidence import dynamo_func
from xprof.diagnosis.keys import FindingKey


@dataclass
class _GaveUp:
    """torch.compile stopped compiling a function (its recompile limit): from ``step`` on,
    the function ran as plain lazy tensor ops, and XLA compiled ``later`` graphs at barriers
    (other findings' compiles: the shapes or graphs that changed)."""

    func: str
    limit: str
    value: int | None
    step: int
    later: int
    reason: str | None
    barrier: int
    """The barrier index the mark came before (``step`` is the training step)."""

    def evidence(self) -> str:
        value = f" ({self.value})" if self.value is not None else ""
        return (f"torch._dynamo hit config.{self.limit}{value} for {self.func} at step {self.step}: from then "
                "on it runs as plain lazy tensor ops, traced in Python every step, and XLA compiles a graph "
                f"at the barrier for each new shape ({self.later} compile{'s' if self.later != 1 else ''} "
                f"after step {self.step}, counted in the other findings)")



def gave_up_finding(gave_up: list[_GaveUp]) -> Finding:
    """torch.compile gave up on a function when its retraces all came in warm-up (so no
    dynamo finding took them): the fact stays a finding of its own, never minor."""
    u = gave_up[0]
    value = f" = {u.value}" if u.value is not None else ""
    evidence = [x.evidence() for x in gave_up]
    if u.reason:
        evidence.append(f"the last failed guard: {u.reason[:200]}")
    return Finding(
        id="dynamo_limit", cause=CauseName.DYNAMO, kind="dynamo_limit",
        title=(f"torch.compile gave up on {u.func} at step {u.step} (torch._dynamo.config.{u.limit}{value}) "
               "and runs it uncompiled from then on"),
        count=len(gave_up), compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0,
        advice="Fix what makes torch.compile retrace (the failed guard above; a new input size is the "
               "usual one: keep shapes fixed). " + ADVICE["dynamo_limit"],
        evidence=evidence, steps=[u.barrier], severity="warning",
    )



def functions_given_up(marks: list[dict[str, Any]], compiles: pd.DataFrame, causes: list[Cause],
             ordinal_of: Mapping[int, int]) -> list[_GaveUp]:
    out = []
    steps_of = compiles["step"].to_numpy(dtype=np.int64) if len(compiles) else np.zeros(0, dtype=np.int64)
    for m in marks:
        i = m.get("i")
        if not isinstance(i, int):
            continue
        later = sum(1 for k, c in enumerate(causes)
                    if steps_of[k] >= i and c.cause not in (CauseName.DYNAMO, CauseName.WARMUP))
        value = m.get("value")
        out.append(_GaveUp(dynamo_func(str(m.get("func") or "?"), m.get("file"), m.get("line")),
                           str(m.get("limit") or "recompile_limit"), value if isinstance(value, int) else None,
                           ordinal_of.get(i, i), later, str(m["reason"]) if m.get("reason") else None, i))
    return out



def dynamo_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, reads: pd.DataFrame,
                    guards: list[dict[str, Any]], gave_up: list[_GaveUp] | None = None) -> Finding:
    ms = float(rows["ms"].sum())
    n = len(rows)
    comp_steps = sorted({int(s) for s in rows["step"]})
    firsts = first_failures(guards)
    reasons = [r for _, r in firsts]
    why = ""
    sized: tuple[str, int, list[int]] | None = None
    if reasons:
        _, example, count = commonest_guard(reasons)
        # dynamo's retraces (guard failures), not the XLA graphs the title counts
        share = f"{count} of {len(reasons)} dynamo retraces: " if len(reasons) > 1 else ""
        sized = size_guard(reasons, example)
        if sized is not None:
            name, dim, sizes = sized
            why = f" ({share}{name} dim {dim} took {len(sizes)} sizes: {', '.join(str(v) for v in sizes)})"
        else:
            why = f" (guard failed, {share}{example[:120]})"
    title = (f"torch.compile (dynamo) traced and compiled {n} graph{'s' if n != 1 else ''} after warm-up"
             f"{why}: {ms / 1e3:.2f} s")
    gave_up = gave_up or []
    if gave_up:
        title += f"; then it gave up on {gave_up[0].func} at step {gave_up[0].step} and runs it uncompiled"
    evidence = [c0.evidence] if c0.evidence else []
    evidence += [u.evidence() for u in gave_up]
    for g, r in firsts[:4]:
        evidence.append(f"dynamo recompiled {dynamo_func(str(g.get('func')), g.get('file'), g.get('line'))}: "
                        f"{r[:200]}")
    if len(reads):
        evidence.append(f"{len(reads)} host read(s) made by torch.compile itself while tracing (not the user's code)")
    advice, severity = _dynamo_advice(reasons)
    value = _VALUE_GUARD.match(_COMPILE_ID.sub("", example).strip()) if reasons else None
    if value is not None and sized is None:
        advice = ADVICE["dynamo_value"].format(name=value.group("what"))
    if sized is not None:
        advice = ADVICE["dynamo_padding" if sized[1] > 0 else "dynamo_batch"].format(name=sized[0], dim=sized[1])
    if gave_up:
        advice += " " + ADVICE["dynamo_limit"]
        severity = "warning"
    return Finding(
        id=str(key), cause=CauseName.DYNAMO, kind="dynamo_recompile", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=comp_steps, severity=severity,
        input=sized[0] if sized else None, dim=sized[1] if sized else None,
    )



_SIZE_GUARD = re.compile(r"tensor '(?P<src>.+?)' size mismatch at index (?P<dim>\d+)\. "
                         r"expected (?P<was>\d+), actual (?P<now>\d+)")



def size_guard(reasons: list[str], example: str) -> tuple[str, int, list[int]] | None:
    """(input, dim, the sizes it took in order) when the commonest failed guard is a tensor
    size, as torch._dynamo words it (``tensor 'kwargs['input_ids']' size mismatch at index 1.
    expected 12, actual 17``); the input is the last key or name in dynamo's source."""
    m = _SIZE_GUARD.search(example)
    if m is None:
        return None
    src, dim = m.group("src"), int(m.group("dim"))
    sizes: list[int] = []
    for r in reasons:
        k = _SIZE_GUARD.search(r)
        if k is not None and k.group("src") == src and int(k.group("dim")) == dim:
            for v in (int(k.group("was")), int(k.group("now"))):
                if v not in sizes:
                    sizes.append(v)
    keys = re.findall(r"\[['\"]([^'\"]+)['\"]\]", src)
    name = keys[-1] if keys else src.split(".")[-1]
    return name, dim, sizes



_COMPILE_ID = re.compile(r"^\s*(\[?\d+/\d+\]?)\s*:\s*")



def first_failures(guards: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """Why each recompile happened, from torch._dynamo's guard failures: each recompile
    re-checks every cached entry of the function and records why each failed, so the same
    stale failure (entry 0/0's) repeats at every later recompile. An entry's *first* failure
    is the one that made dynamo compile its successor: one reason per recompile, in order.
    Reasons without a compile id (an older torch) are kept as they are."""
    out: list[tuple[dict[str, Any], str]] = []
    for g in guards:
        seen: set[str] = set()
        for r in g.get("reasons") or []:
            text = str(r).splitlines()[0] if str(r) else ""
            # dynamo appends the guarded source as a comment (``step == 5   # scale = ... #
            # train.py:15 in forward``): the guard is what comes before it.
            text = _GUARD_SOURCE.split(text, 1)[0].rstrip()
            m = _COMPILE_ID.match(text)
            if m is not None:
                if m.group(1) in seen:
                    continue
                seen.add(m.group(1))
            out.append((g, text))
    return out



_GUARD_SOURCE = re.compile(r"\s{2,}#\s")



_VALUE_GUARD = re.compile(r"^(?P<what>[\w.\[\]'\"()]+) == -?[\d.]+$")
"""A guard on a Python number's value (``step == 5``): torch.compile specialized on it."""



def commonest_guard(reasons: list[str]) -> tuple[str, str, int]:
    """(kind, its latest example, how many recompiles) of the guard that failed most often:
    reasons compared without their compile id and numbers (``size mismatch at index 1.
    expected 12, actual 17`` and ``... expected 17, actual 23`` are one kind)."""
    kinds = [re.sub(r"\d+", "#", _COMPILE_ID.sub("", r)) for r in reasons]
    counts = Counter(kinds)
    # On a tie, not a global-state guard (grad mode: a one-off per mode, an eval under
    # no_grad) over one that recurs (a size: every new shape), then the latest.
    kind = max(counts, key=lambda k: (counts[k], not any(g in k.lower() for g in _STATE_GUARDS),
                                      max(i for i, x in enumerate(kinds) if x == k)))
    latest = max(i for i, x in enumerate(kinds) if x == kind)
    return kind, reasons[latest], counts[kind]



_SIZE_GUARDS = ("size mismatch", "stride mismatch", "rank mismatch", "dimensionality", "dim mismatch")



_STATE_GUARDS = ("global_state", "grad_mode")



def _dynamo_advice(reasons: list[str]) -> tuple[str, str]:
    """Advice for the guards that failed, as torch._dynamo worded them: sizes want fixed
    shapes; a global-state guard (grad mode: an eval under no_grad) is a one-off per mode."""
    low = [r.lower() for r in reasons]
    sizes = any(k in r for r in low for k in _SIZE_GUARDS)
    state = bool(low) and all(any(k in r for k in _STATE_GUARDS) for r in low)
    if sizes or not low:
        return ADVICE["dynamo_recompile"], "warning"
    if state:
        return ADVICE["dynamo_global_state"], "info"
    return ADVICE["dynamo_guard"], "warning"
