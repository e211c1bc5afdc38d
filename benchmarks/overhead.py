"""What does leaving ``xprof.watch()`` on cost a training loop?

Seven parts, one process (torch_xla is imported once; ``--only`` picks some):

1. ``loop``: a realistic tiny training loop (DataLoader -> ``.to(device)`` -> MLP -> backward
   -> SGD -> ``xm.mark_step()``) run plain and under ``watch()`` in rotating blocks, so drift
   and neighbours' noise hit every arm: the median of per-pair ratios, for every step and for
   the steady state after each block's start. A third arm runs watched with the live notices
   on; a fourth runs plain again: plain against plain is the noise floor of the figures.
2. ``hooks``: the per-call cost of each hook measured alone, plain vs watched, in
   alternating rounds: the barrier hook (``mark_step`` with nothing pending), the host-read
   hook (``.item()`` of a materialized tensor), the pass-through on CPU tensors
   (``cpu.to(torch.float32)``, ``bool(cpu)``), and input recording (``DataLoader``
   ``next`` and ``cpu.to(device)``).
3. ``own``: each hook's own work per call: the real wrapper around a no-op in place of the
   torch function (on a shared machine the torch call's own time swings by more than the hook).
4. ``inplace``: inside one ``watch()``, 10-step blocks with the recorder on and off, and on
   with one group of hooks put back (barrier, loader, ``Tensor.to``, backward): the µs
   recording adds a step where it runs, and the ratio, median over ``--in-place-rounds``.
5. ``phases``: the same on / off blocks, each step timed phase by phase: where in the step
   the added µs are.
6. ``sweep``: part 4 on the same loop at about 1, 3 and 10 ms a step (``STEP_SIZES``).
7. ``anchors``: the other ways of watching a loop on the same loop (``anchors.py``).

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/overhead.py [--cpu 1] [--only inplace,phases]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import STEP_SIZES, TinyLoop, emit_json, median, median_ci, per_call_us, pin_cpu, quiet_deprecations, table
from anchors import anchors, print_anchors


def _watched(tmp: str, tag: str, live: bool = False) -> AbstractContextManager[Any]:
    """A watch() of its own file; the live notices are off unless asked for (their exit
    summary would print once per block)."""
    import xprof

    return xprof.watch(os.path.join(tmp, f"{tag}.json"), live=live)


class _Muted:
    """stderr swallowed (the live arm's exit summaries), restored after."""

    def __enter__(self) -> None:
        import io

        self._saved = sys.stderr
        sys.stderr = io.StringIO()

    def __exit__(self, *exc: object) -> None:
        sys.stderr = self._saved


HEAD_STEPS = 20
"""Steps at the start of each block reported apart: the cost of watch() starting (once a run)."""


def loop_overhead(loop: TinyLoop, tmp: str, blocks: int, steps: int) -> dict[str, Any]:
    """Step time plain vs watched over interleaved blocks, each watched block its own
    ``watch()`` (so its start is in the figures, once a block: more often than a real run).

    Four arms, rotated so each runs in every position equally often: plain, watched,
    watched with the live notices on, and plain again. Plain again against plain is the
    noise floor: what the same figures say when nothing differs, on this machine, now.

    Figures, because the machine is shared: the median of per-pair ratios (each pair:
    the two blocks' median step times), the ratio of median step times, the p10 ratio, and
    the ratio of process CPU time per step (all threads of this process, so other
    processes' load does not count). Each is also given for the steps after the first
    ``HEAD_STEPS`` of every block (the steady state a real run spends its time in; the
    start is reported apart).
    """
    import torch_xla.core.xla_model as xm

    loop.timed_steps(30)  # compiles: the first two steps are warm-up
    with _watched(tmp, "warm"):
        loop.timed_steps(30)
    modes = ("plain", "watched", "live", "again")
    head = min(HEAD_STEPS, steps // 2)
    enter_s: list[float] = []
    exit_s: list[float] = []
    wall: dict[str, list[float]] = {m: [] for m in modes}
    heads: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, float] = dict.fromkeys(modes, 0.0)
    pairs: dict[str, list[float]] = {m: [] for m in modes}
    writer_s: list[float] = []
    steady_pairs: dict[str, list[float]] = {m: [] for m in modes}
    for b in range(blocks):
        order = modes[b % 4:] + modes[:b % 4]
        if b % 2:
            order = order[::-1]
        got: dict[str, list[float]] = {}
        for mode in order:
            ctx: AbstractContextManager[Any] = nullcontext()
            if mode in ("watched", "live"):
                ctx = _watched(tmp, f"loop{b}{mode}", live=mode == "live")
            # Every arm starts with the device idle: watch() waits for the last execution
            # when it exits and a plain block does not, so without this the block after a
            # plain one pays for the plain block's last executions (a bias against watched
            # blocks of ~2% on this step; measured).
            xm.wait_device_ops()
            with _Muted() if mode == "live" else nullcontext():
                t0 = time.perf_counter()
                ctx.__enter__()
                t1 = time.perf_counter()
                try:
                    writer = _writer_cpu()
                    c0 = time.process_time()
                    got[mode] = loop.timed_steps(steps)
                    cpu[mode] += time.process_time() - c0
                    if mode in ("watched", "live"):
                        # The writer's pass over this block's last steps, in both watched arms
                        # alike (without it the live arm's exit wrote them on this thread).
                        time.sleep(FLUSH_WAIT)
                        now = _writer_cpu()
                        if mode == "watched" and writer is not None and now is not None:
                            writer_s.append((now - writer) / steps)
                finally:
                    t2 = time.perf_counter()
                    ctx.__exit__(None, None, None)
                if mode == "watched":
                    enter_s.append(t1 - t0)
                    exit_s.append(time.perf_counter() - t2)
            wall[mode] += got[mode][head:]
            heads[mode] += got[mode][:head]
        for mode in modes:
            # live against watched (what the notices add); the others against plain
            base = got["watched" if mode == "live" else "plain"]
            pairs[mode].append(median(got[mode]) / median(base))
            steady_pairs[mode].append(median(got[mode][head:]) / median(base[head:]))
    n = blocks * steps
    both = {m: heads[m] + wall[m] for m in modes}
    mp, mw = median(both["plain"]), median(both["watched"])
    return {
        "steps_each": n,
        "head_steps": head,
        "median_step_ms_plain": mp * 1e3,
        "median_step_ms_watched": mw * 1e3,
        "median_step_ms_live": median(both["live"]) * 1e3,
        "ratio": mw / mp,
        "median_pair_ratio": median(pairs["watched"]),
        "pair_ratio_ci": median_ci(pairs["watched"]),
        "noise_pair_ratio_ci": median_ci(pairs["again"]),
        "p10_ratio": _pct(both["watched"], 10) / _pct(both["plain"], 10),
        "p10_step_ms_plain": _pct(both["plain"], 10) * 1e3,
        "p10_step_ms_watched": _pct(both["watched"], 10) * 1e3,
        "p10_step_ms_live": _pct(both["live"], 10) * 1e3,
        "cpu_ms_per_step_plain": cpu["plain"] / n * 1e3,
        "cpu_ms_per_step_watched": cpu["watched"] / n * 1e3,
        "cpu_ms_per_step_live": cpu["live"] / n * 1e3,
        "cpu_ratio": cpu["watched"] / cpu["plain"],
        "pair_ratios": pairs["watched"],
        # the steady state: every block's first `head` steps left out, in every arm
        "steady_pair_ratio": median(steady_pairs["watched"]),
        "steady_ratio": median(wall["watched"]) / median(wall["plain"]),
        # the noise floor: the same figures for two plain arms
        "noise_pair_ratio": median(pairs["again"]),
        "noise_steady_pair_ratio": median(steady_pairs["again"]),
        "noise_ratio": median(both["again"]) / mp,
        "noise_cpu_ratio": cpu["again"] / cpu["plain"],
        "live_pair_ratio": median(pairs["live"]),
        "live_cpu_ratio": cpu["live"] / cpu["watched"],
        "head_ratio": median(heads["watched"]) / median(heads["plain"]),
        "watch_enter_ms": median(enter_s) * 1e3,
        "watch_exit_ms": median(exit_s) * 1e3,
        "writer_cpu_us_per_step": median(writer_s) * 1e6 if writer_s else None,
    }


FLUSH_WAIT = 0.3
"""Seconds a watched block waits after its last step before the writer thread's CPU time
is read (it writes what is queued at least every 0.25 s). Not timed as steps."""


def _writer_cpu() -> float | None:
    """CPU seconds the xprof writer thread has used (Linux, from /proc), or None."""
    import threading

    for th in threading.enumerate():
        if th.name == "xprof-writer" and th.native_id is not None:
            try:
                with open(f"/proc/self/task/{th.native_id}/schedstat") as f:
                    return int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                return None
    return None


def _pct(values: list[float], q: float) -> float:
    """The q-th percentile: contention only ever adds time, so low percentiles are the
    figure least disturbed by other processes."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def _alternate(measure: Callable[[], float], tmp: str, tag: str, rounds: int) -> tuple[float, float]:
    """Per-call µs of ``measure()`` plain and watched: the best of alternating rounds
    (the minimum is the figure least disturbed by other processes on a shared machine)."""
    plain, watched = [], []
    for r in range(rounds):
        for mode in (("plain", "watched") if r % 2 == 0 else ("watched", "plain")):
            if mode == "watched":
                with _watched(tmp, f"{tag}{r}"):
                    watched.append(measure())
            else:
                plain.append(measure())
    return min(plain), min(watched)


def hook_costs(loop: TinyLoop, tmp: str, rounds: int) -> list[dict[str, Any]]:
    import torch
    import torch_xla.core.xla_model as xm
    from torch.utils.data import DataLoader, TensorDataset

    dev = loop.device
    xm.mark_step()
    ready = torch.ones(4, device=dev) * 3
    xm.mark_step()
    xm.wait_device_ops()
    scalar = ready.sum()
    xm.mark_step()
    xm.wait_device_ops()
    scalar.item()  # materialized: later .item() calls copy, they do not compile
    cpu = torch.ones(4)
    cpu_flag = torch.tensor(True)

    loader = DataLoader(TensorDataset(torch.randn(16 * 512, 32), torch.randn(16 * 512, 1)), batch_size=16)
    its = [iter(loader)]

    def one_next() -> float:
        try:
            t0 = time.perf_counter()
            next(its[0])
            t = time.perf_counter() - t0
        except StopIteration:
            its[0] = iter(loader)
            t0 = time.perf_counter()
            next(its[0])
            t = time.perf_counter() - t0
        xm.mark_step()  # close the step so recorded inputs do not pile up (not timed)
        return t

    def each(fn: Callable[[], float], n: int) -> Callable[[], float]:
        """Per-call µs for calls that need an untimed barrier after each."""
        def run() -> float:
            return median([fn() for _ in range(n)]) * 1e6
        return run

    def one_to_device() -> float:
        src = torch.randn(16, 32)
        t0 = time.perf_counter()
        src.to(dev)
        t = time.perf_counter() - t0
        xm.mark_step()
        return t

    def read_then_barrier() -> None:
        scalar.item()
        xm.mark_step()

    cases: list[tuple[str, Callable[[], float]]] = [
        ("barrier: mark_step, nothing pending", lambda: per_call_us(xm.mark_step, 2000)),
        ("host read: .item() of a ready tensor", lambda: per_call_us(scalar.item, 1000)),
        ("pass-through: cpu.to(torch.float32)", lambda: per_call_us(lambda: cpu.to(torch.float32), 20000)),
        ("pass-through: bool(cpu tensor)", lambda: per_call_us(lambda: bool(cpu_flag), 20000)),
        ("loop with .item() a step: item + mark_step", lambda: per_call_us(read_then_barrier, 1000)),
        ("input: DataLoader next()", each(one_next, 300)),
        ("input: cpu.to(device)", each(one_to_device, 300)),
    ]
    rows = []
    for i, (name, fn) in enumerate(cases):
        fn()  # warm
        p, w = _alternate(fn, tmp, f"hook{i}_", rounds)
        rows.append({"hook": name, "plain_us": p, "watched_us": w, "added_us": w - p})
    return rows


def _then(n: int, fn: Callable[[], Any], barrier: Callable[[], Any]) -> None:
    """``n`` calls of ``fn`` in one step, then the barrier that closes it."""
    for _ in range(n):
        fn()
    barrier()


@contextmanager
def _writer_held() -> Iterator[None]:
    """The recorder's writer thread wakes no more than once (it may be in a wait already)
    and no queue limit makes the calling thread write: events wait for the end."""
    from xprof.recorder import core

    saved = core.FLUSH_INTERVAL, core.WAKE_AT, core.QUEUE_CAP
    core.FLUSH_INTERVAL, core.WAKE_AT, core.QUEUE_CAP = 1e9, 1 << 62, 1 << 62
    try:
        yield
    finally:
        core.FLUSH_INTERVAL, core.WAKE_AT, core.QUEUE_CAP = saved


def writer_alone(loop: TinyLoop, tmp: str, steps: int, rounds: int) -> dict[str, float]:
    """The writer's work per step with nothing else running: the loop runs watched with the
    writer held off, then the queued steps are turned into records and written on this
    thread, timed alone (CPU time). Best of ``rounds``, live notices off and on."""
    out = {}
    for live in (False, True):
        best = float("inf")
        for r in range(rounds):
            with _Muted(), _writer_held(), _watched(tmp, f"alone{live}{r}", live=live) as w:
                rec = w.recorder
                assert rec is not None
                loop.timed_steps(steps)
                c0 = time.thread_time()
                rec.flush()
                best = min(best, (time.thread_time() - c0) / steps)
        out["live" if live else "plain"] = best * 1e6
    return out


def own_costs(loop: TinyLoop, tmp: str, rounds: int) -> list[dict[str, Any]]:
    """Each hook's own work per call: the real wrapper around a no-op in place of the torch
    function it wraps, so the figure does not swing with what that function costs on a busy
    machine. Hooks that record a step input are timed in steps of up to 200 calls (the
    recorder keeps at most 256 inputs a step): many calls, one barrier, its cost taken off.

    The writer thread is held off while they are timed (see :func:`_writer_held`): what it
    does with each call's record is its own cost, measured in the loop as the writer
    thread's CPU per step; counting it here as well would count it twice."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from xprof.recorder import hooks

    dev = loop.device
    on_device = torch.ones(4, device=dev)
    cpu = torch.ones(4)

    def noop(*args: Any, **kwargs: Any) -> Any:
        return None

    def best(fn: Callable[[], Any], n: int) -> float:
        return min(per_call_us(fn, n) for _ in range(rounds))

    class _Xlac:
        _xla_step_marker = staticmethod(noop)

    batch = next(iter(DataLoader(TensorDataset(torch.randn(16, 32), torch.randn(16, 1)), batch_size=16)))
    with _watched(tmp, "own") as w, _writer_held():
        rec = w.recorder
        assert rec is not None
        patches = hooks.Patches()
        xlac = _Xlac()
        hooks.install_barrier(rec, patches, xlac)
        barrier = xlac._xla_step_marker
        item = hooks.make_reader(rec, "item", noop)
        to_cast = hooks.make_to(rec, lambda self, *a, **k: self, True, True)
        to_device = hooks.make_to(rec, lambda self, *a, **k: on_device, True, True)
        nxt = hooks.make_next(rec, lambda self: batch, torch.Tensor, "batch")
        base = best(lambda: noop(cpu), 20000)
        b = best(barrier, 5000)
        rows = [
            ("barrier: _xla_step_marker", b - base, 10),
            ("host read: .item() of an XLA tensor", best(lambda: item(on_device), 5000) - base, 15),
            ("pass-through: bool(cpu tensor)", best(lambda: item(cpu), 20000) - base, 0.3),
            ("pass-through: cpu.to(torch.float32)", best(lambda: to_cast(cpu, torch.float32), 20000) - base, 0.3),
            ("input: cpu.to(device)", (best(lambda: _then(200, lambda: to_device(cpu, dev), barrier), 50) - b)
             / 200 - base, 5),
            ("input: DataLoader next() of a 2-tensor batch",
             (best(lambda: _then(100, lambda: nxt(None), barrier), 50) - b) / 100 - base, None),
        ]
    return [{"hook": name, "own_us": us, "goal_us": goal} for name, us, goal in rows]


def step_budget(lo: dict[str, Any], own: list[dict[str, Any]]) -> dict[str, float] | None:
    """What the loop's step adds, from costs measured apart: each hook's own work times its
    calls a step (one barrier, two ``.to(device)``, one ``next()``) and the writer thread's
    CPU. Less noisy than the wall-time ratio on a shared machine; not a substitute for it."""
    by_name = {h["hook"]: h["own_us"] for h in own}
    writer = lo.get("writer_cpu_us_per_step")
    if writer is None:
        return None
    hooks = (by_name["barrier: _xla_step_marker"] + 2 * by_name["input: cpu.to(device)"]
             + by_name["input: DataLoader next() of a 2-tensor batch"])
    total = hooks + writer
    return {"hooks_us": hooks, "writer_us": writer, "total_us": total,
            "share": total / (lo["median_step_ms_plain"] * 1e3)}


def in_place(loop: TinyLoop, tmp: str, rotations: int, block: int = 10,
             arms: tuple[str, ...] = ("off", "on", "-barrier", "-loader", "-to", "-backward")) -> dict[str, Any]:
    """What recording costs in place, measured finely: inside one ``watch()``, blocks of
    ``block`` steps with the recorder on or off (``recorder.active``: every hook installed,
    off passes straight through), rotated with the recorder on but one group of hooks put
    back to the unwrapped function (the barrier, the loader, ``Tensor.to``, the backward
    pass). A block is a hundredth of the 100-step blocks of :func:`loop_overhead`, so the
    machine's drift hits both sides of a pair alike: the interval is several times tighter.
    What it leaves out: the pass-through of the hooks when off (in the per-call table, below
    a microsecond a call), and it spreads the writer thread's passes over every arm (its
    CPU a step is measured apart). Each arm's figures: the median of per-pair ratios to off,
    and the median of per-pair differences (µs added a step), each with a 95% interval."""
    ratios: dict[str, list[float]] = {a: [] for a in arms[1:]}
    added: dict[str, list[float]] = {a: [] for a in arms[1:]}
    medians: dict[str, list[float]] = {a: [] for a in arms}
    with _watched(tmp, "inplace") as w:
        rec = w.recorder
        patched = w._patches._patches
        groups = {"-barrier": ("_xla_step_marker",), "-loader": ("__next__", "next"), "-to": ("to",),
                  "-backward": ("backward", "grad")}
        parts = {arm: [p for p in patched if p.attr in attrs] for arm, attrs in groups.items()}
        loop.timed_steps(50)
        for r in range(rotations):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            got: dict[str, float] = {}
            for arm in order:
                rec.active = arm != "off"
                for p in parts.get(arm, ()):
                    setattr(p.owner, p.attr, p.original)
                try:
                    got[arm] = median(loop.timed_steps(block))
                finally:
                    for p in parts.get(arm, ()):
                        setattr(p.owner, p.attr, p.wrapper)
                    rec.active = True
            for arm in arms:
                medians[arm].append(got[arm])
            for arm in arms[1:]:
                ratios[arm].append(got[arm] / got["off"])
                added[arm].append((got[arm] - got["off"]) * 1e6)
    out: dict[str, Any] = {"rotations": rotations, "block": block,
                           "step_ms_off": median(medians["off"]) * 1e3, "step_ms_on": median(medians["on"]) * 1e3}
    for arm in arms[1:]:
        out[arm] = {"ratio": median(ratios[arm]), "ci": median_ci(ratios[arm]),
                    "added_us": median(added[arm]), "added_ci": median_ci(added[arm])}
    return out


def in_place_phases(loop: TinyLoop, tmp: str, rotations: int, block: int = 10) -> dict[str, Any]:
    """Where in the step the recording costs: inside one ``watch()``, blocks of ``block``
    steps with the recorder on and off, alternated, each step timed phase by phase
    (:data:`TinyLoop.PHASES`); per phase, the median over the steps of each arm and the
    difference. On one CPU, torch_xla's execution threads share the CPU with the training
    thread, so a phase's figure moves by about a microsecond with where their time slices
    land; the sum over phases and the total are the steadier figures."""
    steps: dict[str, list[tuple[int, ...]]] = {"on": [], "off": []}
    with _watched(tmp, "phases") as w:
        rec = w.recorder
        loop.phased_steps(30)
        for r in range(rotations):
            for arm in (("off", "on") if r % 2 == 0 else ("on", "off")):
                rec.active = arm == "on"
                try:
                    steps[arm] += loop.phased_steps(block)
                finally:
                    rec.active = True
    rows = []
    for k, name in enumerate(TinyLoop.PHASES + ("whole step",)):
        off = median([st[k] for st in steps["off"]]) / 1e3
        on = median([st[k] for st in steps["on"]]) / 1e3
        rows.append({"phase": name, "off_us": off, "on_us": on, "added_us": on - off})
    return {"rotations": rotations, "block": block, "phases": rows}


def sweep(tmp: str, rotations: int) -> list[dict[str, Any]]:
    """The in-place cost (recorder on / off in 10-step blocks, :func:`in_place`) on the same
    loop at about 1, 3 and 10 ms a step (larger layers and batches): what a user reads off
    for their own step time."""
    rows = []
    for label, kwargs in STEP_SIZES.items():
        loop = TinyLoop(**kwargs)
        loop.timed_steps(30)
        got = in_place(loop, tmp, rotations, arms=("off", "on"))
        rows.append({"size": label, "loop": kwargs, "step_ms_off": got["step_ms_off"], **got["on"]})
    return rows


PARTS = ("loop", "hooks", "own", "inplace", "phases", "sweep", "anchors")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=40, help="rotations of the four arms")
    ap.add_argument("--steps", type=int, default=100, help="steps per block")
    ap.add_argument("--rounds", type=int, default=6, help="alternating rounds per hook measurement")
    ap.add_argument("--rotations", type=int, default=200, help="rotations of the in-place arms (10-step blocks)")
    ap.add_argument("--in-place-rounds", type=int, default=3,
                    help="rounds of the in-place measure (the figure is the median over them)")
    ap.add_argument("--phase-rotations", type=int, default=150, help="on/off pairs of 10-step blocks, per phase")
    ap.add_argument("--sweep-rotations", type=int, default=60, help="on/off pairs of 10-step blocks per step size")
    ap.add_argument("--anchor-blocks", type=int, default=20, help="rotations of the in-process anchors")
    ap.add_argument("--anchor-rounds", type=int, default=4, help="ABBA rounds of the anchor processes")
    ap.add_argument("--only", help=f"comma-separated parts to run, of {','.join(PARTS)} (default: all)")
    ap.add_argument("--json", help="write the figures here (for run_all.py)")
    ap.add_argument("--cpu", type=int, help="run on this one CPU only (os.sched_setaffinity, set before torch "
                    "is imported): no cross-CPU wake-ups, and the writer thread's work shows in wall time")
    args = ap.parse_args(argv)
    parts = set(args.only.split(",")) if args.only else set(PARTS)
    pin_cpu(args.cpu)
    quiet_deprecations()
    t_start = time.perf_counter()
    loop = TinyLoop()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="xprof-bench-") as tmp:
        if "loop" in parts:
            figures["loop"] = loop_overhead(loop, tmp, args.blocks, args.steps)
            _print_loop(figures["loop"], args.blocks, args.cpu)
        if "hooks" in parts:
            figures["hooks"] = hook_costs(loop, tmp, args.rounds)
            _print_hooks(figures["hooks"])
        if "own" in parts:
            figures["own"] = own_costs(loop, tmp, args.rounds)
            figures["writer_alone"] = writer_alone(loop, tmp, 2000, 3)
            figures["budget"] = step_budget(figures["loop"], figures["own"]) if "loop" in parts else None
            _print_own(figures["own"], figures["writer_alone"], figures["budget"])
        loop.timed_steps(30)
        if "inplace" in parts:
            figures["in_place_rounds"] = [in_place(loop, tmp, args.rotations) for _ in range(args.in_place_rounds)]
            _print_in_place(figures["in_place_rounds"])
        if "phases" in parts:
            figures["phases"] = in_place_phases(loop, tmp, args.phase_rotations)
            _print_phases(figures["phases"])
        if "sweep" in parts:
            figures["sweep"] = sweep(tmp, args.sweep_rotations)
            _print_sweep(figures["sweep"], args.sweep_rotations)
    if "anchors" in parts:
        loop.timed_steps(30)
        figures["anchors"] = anchors(loop, args.anchor_blocks, args.steps, args.anchor_rounds, 1000, args.cpu)
        print()
        print_anchors(figures["anchors"])
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
          + (f"; pinned to CPU {args.cpu}" if args.cpu is not None else "")
          + f" (total {time.perf_counter() - t_start:.0f} s)")
    emit_json(args.json, figures)
    return figures


