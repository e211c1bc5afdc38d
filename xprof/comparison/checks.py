"""Why two runs may not be comparable. Compare always answers, and says so first.

A comparison across torch_xla versions, devices or scripts is still useful (that is
often the question: "did the upgrade add recompiles?"), so nothing here refuses; every
difference that can explain a change on its own becomes one line in ``warnings``.
"""

from __future__ import annotations

import os
from typing import Any

from xprof.analysis.model import Analysis
from xprof.comparison.model import RunInfo

STEP_RATIO = 1.5
"""Step counts further apart than this factor are "very different"."""


def run_info(analysis: Analysis) -> RunInfo:
    run = analysis.run
    meta = run.meta
    argv = meta.get("argv")
    return RunInfo(
        name=run.name,
        path=run.path,
        steps=int(analysis.totals.steps),
        status=str(analysis.totals.status),
        complete=bool(analysis.totals.complete),
        torch=_str(meta.get("torch")),
        torch_xla=_str(meta.get("torch_xla")),
        device=_str(meta.get("device")),
        argv=[str(a) for a in argv] if isinstance(argv, list) else None,
        started_at=run.started_at,
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def warnings_for(base: Analysis, new: Analysis, a: RunInfo, b: RunInfo) -> list[str]:
    out: list[str] = []
    for label, x, y in (("torch", a.torch, b.torch), ("torch_xla", a.torch_xla, b.torch_xla)):
        if x != y:
            out.append(f"{label} versions differ ({x or 'unknown'} vs {y or 'unknown'}): "
                       "compiles and times may change with the version alone")
    if a.device != b.device:
        out.append(f"devices differ ({a.device or 'unknown'} vs {b.device or 'unknown'}): "
                   "times are not comparable")
    ma, mb = base.run.meta, new.run.meta
    if ma.get("world_size") != mb.get("world_size"):
        out.append(f"world sizes differ ({ma.get('world_size')} vs {mb.get('world_size')})")
    if a.argv and b.argv:
        sa, sb = os.path.basename(a.argv[0]), os.path.basename(b.argv[0])
        if sa != sb:
            out.append(f"scripts differ ({sa} vs {sb})")
        elif a.argv[1:] != b.argv[1:]:
            out.append(f"arguments differ ({' '.join(a.argv[1:]) or '(none)'} vs "
                       f"{' '.join(b.argv[1:]) or '(none)'})")
    elif bool(a.argv) != bool(b.argv):
        out.append("only one run recorded its command line")
    sa_steps, sb_steps = a.steps, b.steps
    if min(sa_steps, sb_steps) == 0:
        out.append(f"a run has no training steps ({sa_steps} vs {sb_steps})")
    elif max(sa_steps, sb_steps) / min(sa_steps, sb_steps) > STEP_RATIO:
        out.append(f"step counts are very different ({sa_steps} vs {sb_steps}): totals (wall "
                   "time, syncs, transfers) scale with steps; compare per-step figures")
    for info in (a, b):
        if info.status != "ok":
            out.append(f"{info.name} did not finish cleanly (status: {info.status})")
    for key, what in (("inputs", "input shapes"), ("syncs", "host reads")):
        if ma.get(key) is False or mb.get(key) is False:
            if ma.get(key) != mb.get(key):
                out.append(f"only one run recorded {what} (watch({key}=False) in the other): "
                           "its findings cannot be compared")
    return out
