"""Guards for tests: fail when a training step recompiles or syncs more than it should.

>>> with xprof.testing.max_compiles(0, warmup=2):
...     for batch in batches:
...         train_step(batch)
...         torch_xla.sync()

A recompile that sneaks into a training loop (a batch of another shape, a Python
scalar that changes) costs minutes on a TPU and nothing on a laptop, so it is easy to
merge. This guard records the enclosed steps with ``watch()``, analyses them with
``xprof.analysis.analyze`` and fails with the diagnosis (the cause, the input and its
shapes or the line, and the fix) rather than a bare count.

Warm-up: torch_xla compiles twice even for a perfect loop (the first step creates the
optimizer state, the second is the steady graph), so compiles during the first
``warmup`` steps that ran a graph are allowed; ``n`` limits the compiles after them.
``max_syncs`` likewise limits host reads after warm-up (reads in
``xm.add_step_closure`` callbacks are deferred and do not count).

pytest: put ``pytest_plugins = ["xprof.testing"]`` in ``conftest.py`` and use the
``xprof_guard`` fixture, which writes the run into the test's ``tmp_path``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from xprof import openxla
from xprof.analysis.model import Analysis, Finding
from xprof.diagnosis.keys import FindingKey
from xprof.words import plural

openxla.check()  # a test suite's first import of this package may be this module


class CompileGuardError(AssertionError):
    """The guarded steps compiled or synced more than allowed; the message says why."""


@dataclass
class GuardResult:
    """What the guard saw; filled in when the ``with`` block ends."""

    path: str
    compiles_after_warmup: int = 0
    syncs_after_warmup: int = 0
    analysis: Analysis | None = None
    findings: list[Finding] = field(default_factory=list)


def _cutoff_step(steps: pd.DataFrame, warmup: int) -> int | None:
    """Index of the last warm-up step; None when the block never got past warm-up."""
    if not len(steps):
        return None
    if warmup <= 0:
        return -1
    work = steps[steps["work"].astype(bool)]
    if len(work) <= warmup:
        return None
    return int(work["i"].iloc[warmup - 1])


def _describe(f: Finding) -> str:
    parts = [f"[{f.cause}] {f.title}"]
    if f.input is not None:
        shapes = ", ".join(str(tuple(s)) for s in (f.shapes or [])[:6])
        parts.append(f"input {f.input!r}" + (f" took shapes {shapes}" if shapes else ""))
    if f.file is not None:
        where = f"{f.file}:{f.line}"
        parts.append(f"at {where}" + (f" `{f.code}`" if f.code else "")
                     + (f" (via {f.via})" if f.via else ""))
    if f.steps:
        parts.append("steps " + ", ".join(str(s) for s in f.steps[:8]) + (" ..." if len(f.steps) > 8 else ""))
    if f.advice:
        parts.append(f"fix: {f.advice}")
    return "\n    ".join(parts)


def check(analysis: Analysis, n: int, *, warmup: int = 2, max_syncs: int | None = None,
          path: str = "") -> GuardResult:
    """Apply the limits to an analysis; raise :class:`CompileGuardError` when one is crossed."""
    __tracebackhide__ = True
    result = GuardResult(path=path or analysis.run.path, analysis=analysis)
    cutoff = _cutoff_step(analysis.steps, warmup)
    if cutoff is None:
        return result
    comp = analysis.compiles
    late = comp[comp["step"] > cutoff] if len(comp) else comp
    live = analysis.live_syncs
    late_syncs = live[live["step"] > cutoff] if len(live) else live
    result.compiles_after_warmup = len(late)
    result.syncs_after_warmup = len(late_syncs)
    problems: list[str] = []
    keys: set[str] = set()
    if len(late) > n:
        problems.append(f"{plural(len(late), 'compile')} after {plural(warmup, 'warm-up step')}, {n} allowed")
        keys.update(str(k) for k in late["finding"] if isinstance(k, str))
    if max_syncs is not None and len(late_syncs) > max_syncs:
        problems.append(f"{plural(len(late_syncs), 'host sync')} after {plural(warmup, 'warm-up step')}, "
                        f"{max_syncs} allowed")
        keys.update(str(FindingKey.sync(int(s))) for s in late_syncs["site"])
    if not problems:
        return result
    found = [f for f in analysis.findings if f.id in keys]
    result.findings = found
    lines = ["xprof guard: " + "; ".join(problems) + "."]
    if found:
        lines += [f"  - {_describe(f)}" for f in found]
    elif len(late):
        causes = ", ".join(sorted({str(c) for c in late["cause"]}))
        lines.append(f"  causes: {causes}")
    lines.append(f"  run file: {result.path} (open it with `xprof report {result.path}`)")
    raise CompileGuardError("\n".join(lines))


def max_compiles(n: int = 0, *, warmup: int = 2, max_syncs: int | None = None,
                 path: str | None = None, name: str | None = None) -> MaxCompiles:
    """Fail the enclosing test when the block compiles more than ``n`` times after warm-up.

    The run is written to ``path`` (or a temporary folder, kept only when the guard fails,
    so the message can point at it). An exception raised inside the block propagates
    unchanged and no limit is checked.
    """
    return MaxCompiles(n, warmup, max_syncs, path, name)


class MaxCompiles:
    """The guard's ``with`` block. A class, not a generator, so that pytest's report of a
    failed guard shows the test's line and the diagnosis, not xprof's source: its frames and
    :func:`check`'s carry ``__tracebackhide__``."""

    def __init__(self, n: int, warmup: int, max_syncs: int | None, path: str | None, name: str | None) -> None:
        self.limits = (n, warmup, max_syncs)
        self.tmpdir = None if path is not None else tempfile.mkdtemp(prefix="xprof-guard-")
        self.path = path if path is not None else os.path.join(self.tmpdir or "", "guard.json")
        self.name = name or "xprof guard"
        self.result = GuardResult(path=self.path)
        self.watch: Any = None

    def __enter__(self) -> GuardResult:
        from xprof.recorder.watch import watch

        self.watch = watch(self.path, name=self.name, live=False)  # the guard's verdict is its output
        self.watch.__enter__()
        return self.result

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        __tracebackhide__ = True
        self.watch.__exit__(exc_type, exc, tb)  # the user's exception goes on unchanged
        if exc_type is None:
            self._check()

    def _check(self) -> None:
        __tracebackhide__ = True
        from xprof.analysis import analyze
        from xprof.runfile import load_run

        n, warmup, max_syncs = self.limits
        result = self.result
        result.path = self.watch.path
        analysis = analyze(load_run(result.path))
        checked = check(analysis, n, warmup=warmup, max_syncs=max_syncs, path=result.path)
        result.compiles_after_warmup = checked.compiles_after_warmup
        result.syncs_after_warmup = checked.syncs_after_warmup
        result.analysis = analysis
        if self.tmpdir is not None:  # passed: nothing to point at
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def guard_factory(directory: str) -> Callable[..., Any]:
    """``max_compiles`` with its run files in ``directory`` (one per call, numbered)."""
    counter = [0]

    def guard(n: int = 0, *, warmup: int = 2, max_syncs: int | None = None) -> Any:
        counter[0] += 1
        return max_compiles(n, warmup=warmup, max_syncs=max_syncs,
                            path=os.path.join(directory, f"xprof-guard-{counter[0]}.json"))

    return guard


try:  # the pytest plugin: only when pytest is there (it is not a dependency)
    import pytest as _pytest
except ImportError:  # pragma: no cover
    _pytest = None  # type: ignore[assignment]

if _pytest is not None:

    @_pytest.fixture
    def xprof_guard(tmp_path: Any) -> Callable[..., Any]:
        """``with xprof_guard(0, warmup=2, max_syncs=0): ...`` fails the test with a diagnosis."""
        return guard_factory(str(tmp_path))