def _print_loop(lo: dict[str, Any], blocks: int, cpu: int | None) -> None:
    print(f"training loop: {lo['steps_each']} steps in each arm, {blocks} rotations of the four arms")
    print(table([["plain", lo["median_step_ms_plain"], lo["p10_step_ms_plain"], lo["cpu_ms_per_step_plain"]],
                 ["watched", lo["median_step_ms_watched"], lo["p10_step_ms_watched"],
                  lo["cpu_ms_per_step_watched"]],
                 ["watched, live notices on", lo["median_step_ms_live"], lo["p10_step_ms_live"],
                  lo["cpu_ms_per_step_live"]]],
                ["", "median wall ms/step", "p10 wall ms/step", "CPU ms/step (process)"]))
    ci, noise_ci = lo["pair_ratio_ci"], lo["noise_pair_ratio_ci"]
    print(f"median of per-pair ratios (watched / plain): {lo['median_pair_ratio']:.4f}   (95% "
          f"bootstrap interval {ci[0]:.4f}-{ci[1]:.4f}, plain again {noise_ci[0]:.4f}-{noise_ci[1]:.4f}); "
          f"ratio of median step times: {lo['ratio']:.4f}; p10 ratio: {lo['p10_ratio']:.4f}; "
          f"CPU time ratio: {lo['cpu_ratio']:.4f}")
    print(f"steady state (each block's first {lo['head_steps']} steps left out, every arm): median of per-pair "
          f"ratios {lo['steady_pair_ratio']:.4f}; ratio of median step times {lo['steady_ratio']:.4f}")
    print(f"noise floor (plain / plain again, same blocks): median of per-pair ratios {lo['noise_pair_ratio']:.4f} "
          f"(steady {lo['noise_steady_pair_ratio']:.4f}); ratio of median step times {lo['noise_ratio']:.4f}; "
          f"CPU time ratio {lo['noise_cpu_ratio']:.4f}")
    print(f"live notices on / off (both watched): median of per-block ratios {lo['live_pair_ratio']:.4f}, "
          f"CPU time ratio {lo['live_cpu_ratio']:.4f}")
    print(f"watch() itself: enter {lo['watch_enter_ms']:.2f} ms, exit {lo['watch_exit_ms']:.2f} ms (median); "
          f"the first {lo['head_steps']} steps of a block, watched / plain: {lo['head_ratio']:.4f}")
    if lo["writer_cpu_us_per_step"] is not None:
        print(f"writer thread CPU: {lo['writer_cpu_us_per_step']:.1f} µs a step (median over watched blocks)")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(wall-time ratios are only meaningful on an idle machine)"
          + (f"; pinned to CPU {cpu}" if cpu is not None else ""))


