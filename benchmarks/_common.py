"""Helpers shared by the benchmarks: a tiny torch_xla training loop, timers, tables.

The benchmarks print figures and ratios; they assert nothing, because timings on a
shared machine are noise-prone and a failing benchmark would only teach people to
ignore it. ``run_all.py`` collects the ``--json`` output of each one into a table.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("PJRT_DEVICE", "CPU")


def emit_json(path: str | None, figures: dict[str, Any]) -> None:
    """Write the figures for ``run_all.py`` (when it asked for them)."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


def json_arg(argv: Sequence[str]) -> str | None:
    """The value of ``--json PATH`` in ``argv``, if any (kept tiny: no argparse needed)."""
    args = list(argv)
    if "--json" in args:
        i = args.index("--json")
        if i + 1 < len(args):
            return args[i + 1]
    return None


def pin_cpu(cpu: int | None) -> None:
    """Run this process, and every thread it starts from now on, on one CPU.

    Call it before torch is imported: torch_xla's PJRT threads inherit the mask when they
    are created. On this 2-vCPU machine a device-to-host copy wakes the training thread on
    the other CPU with cold caches, and any code right after it (a hook's counter reads
    included) runs 5-10x slower than alone; on one CPU that effect is gone, and what the
    writer thread costs shows in wall time instead of hiding on the idle CPU.
    """
    if cpu is None:
        return
    if "torch" in sys.modules:
        raise RuntimeError("pin_cpu must run before torch is imported")
    os.sched_setaffinity(0, {cpu})


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def median_ci(values: Sequence[float], level: float = 0.95, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A bootstrap confidence interval of the median of ``values`` (resampled with replacement,
    ``draws`` times, fixed seed): how far the median of this many per-pair ratios moves on
    this machine's noise alone. (nan, nan) for fewer than 3 values."""
    if len(values) < 3:
        return float("nan"), float("nan")
    import random

    rng = random.Random(seed)
    n = len(values)
    got = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(draws))
    lo = got[int((1 - level) / 2 * draws)]
    hi = got[min(int((1 + level) / 2 * draws), draws - 1)]
    return lo, hi


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    """Mean µs of ``fn()`` over ``n`` back-to-back calls (loop overhead included, both sides)."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain fixed-width table, so the output can be pasted into a README."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # nan
            return "-"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


class TinyLoop:
    """A realistic small training step: DataLoader batch -> ``.to(device)`` -> MLP ->
    backward -> SGD -> ``xm.mark_step()``. About a millisecond a step on the CPU."""

    def __init__(self, batch: int = 16, features: int = 32, hidden: int = 64, batches: int = 64) -> None:
        import torch
        import torch_xla
        from torch.utils.data import DataLoader, TensorDataset

        torch.manual_seed(0)
        self.torch = torch
        self.device = torch_xla.device()
        self.model = torch.nn.Sequential(
            torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
        ).to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        data = TensorDataset(torch.randn(batch * batches, features), torch.randn(batch * batches, 1))
        self.loader = DataLoader(data, batch_size=batch, drop_last=True)
        self._it = iter(self.loader)

    def _next(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.loader)
            return next(self._it)

    def step(self, barrier: bool = True) -> None:
        """One step; ``barrier=False`` leaves out its ``mark_step`` (a ``StepTrace`` ends the step)."""
        import torch_xla.core.xla_model as xm

        x, y = self._next()
        x, y = x.to(self.device), y.to(self.device)
        self.opt.zero_grad()
        loss = self.torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        if barrier:
            xm.mark_step()

    PHASES = ("next()", ".to(device) x2", "zero_grad", "forward", "backward", "optimizer", "mark_step")

    def phased_steps(self, n: int) -> list[tuple[int, ...]]:
        """``n`` steps, each as the nanoseconds of its phases (:data:`PHASES`) and its total:
        the same step as :meth:`step`, with a clock read between phases."""
        import torch_xla.core.xla_model as xm

        clock = time.perf_counter_ns
        mse = self.torch.nn.functional.mse_loss
        out: list[tuple[int, ...]] = []
        for _ in range(n):
            t0 = clock()
            x, y = self._next()
            t1 = clock()
            x, y = x.to(self.device), y.to(self.device)
            t2 = clock()
            self.opt.zero_grad()
            t3 = clock()
            loss = mse(self.model(x), y)
            t4 = clock()
            loss.backward()
            t5 = clock()
            self.opt.step()
            t6 = clock()
            xm.mark_step()
            t7 = clock()
            out.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6, t7 - t0))
        return out

    def timed_steps(self, n: int) -> list[float]:
        """Seconds per step for ``n`` steps (each step timed alone)."""
        out = []
        clock = time.perf_counter
        for _ in range(n):
            t0 = clock()
            self.step()
            out.append(clock() - t0)
        return out


STEP_SIZES = {"~1 ms": {}, "~3 ms": {"batch": 256, "hidden": 1024},
              "~10 ms": {"batch": 1024, "hidden": 1024}}
"""``TinyLoop`` arguments for the step-size sweep (the same loop, larger layers and batches)."""


def quiet_deprecations() -> None:
    """``xm.mark_step`` warns it is deprecated on 2.9; the warning is not a figure."""
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)


def flush() -> None:
    sys.stdout.flush()
