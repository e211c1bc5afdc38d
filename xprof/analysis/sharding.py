"""SPMD: a graph that differs from an earlier one only in how an input is sharded.

Under SPMD the sharding of each graph input is part of the graph: a batch with the same
shapes as before but another sharding (``mark_sharding`` left out for it, so it is
replicated, or another partition spec) compiles a new graph. The recorder writes each
input's sharding spec into the step signature, so such a step has a new signature whose
shapes were all seen before. :func:`refine` turns the ``input_shape`` cause the shape rule
gives that compile ("a new input signature", no input changed shape) into
``input_sharding``, naming the inputs whose sharding changed and the two shardings.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from xprof.analysis.advice import ADVICE
from xprof.analysis.causes import Cause
from xprof.analysis.model import Finding, FindingKey

Shapes = tuple[tuple[str, tuple[int, ...], str, str], ...]
Shardings = dict[str, str]


def no_sharding(spec: str | None) -> str:
    """How a spec reads to a person: ``""`` (no annotation) is replicated by XLA."""
    return "no sharding (replicated)" if spec == "" else str(spec)


@dataclass
class ShardingCause(Cause):
    """An ``input_sharding`` cause: ``changed`` maps each input to (earlier, new) spec."""

    changed: tuple[tuple[str, str, str], ...] = ()
    earlier_step: int | None = None


def _by_sig(inputs: pd.DataFrame) -> tuple[dict[int, Shapes], dict[int, Shardings]]:
    shapes: dict[int, list[tuple[str, tuple[int, ...], str, str]]] = {}
    specs: dict[int, Shardings] = {}
    if "sharding" not in inputs.columns:
        return {}, {}
    for sig, name, shape, dtype, src, spec in zip(inputs["sig"].tolist(), inputs["name"].tolist(),
                                                  inputs["shape"].tolist(), inputs["dtype"].tolist(),
                                                  inputs["src"].tolist(), inputs["sharding"].tolist()):
        shapes.setdefault(int(sig), []).append((str(name), tuple(shape), str(dtype), str(src)))
        if isinstance(spec, str):
            specs.setdefault(int(sig), {})[str(name)] = spec
    return {k: tuple(v) for k, v in shapes.items()}, specs


def refine(causes: list[Cause], steps: pd.DataFrame, compiles: pd.DataFrame,
           inputs: pd.DataFrame) -> list[Cause]:
    """``causes`` with each new-signature compile whose shapes were seen before, under other
    shardings, given the ``input_sharding`` cause instead (same order, same length)."""
    shapes, specs = _by_sig(inputs)
    if not specs or not len(compiles):
        return causes
    # The first steady-state step (ordinal >= 1) that ran each signature, and the signatures
    # that share each set of shapes, in that order.
    work = steps[steps["work"] & steps["sig"].notna()]
    first_seen: dict[int, int] = {}
    first: tuple[int, int] | None = None
    for i, sig, ordinal in zip(work["i"].astype(int).tolist(), work["sig"].astype(int).tolist(),
                               work["ordinal"].astype(int).tolist()):
        if ordinal >= 1:
            first_seen.setdefault(sig, i)
        elif first is None:
            first = (i, sig)
    same_shapes: dict[Shapes, list[int]] = {}
    for sig in first_seen:
        if sig in shapes:
            same_shapes.setdefault(shapes[sig], []).append(sig)
    sig_of = dict(zip(steps["i"].astype(int).tolist(), steps["sig"].tolist()))
    ordinal_of = dict(zip(steps["i"].astype(int).tolist(), steps["ordinal"].astype(int).tolist()))
    out = list(causes)
    for k, (c, step, at) in enumerate(zip(causes, compiles["step"].tolist(), compiles["at"].tolist())):
        if c.cause != "input_shape" or at != "barrier":
            continue
        sig_value = sig_of.get(int(step))
        if sig_value is None or pd.isna(sig_value):
            continue
        sig = int(sig_value)
        new = specs.get(sig)
        if new is None or sig not in shapes:
            continue
        candidates = [(first_seen[p], p) for p in same_shapes.get(shapes[sig], [])]
        if first is not None and ordinal_of.get(int(step)) == 1 and shapes.get(first[1]) == shapes[sig]:
            # The warm-up rule blames the second step's compile on its new inputs when the
            # first graph was the steady one: the first step is the one to compare with.
            candidates.insert(0, first)
        for earlier_step, prev in candidates:
            if earlier_step >= int(step):
                break
            if prev == sig:
                continue
            old = specs.get(prev, {})
            changed = tuple((name, old.get(name, ""), spec) for name, spec in new.items()
                            if old.get(name, "") != spec)
            if changed:
                name, before, after = changed[0]
                others = f" (and {', '.join(n for n, _, _ in changed[1:])})" if len(changed) > 1 else ""
                out[k] = ShardingCause(
                    "input_sharding", FindingKey("sharding", name), input=name, evidence=(
                        f"step {int(step)}: {name}{others} sharded {no_sharding(after)}, at step "
                        f"{earlier_step} {no_sharding(before)}; same shapes"),
                    changed=changed, earlier_step=earlier_step)
                break
    return out


def finding(key: FindingKey, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
            steps: pd.DataFrame, inputs: pd.DataFrame) -> Finding:
    """The finding for the ``input_sharding`` compiles ``ks`` of one input."""
    name = key.detail
    ms = float(rows["ms"].sum())
    n = len(ks)
    comp_steps = sorted({int(s) for s in rows["step"]})
    seen_specs: list[str] = []
    for k in ks:
        c = causes[k]
        if isinstance(c, ShardingCause):
            for input_name, before, after in c.changed:
                if input_name == name:
                    for spec in (before, after):
                        if spec not in seen_specs:
                            seen_specs.append(spec)
    # Every step whose signature gave the input a sharding other than the usual one.
    spec_of = {int(s): sp for s, nm, sp in zip(inputs["sig"].tolist(), inputs["name"].tolist(),
                                                inputs["sharding"].tolist()) if nm == name}
    work = steps[steps["work"] & steps["sig"].notna()]
    per_step = [(int(i), spec_of.get(int(s))) for i, s in zip(work["i"].tolist(), work["sig"].tolist())]
    counts: dict[str, int] = {}
    for _, sp in per_step:
        if isinstance(sp, str):
            counts[sp] = counts.get(sp, 0) + 1
    usual = max(counts, key=lambda sp: counts[sp]) if counts else None
    odd_steps = [i for i, sp in per_step if isinstance(sp, str) and sp != usual]
    shape = next((tuple(sh) for s, nm, sh in zip(inputs["sig"].tolist(), inputs["name"].tolist(),
                                                  inputs["shape"].tolist()) if nm == name), None)
    words = " and ".join(no_sharding(s) for s in seen_specs[:2])
    title = (f"{name} is sharded two ways ({words}) with the same shape: "
             f"{n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    evidence = [causes[k].evidence for k in ks[:3] if causes[k].evidence]
    if len(ks) > 3:
        evidence.append(f"... and {len(ks) - 3} more")
    if odd_steps:
        evidence.append(f"{name} had another sharding than the usual {no_sharding(usual)} at step"
                        f"{'s' if len(odd_steps) != 1 else ''} {', '.join(str(i) for i in odd_steps[:10])}"
                        f"{'...' if len(odd_steps) > 10 else ''}")
    return Finding(
        id=str(key), cause="input_sharding", kind="sharding_change", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["sharding_change"],
        evidence=evidence, steps=odd_steps or comp_steps, input=name,
        shapes=[list(shape)] if shape is not None else None, shardings=seen_specs,
    )