def _print_hooks(hooks: list[dict[str, Any]]) -> None:
    print("\nper-call cost of each hook (best of alternating rounds):")
    print(table([[h["hook"], h["plain_us"], h["watched_us"], h["added_us"]] for h in hooks],
                ["call", "plain µs", "watched µs", "added µs"]))


def _print_own(own: list[dict[str, Any]], alone: dict[str, float], budget: dict[str, float] | None) -> None:
    print("\neach hook's own work per call (the wrapped torch function replaced by a no-op; best of rounds):")
    print(table([[h["hook"], h["own_us"], "-" if h["goal_us"] is None else f"<= {h['goal_us']}"] for h in own],
                ["call", "own µs", "goal µs"]))
    print(f"\nthe writer's work alone (2000 queued steps written on one thread, best of 3): "
          f"{alone['plain']:.1f} µs a step, {alone['live']:.1f} µs with the live notices")
    if budget is not None:
        print(f"\nper step of the loop, added work: {budget['hooks_us']:.1f} µs of hooks on the training thread "
              f"(barrier + 2 x cpu.to(device) + next(), own work) + {budget['writer_us']:.1f} µs of writer "
              f"CPU = {budget['total_us']:.1f} µs, {budget['share'] * 100:.1f}% of the plain median step "
              "(optimizer and backward counters not included: < 1 µs each)")


def _print_in_place(rounds: list[dict[str, Any]]) -> None:
    first = rounds[0]
    print(f"\nin place, one watch() with the recorder on and off in blocks of {first['block']} steps "
          f"({len(rounds)} rounds of {first['rotations']} rotations; median step "
          f"{median([r['step_ms_off'] for r in rounds]):.3f} ms off):")
    rows = []
    for arm in ("on", "-barrier", "-loader", "-to", "-backward"):
        us = [r[arm]["added_us"] for r in rounds]
        ratios = [r[arm]["ratio"] for r in rounds]
        rows.append([arm if arm != "on" else "on (everything)", f"{median(us):.1f}",
                     ", ".join(f"{u:.1f}" for u in us), f"{median(ratios):.4f}",
                     ", ".join(f"{r[arm]['ci'][0]:.3f}-{r[arm]['ci'][1]:.3f}" for r in rounds)])
    print(table(rows, ["recorder on, without", "µs added a step (median)", "each round",
                       "ratio / off (median)", "95% intervals of the ratio"]))
    print("(without the loader hook, .to(device) records the batch's tensors itself, by the slower naming path)")


def _print_phases(ph: dict[str, Any]) -> None:
    print(f"\nin place, phase by phase ({ph['rotations']} on/off pairs of {ph['block']}-step blocks; "
          "medians over the steps of each arm):")
    print(table([[r["phase"], r["off_us"], r["on_us"], r["added_us"]] for r in ph["phases"]],
                ["phase", "off µs", "on µs", "added µs"]))
    print(f"sum of the phases' added µs: {sum(r['added_us'] for r in ph['phases'][:-1]):.1f}")


def _print_sweep(rows: list[dict[str, Any]], rotations: int) -> None:
    print(f"\nstep-size sweep, in place ({rotations} on/off pairs of 10-step blocks each):")
    print(table([[r["size"], ", ".join(f"{k}={v}" for k, v in r["loop"].items()) or "batch=16, hidden=64",
                  r["step_ms_off"], f"{r['added_us']:.1f}", f"{r['added_ci'][0]:.1f}-{r['added_ci'][1]:.1f}",
                  f"{r['ratio']:.4f}"] for r in rows],
                ["step", "loop", "ms a step (off)", "µs added", "95% interval", "ratio"]))


if __name__ == "__main__":
    main()
