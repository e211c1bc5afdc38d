"""Group attributed compiles and host reads into findings, ranked by the seconds they cost."""

from __future__ import annotations

import os
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.advice import ADVICE, READ_KINDS, read_tail
from xprof.analysis.causes import (
    DATA_DEPENDENT_ACCESS,
    FIRST_STEP_ONLY,
    Cause,
    Shardings,
    Signature,
    base_input_name,
    no_sharding,
)
from xprof.analysis.model import EAGER_KEY, EVAL_KEY, EVAL_MODE_KEY, SETTLED_AFTER, WARMUP_STEPS, Finding, FindingKey
from xprof.analysis.steps import eval_pass_ids, is_inference, training_barrier_sites
from xprof.analysis.tables import barrier_graphs, fallback_rows, live_reads
from xprof.diagnosis import mechanisms as _mech
from xprof.diagnosis.evidence import bucket_step, dynamo_func, grew, is_condition, is_logging_call, of_other_kinds
from xprof.diagnosis.patterns import bucketing_what_if, describe_period
from xprof.diagnosis.rules import split as _split
from xprof.diagnosis.terms import DATA_DEPENDENT_FALLBACKS
from xprof.runfile import Site


def sync_kind(access: str, code: str, via: str | None) -> str:
    """What the user wrote, from the hooked method, the line's code and the library path."""
    if access in DATA_DEPENDENT_ACCESS:
        return "data_dependent"
    if via:
        low = via.lower()
        if is_logging_call(via):
            return "log"  # the standard logging module formatting a tensor (logger.info("%s", loss))
        if "grad_scaler" in low or "gradscaler" in low:
            return "grad_scaler"
        if "serialization" in low or ".save" in low or "checkpoint" in low or "state_dict" in low:
            return "checkpoint"
        return "library_sync"
    if access in ("repr", "format") and "print(" in code:
        return "print"
    if access in ("bool", "int", "float", "index"):
        return "tensor_condition" if is_condition(access, code) else "scalar"
    return {"item": "item", "tolist": "tolist", "numpy": "numpy", "cpu": "to_cpu",
            "to_cpu": "to_cpu", "repr": "repr", "format": "format",
            "materialize": "materialize"}.get(access, "item")


_KIND_WORDS = {
    "item": ".item()", "print": "print of a tensor", "format": "f-string of a tensor",
    "repr": "repr() of a tensor", "tensor_condition": "a tensor in a Python condition",
    "scalar": "int()/float() of a tensor", "tolist": ".tolist()", "numpy": ".numpy()",
    "to_cpu": ".cpu() / .to('cpu')", "grad_scaler": "GradScaler.step",
    "materialize": "materializing tensors (_xla_sync_multi)",
    "checkpoint": "checkpoint save", "library_sync": "a library call", "log": "logging a tensor",
}

_DD_WORDS = {
    "mask_index": "Boolean-mask indexing", "mask_assign": "Boolean-mask assignment (t[mask] = v)",
    "nonzero": "nonzero()", "masked_select": "masked_select()",
    "unique": "unique()", "argwhere": "argwhere()", "repeat_interleave": "repeat_interleave()",
    "index": "A tensor used as a slice bound",
}


def _title_seconds(seconds: float) -> str:
    """A read finding's cost in its title: ``0.38 s``, or ``3.1 ms`` under 10 ms (where
    ``0.00 s`` would say nothing)."""
    return f"{seconds * 1e3:.1f} ms" if seconds < 0.01 else f"{seconds:.2f} s"


def _dur(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1e3:.2f} s"


def _loc(file: str, line: int) -> str:
    return f"{os.path.basename(file)}:{line}"


def _pattern(ordinals: list[int], steady_steps: int) -> str | None:
    periodic = describe_period(sorted(set(ordinals)))
    if periodic is not None:
        return periodic
    if steady_steps and len(set(ordinals)) >= max(3, int(0.9 * steady_steps)):
        return "every step"
    return None


def build(steps: pd.DataFrame, compiles: pd.DataFrame, causes: list[Cause], syncs: pd.DataFrame,
          sigs: dict[int, Signature], sites: dict[int, Site] | None = None,
          dynamo_guards: list[dict[str, Any]] | None = None, specs: Shardings | None = None,
          dynamo_limits: list[dict[str, Any]] | None = None, reads_only: bool = False) -> list[Finding]:
    """The findings of a run, most time lost first; ``dynamo_limits``: the ``dynamo_limit``
    marks (torch.compile gave up on a function), with the barrier index they came before;
    ``reads_only``: a run that reached no barrier and ran no optimizer step (generation
    driven by its reads, ``model.generate()``), whose reads are all it did."""
    findings: list[Finding] = []
    ordinal_of = _user_steps(steps)
    ords = steps["ordinal"].to_numpy()
    steady = len(pd.unique(ords[steps["work"].to_numpy(dtype=bool) & (ords >= 2)]))
    # Reads after the last barrier are a final print's, in no finding (but see ``reads_only``).
    last_barrier = (1 << 62) if reads_only else int(steps["i"].max()) if len(steps) else -1

    groups: dict[FindingKey, list[int]] = {}
    for k, c in enumerate(causes):
        if c.cause != "warmup":
            groups.setdefault(c.key, []).append(k)

    # -- host reads (and the compiles they forced), one finding per mechanism ------------
    site_info = sites or {}

    loops = _mech.loop_lines(site_info, training_barrier_sites(steps))

    def gkey(site: int) -> str:
        return _mech.group_key(site, site_info.get(site), loops)

    for key in [k for k in groups if k.site is not None]:
        nk = FindingKey.parse(gkey(key.site or 0))
        if nk != key:
            groups.setdefault(nk, []).extend(groups.pop(key))
    keys_of = syncs["site"].map(lambda v: gkey(int(v))) if len(syncs) else pd.Series(dtype=object)
    dynamo_reads = syncs.iloc[0:0]
    if len(syncs):
        live = live_reads(syncs)
        live = live[live["step"] <= last_barrier]
        dynamo_reads = live[keys_of[live.index] == "dynamo"]
        live = live[keys_of[live.index] != "dynamo"]
        for key, g in live.groupby(keys_of[live.index], sort=False):
            ks = groups.pop(FindingKey.parse(str(key)), [])
            findings.append(_sync_finding(str(key), g, compiles, ks, ordinal_of, steady, site_info, causes, steps))
    for key in [k for k in groups if k.group in ("sync", "lib", "dd")]:
        ks = groups.pop(key)
        g = syncs[keys_of == str(key)] if len(syncs) else syncs
        if len(g):
            findings.append(_sync_finding(str(key), g, compiles, ks, ordinal_of, steady, site_info, causes, steps))
        else:
            mech = _mech.known(str(key))
            if mech is not None:
                findings.append(_barrier_mechanism_finding(mech, compiles.iloc[ks], causes[ks[0]]))
            elif causes[ks[0]].site is not None:
                findings.append(_own_barrier_finding(str(key), compiles.iloc[ks], causes[ks[0]],
                                                     site_info.get(int(causes[ks[0]].site or 0))))

    # -- compiles without a host read ----------------------------------------------------
    gave_up = _gave_up(dynamo_limits or [], compiles, causes, ordinal_of)
    for key, ks in groups.items():
        c0 = causes[ks[0]]
        rows = compiles.iloc[ks]
        ms = float(rows["ms"].sum())
        comp_steps = sorted({int(s) for s in rows["step"]})
        if c0.cause == "input_shape" and key.group == "micro":
            findings.append(_micro_batch_finding(key, c0, ks, causes, rows, ordinal_of))
            continue
        if c0.cause == "input_shape":
            findings.append(_shape_finding(c0, ks, causes, rows, steps, sigs, ordinal_of, steady))
            continue
        if c0.cause == "input_sharding":
            findings.append(_sharding_finding(key, ks, causes, rows, steps, sigs, specs or {}))
            continue
        if c0.cause == "graph_change":
            findings.append(_graph_finding(key, c0, rows, steps, ordinal_of, sites or {}, compiles, syncs))
            continue
        if c0.cause == "cpu_fallback":
            findings.append(_fallback_finding(key, c0, rows, steps, ordinal_of, steady))
            continue
        if c0.cause == "step_closure":
            findings.append(_closure_finding(key, c0, rows, syncs))
            continue
        if c0.cause == "dynamo":
            findings.append(_dynamo_finding(key, c0, rows, dynamo_reads, dynamo_guards or [], gave_up))
            gave_up = []
            continue
        findings.append(Finding(
            id=str(key), cause="unknown", kind="unknown",
            title=f"{len(ks)} compile{'s' if len(ks) != 1 else ''} xprof could not explain ({ms / 1e3:.2f} s)",
            count=len(ks), compiles=len(ks), seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
            advice=ADVICE["unknown_debugged" if "torch_xla says" in c0.evidence else "unknown"],
            evidence=[c0.evidence] if c0.evidence else [], steps=comp_steps,
            pattern=_pattern([ordinal_of.get(s, 0) for s in comp_steps], steady),
        ))

    if gave_up:  # (its retraces were all warm-up: no dynamo finding took them)
        findings.append(_gave_up_finding(gave_up))
    findings.extend(_uncompiled_fallbacks(findings, steps, compiles, ordinal_of, steady))
    eager = _eager_finding(steps, compiles, steady)
    if eager is not None:
        findings.append(eager)
    split = _split_finding(steps, site_info)
    if split is not None:
        findings.append(split)
    _same_steps_value_shapes([f for f in findings if f.cause == "data_dependent"])
    findings = _kinds_first_steps(findings, steps)
    if any(str(site.via or "").startswith("transformers.trainer") for site in site_info.values()):
        for f in findings:  # the loader is the Trainer's: its setting, not DataLoader's
            if f.kind in ("partial_batch", "batch_size_change"):
                f.advice += " With transformers.Trainer: TrainingArguments(dataloader_drop_last=True)."
    _to_training_steps(findings, ordinal_of)
    findings.sort(key=lambda f: (-f.seconds, f.id))
    return findings


def _kinds_first_steps(findings: list[Finding], steps: pd.DataFrame) -> list[Finding]:
    """Batches of different kinds taking turns (two tasks, each with its own head): each kind's
    first two steps do what warm-up does for a single kind (its head's optimizer state is made
    at its first update, its steady graph runs at the second). A graph change whose every
    compile is at the second step of its signature, when that signature's first step compiled
    for the shape, is that kind's: folded into the kinds finding (``input_kinds``: another rank
    or dtype) or else into the shape finding that compiled the first step."""
    kinds = next((f for f in findings if f.kind == "input_kinds"), None)
    shape = next((f for f in findings if f.cause == "input_shape" and f.kind != "micro_batches"), None)
    target = kinds or shape
    if target is None:
        return findings
    train = steps[(steps["phase"] == "train") & steps["work"].astype(bool) & steps["sig"].notna()]
    nth = train.groupby("sig").cumcount().to_numpy()
    ids, sigs = train["i"].to_numpy(), train["sig"].to_numpy(dtype=np.int64)
    first_of = dict(zip(sigs[nth == 0].tolist(), ids[nth == 0].tolist()))
    second = dict(zip(ids[nth == 1].tolist(), sigs[nth == 1].tolist()))  # step -> its signature
    compiled = set(train["i"].to_numpy()[train["uncached"].to_numpy() > 0].tolist())

    def kind_second(f: Finding) -> bool:
        return (f.kind in ("graph_change", "periodic_graph") and bool(f.steps)
                and all(s in second and (kinds is not None or first_of[second[s]] in compiled) for s in f.steps))

    out = []
    for f in findings:
        if f is not target and kind_second(f):
            target.compiles += f.compiles
            target.count += f.compiles
            target.seconds += f.seconds
            target.compile_seconds += f.compile_seconds
            target.steps = sorted(set(target.steps) | set(f.steps))
            target.evidence.append(f"{f.compiles} more at the second step of a kind "
                                   f"(same inputs as its first, another graph: {f.evidence[0]})")
            continue
        out.append(f)
    if kinds is not None:
        n = kinds.compiles  # (the title ends with its count and seconds: "...: 1 recompile, 0.68 s")
        kinds.title = (f"{kinds.title.rsplit(': ', 1)[0]}: {n} recompile{'s' if n != 1 else ''}, "
                       f"{kinds.seconds:.2f} s")
        kinds.severity = "info"
    elif len(out) < len(findings):
        n = target.compiles
        target.title = (f"{target.title.rsplit(': ', 1)[0]}: {n} recompile{'s' if n != 1 else ''}, "
                        f"{target.seconds:.2f} s")
    return out


def _compiled_early(rows: pd.DataFrame, occurrences: list[tuple[int, int]],
                    ordinal_of: dict[int, int]) -> tuple[int, int] | None:
    """(the training step of the last compile, how many occurrences came after it) when a
    finding's compiles all came before some of its occurrences (``(barrier, count)``: calls
    of a CPU-fallback op, host reads) that compiled nothing: a one-off, cached afterwards."""
    if not len(rows):
        return None
    last = int(rows["step"].max())
    later = sum(k for i, k in occurrences if i > last)
    return (ordinal_of.get(last, last), later) if later else None


def _user_steps(steps: pd.DataFrame) -> dict[int, int]:
    """Barrier index -> the training step it is reported under (``user_step``)."""
    return dict(zip(steps["i"].to_numpy(dtype=np.int64).tolist(), steps["user_step"].to_numpy(dtype=np.int64).tolist()))


def _to_training_steps(findings: list[Finding], user: dict[int, int]) -> None:
    """``Finding.steps`` in the user's training steps, not barrier indices: a barrier outside
    a training step (eval, dynamo, an empty one) counts as the training step before it
    (``user``: :func:`_user_steps`)."""
    for f in findings:
        f.steps = sorted({user.get(s, s) for s in f.steps})




def _uncompiled_fallbacks(findings: list[Finding], steps: pd.DataFrame, compiles: pd.DataFrame,
                          ordinal_of: dict[int, int], steady: int) -> list[Finding]:
    """CPU-fallback ops that run after warm-up without compiling anything new: each call
    still copies to the host and cuts the graph, so it is a finding of its own."""
    covered = {op for f in findings if f.cause == "cpu_fallback" for op in f.key.ops}
    if any(f.cause == "data_dependent" for f in findings):
        covered |= DATA_DEPENDENT_FALLBACKS
    ops: set[str] = set()
    ran = fallback_rows(steps)
    for o, d in zip(steps["ordinal"].to_numpy()[ran].tolist(), steps["fallback"].to_numpy()[ran].tolist()):
        if o >= 2:
            ops.update(op for op in d if op not in covered)
    if not ops:
        return []
    key = FindingKey.fallback(ops)
    cause = Cause("cpu_fallback", key, evidence=f"ops without an XLA lowering ran on the CPU after warm-up: "
                  f"{', '.join(sorted(ops))}")
    return [_fallback_finding(key, cause, compiles.iloc[0:0], steps, ordinal_of, steady)]


def _fallback_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame,
                      ordinal_of: dict[int, int], steady: int) -> Finding:
    ops = key.ops
    ms = float(rows["ms"].sum())
    ran = []
    ran_rows = fallback_rows(steps)  # most steps ran no fallback op: an empty dict counts 0 calls
    for i, d in zip(steps["i"].to_numpy()[ran_rows].tolist(), steps["fallback"].to_numpy()[ran_rows].tolist()):
        calls_here = sum(int(d.get(op, 0)) for op in ops)
        if calls_here:
            ran.append((i, calls_here))
    calls = sum(n for _, n in ran)
    ran_steps = [i for i, _ in ran]
    pattern = _pattern([ordinal_of.get(i, 0) for i in ran_steps], steady)
    names = ", ".join(ops)
    has = "have" if len(ops) > 1 else "has"
    when = f" {pattern}" if pattern else ""
    n = len(rows)
    ran_calls = f"{names} {has} no XLA lowering and ran on the CPU{when}: {calls} call{'s' if calls != 1 else ''}"
    title = f"{ran_calls}, {n} compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"
    evidence = [c0.evidence] if c0.evidence else []
    evidence.append("each call copies its input to the host and cuts the graph around it")
    kind = "cpu_fallback"
    steady_ran = [i for i in ran_steps if ordinal_of.get(i, 0) >= WARMUP_STEPS]
    if not n and steady_ran:
        # Nothing compiled, but each call still ran the graph before it early (torch_xla's
        # counters: graphs between barriers, outside host reads) and copied to the host and
        # back: time xprof cannot separate from the step's. In most steps, a change to make.
        cut = steps.loc[steps["i"].isin(steady_ran), "mid_graphs"].to_numpy()
        if cut.sum() and len(steady_ran) * 2 >= max(steady, 1):
            kind = "graph_cut"
            per = cut.sum() / len(steady_ran)
            it = "them" if len(ops) > 1 else "it"
            graphs = f"{per:.3g} graph{'s' if per != 1 else ''}"
            title = f"{ran_calls}, each step cut at {it} ({graphs} run early a step)"
            evidence.append(f"{int(cut.sum())} graphs ran before the barrier, outside any host read, in the "
                            f"{len(steady_ran)} steps after warm-up that called {it}: "
                            "the graph up to each call runs early so its inputs can be copied to the host; the "
                            "copies and the op on the CPU are not timed apart from the step")
    early = _compiled_early(rows, ran, ordinal_of)
    if early is not None:
        # The graphs it cut were compiled once: the same calls later hit the cache.
        user, later = early
        title += (f" (all compiles by step {user}; the {later} call{'s' if later != 1 else ''} "
                  "after compiled nothing)")
        evidence.append(f"its {later} later call{'s' if later != 1 else ''} compiled nothing: the graphs "
                        "around it are cached once seen, so this cost is paid when a new code path first "
                        "runs it (a new shape, the first evaluation or generation)")
    return Finding(
        id=str(key), cause="cpu_fallback", kind=kind, title=title, count=calls, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["cpu_fallback"],
        evidence=evidence, steps=ran_steps, pattern=pattern,
    )


def _sync_finding(key: str, g: pd.DataFrame, compiles: pd.DataFrame, ks: list[int],
                  ordinal_of: dict[int, int], steady: int, sites: dict[int, Site] | None = None,
                  causes: list[Cause] | None = None, steps: pd.DataFrame | None = None) -> Finding:
    first = g.iloc[0]
    site = (sites or {}).get(int(first["site"]))
    mech = _mech.known(key)
    # A library read's finding is one library call (``lib:NAME@file:line``), or one function
    # inside the library call that runs the training loop (see ``mechanisms.group_key``).
    called = key[4:].rsplit("@", 1)[0] if key.startswith("lib:") else None
    code, file, line, via = str(first["code"]), str(first["file"]), int(first["line"]), first["via"]
    kind = sync_kind(str(first["access"]), code, via if isinstance(via, str) else None)
    # A tensor read as a slice bound whose value then set a shape (t[:, :mask.sum(1).max()]):
    # the recompiles are the value's, as for the ops with a value-dependent output.
    value_shape = (str(first["access"]) == "index" and causes is not None
                   and any(causes[k].cause == "data_dependent" for k in ks))
    if value_shape:
        kind = "data_dependent"
    rows = compiles.iloc[ks] if ks else compiles.iloc[0:0]
    compile_ms = float(rows["ms"].sum()) if len(rows) else 0.0
    # Compiles inside its reads are in the reads' waits; those at a barrier, between two of
    # its reads (a library call's, cut by an op on the CPU), or inside another line's read
    # (a value-dependent shape's, compiled by the `.item()` after it), are not.
    outside = ((rows["at"] == "barrier") | (rows["sync_row"] < 0) | ~rows["sync_row"].isin(g.index)
               if len(rows) else None)
    barrier_compile_ms = float(rows[outside]["ms"].sum()) if outside is not None else 0.0
    wait_ms = float(g["ms"].sum())
    # What removing the reads saves: their waits, less what the host would have waited for
    # at the barrier anyway (the graph an earlier barrier launched, on a device-bound loop).
    saved_ms = float(g["saved_ms"].sum()) if "saved_ms" in g else wait_ms
    # Compiles inside its reads that another cause owns (warm-up's first graphs, a new input
    # shape) are in the waits too: they count there, not here (no second count).
    theirs = _others_inside(g, compiles, ks)
    theirs_ms = float(compiles["ms"].iloc[theirs].sum()) if theirs else 0.0
    exec_ms = float(g["exec_ms"].sum())
    executions = int(g["executions"].sum())
    read_steps = sorted({int(s) for s in g["step"]})
    ordinals = [ordinal_of.get(s, 0) for s in read_steps]
    pattern = _pattern(ordinals, steady)
    seconds = (max(saved_ms - theirs_ms, 0.0) + barrier_compile_ms) / 1e3
    n = len(g)
    what = _KIND_WORDS.get(kind, kind)
    where = _loc(file, line)
    caller = site.caller if site is not None and not isinstance(via, str) else None
    if caller is not None:
        # (a read inside a user function: which call of it, when it is called from several lines)
        where += f" (called from {_loc(caller[0], caller[1])})"
    parts = [f"{n} read{'s' if n != 1 else ''}"]
    if len(ks):
        parts.append(f"{len(ks)} compile{'s' if len(ks) != 1 else ''}")
    if executions:
        parts.append(f"{executions} extra execution{'s' if executions != 1 else ''}")
    when = f" {pattern}" if pattern else ""
    # A save now and then is expected, unless it ran before the barrier and compiled parts of
    # the step's graph to read them (torch.save mid-step: 13 compiles, 78% of a run).
    mid_step = kind == "checkpoint" and bool(len(ks))
    severity = ("info" if kind == "checkpoint" and not mid_step and len(read_steps) <= max(1, steady // 4)
                else "warning")
    cause = "implicit_sync"
    if mech is not None:
        cause, kind = "library", mech.kind
        accesses = sorted({str(a) for a in g["access"]})
        own = int((rows["at"] == "barrier").sum()) if len(rows) else 0
        # Lead with what costs most: graphs the mechanism compiled at its own barriers (an
        # evaluation's forward graphs), else its reads.
        does = (f"compiled {own} graph{'s' if own != 1 else ''} of its own and reads {n} "
                f"value{'s' if n != 1 else ''} on the host" if own
                else f"reads {n} value{'s' if n != 1 else ''} on the host")
        title = (f"{mech.what} {does}{when} ({', '.join(accesses)}; via {where}): "
                 f"{', '.join(parts[1:]) + ', ' if len(parts) > 1 else ''}{_title_seconds(seconds)}")
    elif kind == "data_dependent":
        cause = "data_dependent"
        ops = list(dict.fromkeys(_DD_WORDS.get(str(a), str(a)) for a in g["access"]))
        op = " and ".join(ops[:2])
        recompiles = len(rows)
        dd_parts = [f"{recompiles} recompile{'s' if recompiles != 1 else ''}"]
        if executions:
            dd_parts.append(f"{executions} early execution{'s' if executions != 1 else ''}")
        if _third_party(via):
            # inside a library's own code (torchmetrics' input validation): the call is what to change
            title = (f"{via} (called from {where}) runs {op} on the CPU{when}: {', '.join(dd_parts)}, "
                     f"{_title_seconds(seconds)}")
        else:
            title = (f"{op} at {where} gives a value-dependent shape{when}: {', '.join(dd_parts)}, "
                     f"{_title_seconds(seconds)}")
    elif kind == "checkpoint":
        title = (f"{what} at {where} copies tensors to the host{when}"
                 f"{' (expected)' if severity == 'info' else ''}: {', '.join(parts)}, {_title_seconds(seconds)}")
    elif kind == "library_sync":
        title = (f"{called} (called from {where}) forces a host sync{when}: {', '.join(parts)}, "
                 f"{_title_seconds(seconds)}")
    else:
        title = f"{what} at {where} forces a host sync{when}: {', '.join(parts)}, {_title_seconds(seconds)}"
    advice = (mech.advice if mech is not None else ADVICE["value_shape"] if value_shape
              else ADVICE["checkpoint_mid_step"] if mid_step
              else ADVICE["mask_assign"] if kind == "data_dependent" and set(g["access"]) == {"mask_assign"}
              else ADVICE.get(kind, ADVICE["item"]))
    if mech is None and not value_shape and kind in READ_KINDS:
        if not (executions or g["uncached"].any() or g["cached"].any()):
            # Every value was ready: nothing ran early, the host only waited for the device.
            title = f"{what} at {where} waits for the device{when}: {', '.join(parts)}, {_title_seconds(seconds)}"
            if kind not in ("tensor_condition", "scalar"):
                # A logged value can be read later, on a thread; a decision or a Python number
                # is needed now: keeping it on the device is still the fix.
                advice = ADVICE["ready_read"]
        advice += read_tail(pattern)
    if isinstance(via, str) and (kind == "library_sync" or (kind == "data_dependent" and _third_party(via))):
        advice = _library_advice(via, where, code, site,
                                 "reads a tensor's value on the host" if kind == "library_sync"
                                 else "runs an op whose output size depends on the values, on the CPU")
    here = f"{_loc(file, line)} in {first['func']}()"
    evidence = [f"{here}: {code}" if code else here]
    if caller is not None:
        evidence.append(f"{first['func']}() was called from {_loc(caller[0], caller[1])}"
                        + (f": {caller[2]}" if caller[2] else ""))
    inner = first.get("inner") if "inner" in g else None
    by_function = _reads_by_function(g, sites or {}) if called is not None and called == via else []
    if len(by_function) > 1:
        shown = [f"{n} in {name.rsplit('.', 2)[-2] + '.' + name.rsplit('.', 1)[-1] if name.count('.') > 1 else name}"
                 + (f" ({at})" if at else "") for name, n, at in by_function[:3]]
        more = len(by_function) - 3
        evidence.append(f"its reads, by the library function that made them: {'; '.join(shown)}"
                        + (f"; and {more} more" if more > 0 else ""))
    elif isinstance(via, str):
        evidence.append(f"the read happens inside {via}"
                        + (f" (innermost: {inner})" if isinstance(inner, str) else ""))
        if site is not None and site.inner_at is not None:
            lib_file, lib_line, lib_code = site.inner_at
            evidence.append(f"the library's line: {os.path.basename(lib_file)}:{lib_line}"
                            + (f": {lib_code}" if lib_code else ""))
    if value_shape:
        evidence.append("its value is read on the host and sets a shape, so every new value is a new "
                        "shape for the ops after it and the barrier graph")
    elif kind == "data_dependent":
        evidence.append("the op runs on the CPU and its output's length depends on the values, so "
                        "every new count is a new shape for the ops after it and the barrier graph")
        mid = (int(steps.loc[steps["i"].isin(g["step"].unique()), "mid_graphs"].sum())
               if steps is not None and "mid_graphs" in steps else 0)
        if mid:
            # (the overview's extra executions count these too)
            evidence.append(f"in those steps {mid} more graph{'s' if mid != 1 else ''} ran early outside the reads "
                            "(the ops after the op on the CPU, cut from the barrier's graph)")
    evidence.append(f"the host waited {_dur(wait_ms)} in total ({_dur(wait_ms / max(n, 1))} a read)")
    if wait_ms - saved_ms > max(0.05 * wait_ms, 1.0):
        evidence.append(f"{_dur(wait_ms - saved_ms)} of that was the device finishing the graph the previous "
                        "barrier launched, which the host would have waited for at its barrier anyway (the "
                        "device is the slower side of these steps): not counted")
    if theirs:
        warm = sum(1 for k in theirs if causes is not None and k < len(causes) and causes[k].cause == "warmup")
        whose = (f"warm-up compile{'s' if warm != 1 else ''}, counted with warm-up" if warm == len(theirs)
                 else f"compile{'s' if len(theirs) != 1 else ''} counted under "
                      f"{'their' if len(theirs) != 1 else 'its'} own cause{' or warm-up' if warm else ''}")
        evidence.append(f"{_dur(theirs_ms)} of that was {len(theirs)} {whose}, not here")
    if executions:
        evidence.append(f"{executions} execution(s) ran inside these reads ({_dur(exec_ms)})")
    if len(rows):
        evidence.append(f"{len(rows)} compile(s) forced ({_dur(compile_ms)})")
        inside = rows[rows["at"] == "step"]
        most = inside["step"].value_counts() if len(inside) else None
        top = int(most.index[0]) if most is not None else -1
        if (most is not None and kind not in ("data_dependent", "checkpoint")
                and grew([None if pd.isna(v) else int(v) for v in inside.loc[inside["step"] == top, "graph_nodes"]])):
            # One read, ever larger graphs in one step: the ops since the barrier pile up
            # between its reads (an RL episode, acting step by step), so each runs a longer one.
            evidence.insert(1, f"it compiled {int(most.iat[0])} graphs within step {ordinal_of.get(top, top)} "
                               "alone: each read in a step ran a longer graph, the ops since the last barrier "
                               "piling up between reads")
            if mech is None and kind != "library_sync":
                advice = ADVICE["growing_read"]
        at_barrier = [k for k in ks if compiles["at"].iat[k] == "barrier"]
        joined = [k for k in at_barrier if causes is not None and causes[k].leftovers]
        if at_barrier and causes is not None and (mech is None or joined):
            # (a library's read too, when what it left pending made the step's graph larger)
            k = (joined or at_barrier)[0]
            step = ordinal_of.get(int(compiles["step"].iat[k]), int(compiles["step"].iat[k]))
            said = f"{len(at_barrier)} of them at a step barrier (step {step}: {causes[k].evidence})"
            if joined:
                evidence.insert(1, said)
            else:
                evidence.append(said)
        early = _compiled_early(rows, [(int(s), 1) for s in g["step"].tolist()], ordinal_of)
        if early is not None:
            user, later = early
            evidence.append(f"all of them by step {user}: the {later} read"
                            f"{'s' if later != 1 else ''} after compiled nothing (their graphs were cached)")
            if mech is None:  # as the fallback finding says it: the compiles were a one-off
                title += (f" (all compiles by step {user}; the {later} read{'s' if later != 1 else ''} "
                          "after compiled nothing)")
    return Finding(
        id=key, cause=cause, kind=kind, title=title, count=n, compiles=len(ks),
        seconds=seconds, compile_seconds=compile_ms / 1e3, execute_seconds=exec_ms / 1e3,
        advice=advice, evidence=evidence, steps=read_steps, file=file, line=line,
        func=str(first["func"]), code=code, via=via if isinstance(via, str) else None,
        pattern=pattern, severity=severity,
    )


def _same_steps_value_shapes(dd: list[Finding]) -> None:
    """Two value-dependent shapes in the same steps (a detection loss's boolean-mask index
    and a nonzero): the recompiles are told to the first, but fixing it alone leaves the
    other's. Each says so."""
    for f in dd:
        mine = set(f.steps)
        for g in dd:
            if g is not f and mine and len(mine & set(g.steps)) * 2 >= len(mine):
                other = g.title.split(" gives", 1)[0].split(" runs", 1)[0]
                f.evidence.append(
                    f"{other} has a value-dependent shape in the same steps: "
                    + ("their recompiles are counted here, but fixing this one alone leaves that one's"
                       if f.compiles >= g.compiles else "their recompiles are counted there; fix both"))


def _reads_by_function(g: pd.DataFrame, sites: dict[int, Site]) -> list[tuple[str, int, str]]:
    """(innermost library function, reads, its line ``file:line: code``) of a library call's
    reads, most reads first."""
    out: dict[str, list[Any]] = {}
    for sid, n in g["site"].value_counts(sort=False).items():
        site = sites.get(int(sid))
        if site is None:
            continue
        name = site.inner or site.via or "?"
        entry = out.setdefault(name, [0, ""])
        entry[0] += int(n)
        if not entry[1] and site.inner_at is not None:
            lib_file, lib_line, lib_code = site.inner_at
            entry[1] = f"{os.path.basename(lib_file)}:{lib_line}" + (f": {_short(lib_code, 60)}" if lib_code else "")
    return sorted(((k, v[0], v[1]) for k, v in out.items()), key=lambda r: -r[1])


def _third_party(via: Any) -> bool:
    """``via`` is a function of an installed library, not torch's or torch_xla's own."""
    return isinstance(via, str) and via.split(".", 1)[0] not in ("torch", "torch_xla")


def _library_advice(via: str, where: str, code: str, site: Site | None, does: str) -> str:
    """What to change about a library call that reads values on the host, from its own line:
    a keyword argument of the call that the line uses, a conversion to a number, or a check
    of the inputs (``..._validation``: libraries let you turn those off)."""
    lib_code = site.inner_at[2] if site is not None and site.inner_at is not None else ""
    arg = _argument_read_on(code, lib_code)
    inner = (site.inner or "") if site is not None else ""
    # a check of the inputs: the innermost function's name, or the reading line, says so
    checks = re.search(r"valid|check", f"{inner.rsplit('.', 1)[-1]} {lib_code}", re.IGNORECASE) is not None
    where_in = f"{inner.rsplit('.', 1)[-1]}, " if inner else ""
    return (f"{via} (called from {where}) {does}. "
            + (f"The library's line that reads uses `{arg.split('=')[0]}`, which you pass as `{arg}`: "
               "without it that read may not happen. " if arg else "")
            + (f"That line turns a tensor into a Python number (`{_short(lib_code)}`): pass it a "
               "value you read on the host anyway (at a logging step), or call it less often. "
               if not arg and _TO_NUMBER.search(lib_code) else "")
            + (f"It happens in {where_in}a check of your inputs: libraries usually let you turn such checks "
               "off (validate_args=False in torchmetrics and torch.distributions). " if checks and not arg else "")
            + "Check whether it needs to run every step, or whether the library has an XLA-friendly option.")


_KWARG = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*([^,()]+)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_TO_NUMBER = re.compile(r"\b(?:float|int)\(|\.item\(\)|\.tolist\(\)")


def _short(code: str, limit: int = 80) -> str:
    return code if len(code) <= limit else code[:limit - 3] + "..."


def _argument_read_on(code: str, lib_code: str) -> str | None:
    """The keyword argument (``name=value``) of the user's call whose name the library's
    reading line uses (``error_if_nonfinite=True`` and ``if error_if_nonfinite and (...)``)."""
    if "(" not in code or not lib_code:
        return None
    names = set(_NAME.findall(lib_code))
    for name, value in _KWARG.findall(code[code.index("("):]):
        if name in names:
            return f"{name}={value.strip()}"
    return None


def _others_inside(g: pd.DataFrame, compiles: pd.DataFrame, ks: list[int]) -> list[int]:
    """Positions of the compiles that happened inside the reads ``g`` but are not ``ks``."""
    if not len(compiles) or not len(g):
        return []
    inside = compiles["sync_row"].isin(g.index).to_numpy(dtype=bool, copy=True)
    if ks:
        inside[np.asarray(ks, dtype=np.int64)] = False
    return np.flatnonzero(inside).tolist()


@dataclass
class _Series:
    """(ordinal, shape) of input ``name`` for every steady step that ran a graph (each
    micro-batch's ``name#k`` too), kept per signature: a long run has a million steps and
    a few dozen signatures. The series is, step by step, each shape of the step's group."""

    ords: np.ndarray
    """Ordinal of each steady step whose signature holds the input, in step order."""
    which: np.ndarray
    """That step's group (an index into ``groups``)."""
    groups: list[list[tuple[int, ...]]]
    """The input's shapes in each signature, in input order."""
    rests: list[tuple[tuple[str, tuple[int, ...]], ...]] = field(default_factory=list)
    """The other inputs' (name, shape) in each signature: what else a graph depends on."""
    first: list[tuple[int, ...]] = field(default_factory=list)
    """The input's shapes in the first step (ordinal 0, left out of the series as a one-off
    graph), for counting the steps of a stage it began."""

    @classmethod
    def of(cls, name: str, steps: pd.DataFrame, sigs: dict[int, Signature]) -> _Series:
        shape_of = {sig_id: [shape for n, shape, _, _ in inputs if base_input_name(n) == name]
                    for sig_id, inputs in sigs.items()}
        rest_of = {sig_id: tuple(sorted((n, tuple(shape)) for n, shape, _, _ in inputs
                                        if base_input_name(n) != name))
                   for sig_id, inputs in sigs.items()}
        sig_col = steps["sig"]
        keep = (steps["work"].to_numpy(dtype=bool) & sig_col.notna().to_numpy(dtype=bool)
                & (steps["ordinal"].to_numpy() >= 1))
        sig = sig_col.to_numpy(dtype=np.int64, na_value=-1)[keep]
        ords = steps["ordinal"].to_numpy()[keep]
        codes, uniques = pd.factorize(sig)  # groups in order of first appearance
        groups = [shape_of.get(int(u), []) for u in uniques]
        rests = [rest_of.get(int(u), ()) for u in uniques]
        has = np.asarray([len(g) > 0 for g in groups], dtype=bool)[codes] if len(groups) else np.zeros(0, bool)
        at_first = (steps["work"].to_numpy(dtype=bool) & sig_col.notna().to_numpy(dtype=bool)
                    & (steps["ordinal"].to_numpy() == 0))
        first_sig = sig_col.to_numpy(dtype=np.int64, na_value=-1)[at_first]
        first = shape_of.get(int(first_sig[0]), []) if len(first_sig) else []
        return cls(ords[has], codes[has], groups, rests, first)

    def rows_shared(self) -> bool | None:
        """Whether the input's dim 0 is a batch's rows: another input had the same size there
        in every signature (``input_ids`` and ``labels``); False for a graph's node features
        beside its edge list, whose dim 0 no other input shares; None with no other input."""
        common: set[str] | None = None
        for shapes, rest in zip(self.groups, self.rests):
            others = [(n, s) for n, s in rest if s]
            if not shapes or not shapes[0] or not others:
                continue
            same = {n for n, s in others if s[0] == shapes[0][0]}
            common = same if common is None else common & same
        return None if common is None else bool(common)

    def other_free_size(self) -> str | None:
        """Another input whose dim 0 takes 3 or more sizes apart from this input's (in some
        signature the two differ): two sizes that change on their own each step are a
        structure's (a graph's nodes and its edges), not one batch's rows. Its name, or None."""
        mine = [shapes[0][0] if shapes and shapes[0] else None for shapes in self.groups]
        sizes: dict[str, set[int]] = {}
        apart: set[str] = set()
        for own, rest in zip(mine, self.rests):
            for n, shape in rest:
                if shape:
                    sizes.setdefault(n, set()).add(shape[0])
                    if own is not None and shape[0] != own:
                        apart.add(n)
        free = sorted(n for n in apart if len(sizes[n]) >= 3)
        return free[0] if free else None

    def with_rest(self, dim: int) -> set[tuple[int, tuple[tuple[str, tuple[int, ...]], ...]]]:
        """Each distinct (size along ``dim``, everything else a graph depends on) that a
        step had: the graphs that padding this input's ``dim`` would still tell apart.

        Everything else is this input's other dims (``""``: a token budget's batch size) and
        the other inputs' shapes, where a size at index ``dim`` equal to this input's is
        padded with it (-1): an attention mask or a causal LM's labels are padded by the
        same collate call; a seq2seq batch's labels, padded to their own longest, are not.
        """
        out = set()
        for g, rest in zip(self.groups, self.rests):
            for s in g:
                if len(s) > dim:
                    n = s[dim]
                    key = (("", _padded_with(s, dim, n)),) + tuple((r, _padded_with(t, dim, n)) for r, t in rest)
                    out.add((n, key))
        return out

    def stages(self, dim: int) -> list[tuple[int, int]] | None:
        """(size, steps) of each run of one size along ``dim``, in step order, when every size
        came in one run of steps (a curriculum's stages: 16 for 8 steps, then 32, then 48);
        None when a size came back or there is one run."""
        per_group = [g[0][dim] if g and len(g[0]) > dim else None for g in self.groups]
        runs: list[list[Any]] = []
        for w in self.which.tolist():
            v = per_group[w]
            if runs and runs[-1][0] == v:
                runs[-1][1] += 1
            else:
                runs.append([v, 1])
        if len(runs) < 2 or None in {v for v, _ in runs} or len({v for v, _ in runs}) != len(runs):
            return None
        if self.first and len(self.first[0]) > dim and self.first[0][dim] == runs[0][0]:
            runs[0][1] += 1  # the first step began the first stage
        return [(int(v), int(n)) for v, n in runs]

    def shapes(self) -> list[tuple[int, ...]]:
        """Distinct shapes in order of first appearance."""
        return list(dict.fromkeys(shape for g in self.groups for shape in g))

    def _per_step(self, pick: Callable[[tuple[int, ...]], bool]) -> np.ndarray:
        """How many shapes of each step's group ``pick`` takes."""
        per_group = np.asarray([sum(1 for s in g if pick(s)) for g in self.groups], dtype=np.int64)
        return per_group[self.which] if len(per_group) else np.zeros(0, dtype=np.int64)

    def value_counts(self, dim: int) -> Counter[int]:
        """Counts of the shapes' size along ``dim`` over the series, in order of first appearance."""
        steps_in = np.bincount(self.which, minlength=len(self.groups))
        out: Counter[int] = Counter()
        for g, n in zip(self.groups, steps_in.tolist()):
            if n:
                for s in g:
                    if len(s) > dim:
                        out[s[dim]] += n
        return out

    def ordinals_where(self, pick: Callable[[tuple[int, ...]], bool]) -> list[int]:
        """The ordinal of every series entry whose shape ``pick`` takes, in series order."""
        return np.repeat(self.ords, self._per_step(pick)).tolist()

    def warm_values(self, dim: int) -> list[int]:
        """The input's sizes along ``dim`` in the warm-up steps (0 and 1): graphs a loop pays
        for whatever it pads to."""
        at_one = [s for k in np.flatnonzero(self.ords == 1).tolist() for s in self.groups[int(self.which[k])]]
        return [s[dim] for s in [*self.first, *at_one] if len(s) > dim]

    def values(self, dim: int) -> list[int]:
        """Each series entry's size along ``dim`` (entries of lower rank left out), as counts allow:
        the order is not the series' (callers count them)."""
        counts = self.value_counts(dim)
        return np.repeat(np.asarray(list(counts), dtype=np.int64), list(counts.values())).tolist()


def _padded_with(shape: tuple[int, ...], dim: int, n: int) -> tuple[int, ...]:
    """``shape`` with its size at ``dim`` marked -1 when it is ``n`` (padded alike)."""
    return shape[:dim] + (-1,) + shape[dim + 1:] if len(shape) > dim and shape[dim] == n else shape


def _still_varying(with_rest: set[tuple[int, tuple[tuple[str, tuple[int, ...]], ...]]]) -> list[str]:
    """What in ``with_rest``'s keys still changes once the padded dim is padded: ``""`` for
    the input's own other dims, else the other inputs' names (in name order)."""
    seen: dict[str, set[tuple[int, ...]]] = {}
    for _, key in with_rest:
        for name, shape in key:
            seen.setdefault(base_input_name(name), set()).add(shape)
    return sorted(n for n, v in seen.items() if len(v) > 1)

def _shape_finding(c0: Cause, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                   steps: pd.DataFrame, sigs: dict[int, Signature], ordinal_of: dict[int, int],
                   steady: int) -> Finding:
    name = c0.input or "?"
    ms = float(rows["ms"].sum())
    comp_steps = [int(s) for s in rows["step"]]
    series = _Series.of(name, steps, sigs)
    shapes = series.shapes()
    forms = list(dict.fromkeys((tuple(shape), str(dtype)) for sig in sigs.values()
                               for n, shape, dtype, _ in sig if base_input_name(n) == name))
    if of_other_kinds(forms):
        # Another rank or dtype is no padding or batch size: batches of another kind (a task's
        # targets: class ids [16] int64 against regression targets [16, 3] float32).
        listed = ", ".join(f"{list(sh)} {dt}" for sh, dt in forms[:4]) + (" ..." if len(forms) > 4 else "")
        n = len(ks)
        return Finding(
            id=str(FindingKey.input(name)), cause="input_shape", kind="input_kinds",
            title=(f"{name} comes in {len(forms)} kinds ({listed}): batches of different kinds take turns, "
                   f"each its own graph: {n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"),
            count=n, compiles=n, seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
            advice=ADVICE["input_kinds"], evidence=[c0.evidence, "another rank or dtype, not another length: "
                                                    "not padding nor a batch size",
                                                    _compiled_at(comp_steps, ordinal_of)],
            steps=comp_steps, input=name, shapes=[list(sh) for sh, _ in forms])
    rank = max((len(s) for s in shapes), default=0)
    varying = [d for d in range(rank) if len({s[d] for s in shapes if len(s) > d}) > 1]
    kind, dim, pattern = "shape_change", None, None
    resized = False
    minority_ords: list[int] = []
    if varying == [0]:
        dim = 0
        counts = series.value_counts(0)
        mode = counts.most_common(1)[0][0]
        minority = sorted(v for v in counts if v != mode)
        minority_ords = series.ordinals_where(lambda s: len(s) > 0 and s[0] != mode)
        if len(minority) == 1 and minority[0] < mode:
            kind = "partial_batch"
            every = describe_period(minority_ords)
            pattern = "the last batch of each epoch" + (f" ({every})" if every else "")
        else:
            kind = "batch_size_change"
    elif varying:
        others = [d for d in varying if d != 0] or varying
        dim = max(others, key=lambda d: len({s[d] for s in shapes if len(s) > d}))
        distinct = len({s[dim] for s in shapes if len(s) > dim})
        # Several dims changing together (an image's height and width: multi-scale training,
        # random resized crops) is a size, not padding: one varying dim is a padded length.
        resized = len([d for d in others if d != 0]) >= 2
        kind = "dynamic_padding" if distinct >= 3 and not resized else "shape_change"
    free = None
    if kind == "batch_size_change" and len(series.value_counts(0)) >= 3:
        free = series.other_free_size()
    # (a last partial batch keeps its name though no other input shares its rows: a second
    # loader's batch, one size all epoch but a short last one, is still a batch)
    rare_short = kind == "partial_batch" and len(minority_ords) * 4 <= len(series.ords)
    if (kind in ("batch_size_change", "dynamic_padding", "partial_batch") and series.rows_shared() is False
            and not rare_short) or free is not None:
        # No other input shares its dim 0, or another input's dim 0 changes on its own too:
        # not a batch of rows, so neither a batch size nor a tokenizer's padding (a graph's
        # nodes and edges, a sample of its own size).
        dim = dim or 0
        distinct = len({s[dim] for s in shapes if len(s) > dim})
        kind, pattern = ("dynamic_size" if distinct >= 3 else "shape_change"), None
    srcs = {src for sig in sigs.values() for n, _, _, src in sig if base_input_name(n) == name}
    if (kind == "partial_batch" and srcs and not srcs & {"batch", "loader", "?"} and len(minority_ords) == 1
            and minority_ords[0] < int(series.ords.max())):
        # No loader gave this input (moved with .to from tensors the loop made), and its one
        # short batch neither recurs (each epoch) nor ends the run: nothing says it ended an
        # epoch, only that the batch size changed once.
        kind, pattern = "batch_size_change", None
    what_if = None
    co_varying: list[str] = []
    alone_left = 0
    integer = _integer_input(name, sigs)  # (token ids: a tokenizer's padding; else values)
    if kind in ("dynamic_padding", "dynamic_size") and dim is not None and len(rows):
        lengths = series.values(dim)
        # What one more length cost in this run: every graph it compiled (the step's, its
        # reads', a micro-batch's), not one compile: the first length was warm-up's.
        warm = series.warm_values(dim)
        per_length = ms / 1e3 / max(len(set(lengths) - set(warm)) if warm else len(set(lengths)) - 1, 1)
        joint = series.with_rest(dim)
        co_varying = _still_varying(joint)
        tokens = kind == "dynamic_padding" and integer
        what_if = bucketing_what_if(lengths, per_length, ms / 1e3, joint if co_varying else None, tokens=tokens,
                                    warm=warm)
        if any(co_varying):
            # Other inputs padded on their own (a seq2seq batch's labels): the advice pads them
            # the same way, and so does the table; "alone" says what this input's padding leaves.
            alone_left = min(int(r["graphs"]) for r in what_if)  # type: ignore[call-overload]
            what_if = bucketing_what_if(lengths, per_length, ms / 1e3, joint, tokens=tokens, rest_dim=dim, warm=warm)
    n = len(ks)
    values_txt = ""
    vals = sorted({s[dim] for s in shapes if len(s) > dim}) if dim is not None else []
    if resized:
        dims = [d for d in others if d != 0]
        sizes = list(dict.fromkeys("x".join(str(s[d]) for d in dims) for s in shapes if len(s) > max(dims)))
        values_txt = f" in dims {', '.join(map(str, dims))} ({len(sizes)} sizes: {_first_few(sizes)})"
    elif dim is not None:
        values_txt = f" ({len(vals)} distinct values of dim {dim}: {_first_few(vals)})"
    headline = {
        "dynamic_padding": f"{name} is padded per batch",
        "dynamic_size": f"{name}{_POSS[name.endswith('s')]} size changes",
        "partial_batch": f"The last partial batch changes {name}'s batch size",
        "batch_size_change": f"{name}'s batch size changes",
        "shape_change": f"{name} changes {'size' if resized else 'shape'}",
    }[kind]
    # One shape, but some steps move it to the device and others do not: another input set is
    # another graph (cutmix's box, moved only in the steps that mix).
    input_set = kind == "shape_change" and len(shapes) == 1  # (one shape cannot change)
    if input_set:
        headline, values_txt = f"{name} is an input of some steps and not others", ""
    # Settled: every shape compiled early, and a long stretch after compiled nothing (length
    # buckets, a fixed set of image sizes): a one-off cost, not one that grows with the run.
    last = max((ordinal_of.get(s, s) for s in comp_steps), default=0)
    after = int((series.ords > last).sum())
    settled = bool(comp_steps) and after >= SETTLED_AFTER and after >= 3 * max(last, 1)
    advice = ADVICE["resize"] if resized else ADVICE["input_set"] if input_set else ADVICE[kind]
    if kind == "dynamic_padding" and not integer:
        # Values, not token ids (boxes, features): no tokenizer to ask for a fixed length (and
        # rows of a batch, not a graph's nodes: dynamic_size's advice is for those).
        advice = ADVICE["padded_values"]
    row_counts = sorted({sh[0] for sh in shapes if sh}) if kind == "dynamic_padding" and 0 in varying else []
    # (a dynamic_size's dim 0 is no batch: its other dims changing with it are in the table)
    if row_counts:
        # Token-budget batching (fairseq's max_tokens, a sampler filling batches up to N
        # tokens): fewer rows when they are longer, so both dims change every batch.
        values_txt += f" and its batch size changes with it ({len(row_counts)} sizes: {_first_few(row_counts)})"
        advice = ADVICE["padding_and_batch"]
    # (a last partial batch is no stage; nor is a size seen once at the very end)
    staged = (series.stages(dim) if dim is not None and not resized and not settled and kind != "partial_batch"
              else None)
    if staged is not None and min(n for _, n in staged[:-1]) >= STAGE_STEPS and staged[-1][1] >= 2:
        # One size for a stretch of steps, then the next, none back (a curriculum growing the
        # sequence length): a compile per stage, not padding that varies per batch.
        headline = f"{name} took {len(staged)} sizes of dim {dim} in stages"
        values_txt = f" ({', '.join(f'{v} for {k} steps' for v, k in staged[:6])}{' ...' if len(staged) > 6 else ''})"
        advice = ADVICE["staged_shapes"]
    elif settled and kind in ("dynamic_padding", "dynamic_size", "shape_change") and dim is not None and not resized:
        headline = f"{name} took {len(vals)} lengths of dim {dim}"
        values_txt = f" ({_first_few(vals)}), all by step {last}"
        advice = ADVICE["settled_padding"] + (" The what-if table shows what fewer would leave." if what_if else "")
    step = bucket_step(vals) if kind in ("dynamic_padding", "shape_change") and dim and not resized else 0
    if step and not settled and not (staged is not None and headline.endswith("in stages")):
        # Every length a multiple of one step (16, 32, 48): padded to buckets already, each a
        # graph of its own, compiled once. Not padding per batch to fix, but a trade to weigh.
        headline = f"{name} is padded to multiples of {step}"
        values_txt = f" ({len(vals)} lengths of dim {dim}: {_first_few(vals)}), a graph each"
        advice = ADVICE["bucketed"] + (" The what-if table shows what fewer would leave." if what_if else "")
    if kind == "partial_batch" and is_inference(steps):
        advice = ADVICE["partial_batch_inference"]
    title = f"{headline}{values_txt}: {n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"
    lines: list[str] = []
    for k, barrier in zip(ks, rows["step"].tolist()):
        c = causes[k]
        if c.old is not None and c.new is not None:
            # Training steps, as everywhere the user reads a step number.
            line = f"step {ordinal_of.get(int(barrier), int(barrier))}: {name} {list(c.old)} -> {list(c.new)}"
            if c.first_step_only:
                line += FIRST_STEP_ONLY
        else:
            line = c.evidence
        if line and line not in lines:
            lines.append(line)  # a read and its barrier compiling for the same new shape: one line
    evidence = lines[:3]
    if len(lines) > 3:
        evidence.append(f"... and {len(lines) - 3} more")
    evidence.append(f"mean compile {ms / max(n, 1):.0f} ms")
    if settled:
        evidence.insert(0, f"all {len(shapes)} shapes by step {last}: the {after} steps after compiled nothing "
                        "(each shape's graphs were cached): a one-off cost")
    if what_if and co_varying:
        left = min(int(r["graphs"]) for r in what_if)  # type: ignore[call-overload]
        graphs = f"at least {left} graph{'s' if left != 1 else ''}"
        other_inputs = [nm for nm in co_varying if nm]
        parts = []
        if "" in co_varying:
            parts.append((f"its batch size changes too ({len(row_counts)} sizes: {_first_few(row_counts)})"
                          if row_counts else "its other dims change too")
                         + f": padding dim {dim} alone leaves {graphs} (counted in the table)")
        if other_inputs:
            many = len(other_inputs) > 1
            parts.append(f"{_and_list(other_inputs)} {'change' if many else 'changes'} shape on "
                         f"{'their' if many else 'its'} own: padding {name} alone leaves at least "
                         f"{alone_left} graph{'s' if alone_left != 1 else ''}; pad {'them' if many else 'it'} "
                         f"the same way (the table does, each to {'its' if not many else 'their'} own "
                         "multiple or largest size)")
        evidence.insert(1 if settled else 0, "; ".join(parts))
    return Finding(
        id=str(FindingKey.input(name)), cause="input_shape", kind=kind, title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=comp_steps, input=name, dim=dim,
        shapes=[list(s) for s in shapes], pattern=pattern, what_if=what_if,
    )


def _integer_input(name: str, sigs: dict[int, Signature]) -> bool:
    """Whether the input (any micro-batch of it) is integer-typed in the run: token ids, labels."""
    for sig in sigs.values():
        for n, _, dtype, _ in sig:
            if base_input_name(n) == name:
                return "int" in str(dtype) or str(dtype) == "bool"
    return True


STAGE_STEPS = 4
"""Steps each size must last (but the last) for a shape series to read as stages."""

_POSS = ("'s", "'")
"""The possessive's ending, by whether the name ends in s (``x's``, ``edges'``)."""


def _and_list(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _micro_batch_finding(key: FindingKey, c0: Cause, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                         ordinal_of: dict[int, int]) -> Finding:
    """Steps that held fewer (or more) micro-batches than the steady ones: each count is a
    graph of its own (a gradient-accumulation window cut short where an epoch ends)."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    comp_steps = sorted({int(s) for s in rows["step"]})
    usual = c0.old[0] if c0.old else "?"
    other = sorted({c.new[0] for c in (causes[k] for k in ks) if c.new})
    title = (f"Steps accumulating {' or '.join(map(str, other))} micro-batches instead of {usual} compiled "
             f"graphs of their own: {n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    evidence = [c0.evidence] if c0.evidence else []
    evidence.append("compiled at step" + ("s " if len(comp_steps) != 1 else " ")
                    + ", ".join(str(ordinal_of.get(s, s)) for s in comp_steps[:10]))
    return Finding(
        id=str(key), cause="input_shape", kind="micro_batches", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["micro_batches"],
        evidence=evidence, steps=comp_steps, input=c0.input,
    )


def _first_few(values: list[Any], n: int = 8) -> str:
    """``16, 24, 32`` (the first ``n``, then ``...``)."""
    return ", ".join(str(v) for v in values[:n]) + ("..." if len(values) > n else "")


def _sharding_finding(key: FindingKey, ks: list[int], causes: list[Cause], rows: pd.DataFrame,
                      steps: pd.DataFrame, sigs: dict[int, Signature], specs: Shardings) -> Finding:
    """The ``input_sharding`` compiles of one input: the shardings it took with the same
    shape, the steps that had the odd one, and how to keep it fixed."""
    name = key.detail
    ms = float(rows["ms"].sum())
    n = len(ks)
    # The input's sharding at every training step that ran a graph; the usual one is the
    # one most steps had.
    keep = (steps["work"].to_numpy(dtype=bool) & steps["sig"].notna().to_numpy(dtype=bool)
            & (steps["phase"] == "train").to_numpy(dtype=bool))
    per_step: list[tuple[int, str]] = []
    for i, sig in zip(steps["i"][keep].tolist(), steps["sig"][keep].tolist()):
        spec = next((sp for nm, sp in specs.get(int(sig), {}).items() if base_input_name(nm) == name), None)
        if spec is not None:
            per_step.append((int(i), spec))
    counts = Counter(sp for _, sp in per_step)
    usual = counts.most_common(1)[0][0] if counts else None
    seen: list[str] = [usual] if usual is not None else []
    for k in ks:
        pair = causes[k].sharding
        for spec in pair or ():
            if spec not in seen:
                seen.append(spec)
    odd = [i for i, sp in per_step if sp != usual]
    shape = next((shp for sig in sigs.values() for nm, shp, _, _ in sig if base_input_name(nm) == name), None)
    words = " and ".join(no_sharding(s) for s in seen[:2]) + (" ..." if len(seen) > 2 else "")
    title = (f"{name} is sharded {len(seen)} ways with the same shape ({words}): "
             f"{n} recompile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    evidence = [f"step {int(s)}: {causes[k].evidence}" for k, s in zip(ks[:3], rows["step"].tolist()[:3])
                if causes[k].evidence]
    if n > 3:
        evidence.append(f"... and {n - 3} more")
    if odd and usual is not None:
        listed = ", ".join(str(i) for i in odd[:10]) + (" ..." if len(odd) > 10 else "")
        evidence.append(f"{name} was not sharded the usual way ({no_sharding(usual)}) at "
                        f"step{'s' if len(odd) != 1 else ''} {listed}")
    return Finding(
        id=str(key), cause="input_sharding", kind="sharding_change", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["sharding_change"],
        evidence=evidence, steps=odd or sorted({int(s) for s in rows["step"]}), input=name,
        shapes=[list(shape)] if shape is not None else None, shardings=seen,
    )


def _compiled_at(comp_steps: list[int], ordinal_of: dict[int, int]) -> str:
    """``compiled at steps 9, 19, 29`` in the user's training steps (ten at most)."""
    user = sorted({ordinal_of.get(s, s) for s in comp_steps})
    return (f"compiled at step{'s' if len(user) != 1 else ''} {', '.join(str(u) for u in user[:10])}"
            + (" ..." if len(user) > 10 else ""))


def _plain_graph_finding(key: FindingKey, kind: str, title: str, c0: Cause, rows: pd.DataFrame,
                         comp_steps: list[int], ordinal_of: dict[int, int], severity: str) -> Finding:
    """A graph finding that is its cause's evidence, where it compiled, and its advice."""
    ms, n = float(rows["ms"].sum()), len(rows)
    return Finding(
        id=str(key), cause="graph_change", kind=kind, title=title, count=n, compiles=n, seconds=ms / 1e3,
        compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE[kind], severity=severity,
        evidence=[c0.evidence, _compiled_at(comp_steps, ordinal_of)], steps=comp_steps)


def _grows_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame,
                   ordinal_of: dict[int, int], sites: dict[int, Site], syncs: pd.DataFrame | None,
                   comp_steps: list[int], ms: float) -> Finding:
    """Graphs of the same inputs, larger each time: state kept across steps grows in them."""
    n = len(rows)
    sizes = {int(v) for v in rows["graph_nodes"].dropna()}
    again = steps[steps["graph_nodes"].isin(list(sizes)) & ~steps["i"].isin(comp_steps)]
    reused = int(((again["cached"] > 0) & (again["uncached"] == 0)).sum()) if len(again) else 0
    evidence = [c0.evidence, _compiled_at(comp_steps, ordinal_of)]
    if syncs is not None and len(syncs):
        # A read in every one of these steps: what it reads is likely what grows (stacked).
        live = live_reads(syncs)
        per_site = live[live["step"].isin(comp_steps)].groupby("site")["step"].nunique()
        for sid in per_site[per_site == len(comp_steps)].index.tolist()[:1]:
            site = sites.get(int(sid))
            if site is not None:
                evidence.append(f"a host read ran in each of these steps: {os.path.basename(site.file)}:{site.line} "
                                f"{site.code.strip()}")
    title = (f"The step graph grows: {n} new graphs from the same inputs, each larger than the last "
             f"({', '.join(str(v) for v in sorted(sizes)[:6])}{' ...' if len(sizes) > 6 else ''} nodes), "
             f"{'none reused' if not reused else 'each reused later'}, {ms / 1e3:.2f} s")
    return Finding(
        id=str(key), cause="graph_change", kind="graph_grows", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["graph_grows"],
        evidence=evidence, steps=comp_steps)


def _graph_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, steps: pd.DataFrame,
                   ordinal_of: dict[int, int], sites: dict[int, Site], compiles: pd.DataFrame,
                   syncs: pd.DataFrame | None = None) -> Finding:
    ms = float(rows["ms"].sum())
    n = len(rows)
    comp_steps = sorted({int(s) for s in rows["step"]})
    advice = ""
    # No input came from the host in these steps: tensors kept on the device fed them.
    hostless = bool(c0.no_host)
    other_ops = c0.no_host == "new"  # (a graph of a size not seen before ran other ops)
    if key.group == "joined":
        return _plain_graph_finding(
            key, "pass_joined", f"Another pass's ops ran inside a training step's graph: {n} extra "
            f"graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s", c0, rows, comp_steps, ordinal_of, "warning")
    if key.group == "eager_ops":
        return _plain_graph_finding(
            key, "eager_op", f"Ops run one by one outside the compiled step compiled on their first run: {n} "
            f"compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s once, cached afterwards", c0, rows, comp_steps,
            ordinal_of, "info")
    if key.group == "grows":
        return _grows_finding(key, c0, rows, steps, ordinal_of, sites, syncs, comp_steps, ms)
    if key == EVAL_KEY:
        kind = "eval_pass"
        starts = _eval_pass_starts(steps)
        if not starts:
            # No eval barriers recorded (an older recorder): the barriers that ran these graphs.
            nodes = {int(v) for v in rows["graph_nodes"].dropna()}
            ran = steps[steps["graph_nodes"].isin(list(nodes))] if nodes else steps.iloc[0:0]
            ordinals = sorted({int(o) for o in ran["seq"] if o >= 0}) or [ordinal_of.get(s, 0) for s in comp_steps]
            runs = _runs(ordinals)
            # Count training steps (not eval barriers) between the starts of eval passes.
            starts = _train_steps_before([r[0] for r in runs], sorted(set(ordinals)))
        every = describe_period(starts) if len(starts) >= 3 else None
        if every is None and len(starts) == 2 and starts[1] - starts[0] > 1:
            every = f"every {starts[1] - starts[0]} steps"
        pattern = every.replace("steps", "training steps") if every else None
        advice = ADVICE["eval_pass"]
        evaluating = steps[steps["phase"] == "eval"] if "phase" in steps else steps.iloc[0:0]
        if len(evaluating) and bool((evaluating["nograd"] | evaluating["grad_off"]).any()):
            # it already runs under no_grad (at its barriers, or around its forward; the pass's
            # last barriers, a loader's end or a mesh_reduce after the loop, may come after
            # the with block): do not ask for it
            advice = ADVICE["eval_pass_nograd"]
        title = (f"An evaluation pass{(' (run ' + pattern + ')') if pattern else ''} compiled {n} graph"
                 f"{'s' if n != 1 else ''} of its own: {ms / 1e3:.2f} s once, cached afterwards")
    elif key == EVAL_MODE_KEY:
        in_eval = steps[(steps["phase"] == "train") & steps["eval_mode"].astype(bool)
                        & (steps["i"] >= comp_steps[0])] if "eval_mode" in steps else steps.iloc[0:0]
        first = ordinal_of.get(comp_steps[0], comp_steps[0])
        kind, advice, pattern = "eval_mode_training", ADVICE["eval_mode_training"], None
        fewer = []
        title = (f"{len(in_eval) or n} training step{'s' if len(in_eval) != 1 else ''} from step {first} ran with "
                 f"the model in eval mode (dropout off, batch-norm statistics frozen): {n} extra "
                 f"graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s")
    else:
        nodes_val = rows["graph_nodes"].dropna()
        node = int(nodes_val.iloc[0]) if len(nodes_val) else None
        ran = steps[steps["graph_nodes"] == node] if node is not None else steps.iloc[0:0]
        ordinals = sorted({int(o) for o in ran["ordinal"] if o >= 1})
        pattern = describe_period(ordinals)
        kind = "periodic_graph" if pattern else "graph_change"
        advice = ADVICE[kind]
        # Whether any step from the first of these compiles on ran a graph it had compiled
        # before (a cached compile and no new one): the variants repeat, or never do.
        work = steps[steps["work"].astype(bool) & (steps["ordinal"] >= 1) & (steps["i"] >= comp_steps[0])]
        reused = int(((work["cached"] > 0) & (work["uncached"] == 0)).sum()) if len(work) else 0
        fewer = _graph_inputs_changed(rows, compiles)
        same = "with no new input from the host" if hostless else "with the same input shapes"
        # torch_xla's debug records (xprof run): did the graph take another number of inputs?
        took = _inputs_against_previous(rows, compiles) if hostless else None
        state = "state_inputs" if other_ops or (took and took[1] != took[2]) else "state_grows"
        if hostless and not pattern:
            advice = ADVICE[state]
        if pattern:
            # The steps of the pattern (a graph of this size) that reused a graph compiled before:
            # none, with a compile at each, is a Python number that changes each time (cutmix's
            # box), not control flow between a few variants.
            again = ran[(ran["ordinal"] >= 1) & (ran["i"] >= comp_steps[0])]
            reused = int(((again["cached"] > 0) & (again["uncached"] == 0)).sum()) if len(again) else 0
        if pattern and not reused and n >= 3:
            kind, advice = "graph_every_step", ADVICE[state if hostless else "graph_every_step"]
            title = (f"The step graph changes {pattern}, a new graph each time {same}: {n} new graphs, "
                     f"none reused, {ms / 1e3:.2f} s")
        elif not pattern and not reused and n >= 3 and n >= 0.8 * len(work):
            kind, advice = "graph_every_step", ADVICE[state if hostless else "graph_every_step"]
            title = (f"The graph changed at every step {same}: {n} new graphs in "
                     f"{len(work)} steps, none reused, {ms / 1e3:.2f} s")
        elif not pattern and n >= 3 and n >= 0.5 * len(work) and not fewer:
            # A new graph in most steps, a few values coming back (a random crop's offset drawn
            # from a few dozen): the same story as every step, with some reuse.
            kind, advice = "graph_every_step", ADVICE[state if hostless else "graph_every_step"]
            title = (f"The graph changed in {n} of {len(work)} steps {same}: {n} new graphs, "
                     f"{reused} step{'s' if reused != 1 else ''} reused one, {ms / 1e3:.2f} s")
        else:
            title = (f"The step graph changes {pattern}" if pattern else
                     f"The graph changed {same}") + (
                f": {n} extra graph{'s' if n != 1 else ''}, {ms / 1e3:.2f} s to compile"
                f"{' once, cached afterwards' if reused else ''}")
    evidence = [c0.evidence] if c0.evidence else []
    if hostless and took is not None:
        step_no, was, now = took
        at = ordinal_of.get(step_no, step_no)
        evidence.append(f"torch_xla's debug records: the graph compiled at step {at} takes {now} inputs, the one "
                        f"before it {was}: " + ("another set of tensors" if now != was
                                                else "the same number, with other ops" if other_ops
                                                else "the same number, so other shapes or constants"))
    if kind != "eval_pass" and fewer:
        advice = ADVICE["baked_scalar"]
        if len(fewer) == 1 and fewer[0][2] < fewer[0][1]:
            _, was, now = fewer[0]
            said = (f"the new graph takes {now} inputs where the step's graph took {was}: a value passed in "
                    "before is a constant in it now, or shares an input with an equal one")
        else:
            counts = [f"{now} at step {ordinal_of.get(s, s)}" for s, _, now in fewer]
            said = (f"the step's graph took {fewer[0][1]} inputs, then {', '.join(counts[:-1])}"
                    f"{' and ' if len(counts) > 1 else ''}{counts[-1]}, with the same ops: a value that is "
                    "an input in one graph is a constant in another, or shares an input with an equal value")
        evidence.append(f"torch_xla's debug records: {said} (torch_xla bakes Python numbers 0 and 1 into the "
                        "graph as constants, and passes equal scalars once)")
    user_steps = sorted({ordinal_of.get(s, s) for s in comp_steps})
    where = "after training step" if kind == "eval_pass" else "at step"
    evidence.append(f"compiled {where}{'s' if len(user_steps) != 1 else ''} "
                    f"{', '.join(str(s) for s in user_steps[:10])}{' ...' if len(user_steps) > 10 else ''}")
    # Who asked for the barriers that compiled them (recorded at a barrier that compiled):
    # a library's own sync (accelerate's gather_for_metrics) is named at the user's line.
    # (An eval pass's: a training step's barrier is asked for where the loop runs, every step.)
    asked = (steps.loc[steps["i"].isin(comp_steps), "site"].dropna()
             if "site" in steps and kind == "eval_pass" else [])
    file = line = None
    # (not for the same ops on tensors kept on the device: a condition whose outcome changed
    # would have changed the ops)
    decided = (_condition_in(syncs, comp_steps) if kind in ("graph_change", "periodic_graph")
               and not hostless else None)
    if decided is not None:
        # A Python `if` on a tensor ran in the steps that built the new graph: its outcome
        # decides which ops the step records, so when it flips, the graph is another one.
        # (With fewer graph inputs too, a branch that sets a value, logit_scale.fill_(4.6), or
        # a Python number turned 0 or 1: the condition's line first, the scalar story after.)
        file, line, code = decided
        where = "each of these steps" if n > 1 else "that step"
        evidence.insert(0, f"a Python condition on a tensor was read in {where}: {_loc(file, line)}: {code}; "
                           "which ops the step runs depends on its outcome, so a new outcome is a new graph")
        advice = ADVICE["condition_graph"] + (
            " If its outcome never changed, a Python number that became 0 or 1 (or equal to another in the "
            "step) is baked into the graph instead: see the evidence." if fewer else "")
    for sid in dict.fromkeys(int(v) for v in asked):
        site = sites.get(sid)
        if site is not None and site.via:  # (the user's own mark_step line says nothing new)
            file, line = site.file, site.line
            evidence.append(f"its barrier was asked for at {_loc(site.file, site.line)} (inside {site.via})"
                            + (f": {site.code}" if site.code else ""))
            break
    return Finding(
        id=str(key), cause="graph_change", kind=kind, title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=comp_steps, pattern=pattern, severity="info" if kind == "eval_pass"
        else "warning", file=file, line=line,
    )


def _condition_in(syncs: pd.DataFrame | None, comp_steps: list[int]) -> tuple[str, int, str] | None:
    """(file, line, code) of a Python condition on a tensor (``if loss > x:``) read, not
    deferred, in every one of ``comp_steps``; the first such site."""
    if syncs is None or not len(syncs) or "kind" not in syncs:
        return None
    cond = syncs[(syncs["kind"] == "tensor_condition") & ~syncs["deferred"].astype(bool)]
    if not len(cond):
        return None
    for _, g in cond.groupby("site", sort=False):
        read_in = set(g["step"].tolist())
        if all(s in read_in for s in comp_steps):
            first = g.iloc[0]
            return str(first["file"]), int(first["line"]), str(first["code"])
    return None


def _graph_inputs_changed(rows: pd.DataFrame, all_c: pd.DataFrame) -> list[tuple[int, int, int]]:
    """(step, inputs of the graph before it, its inputs) for each of these compiles, when
    torch_xla's debug records (``xprof run``) show at least one of them taking 1-3 inputs
    more or fewer than the training-step graph compiled before it with the same input
    signature, the two within 3 graph nodes of each other: the same ops, with a value an
    input in one and a constant (or one input shared with an equal value) in the other.
    Empty when none does."""
    if "debug_inputs" not in rows or not len(rows) or "debug_inputs" not in all_c or "sig" not in all_c:
        return []
    known = _debug_barrier_compiles(all_c)
    # The graphs compiled before, by input signature, in time order: the one before a
    # compile is found by bisection (a run of thousands of compiles stays linear-ish).
    by_sig = {sig: (g["t"].to_numpy(), g["debug_inputs"].to_numpy(), g["graph_nodes"].to_numpy())
              for sig, g in known.groupby("sig", sort=False)}
    out: list[tuple[int, int, int]] = []
    scalar = other = False
    for step, t, sig, inputs, nodes in zip(rows["step"], rows["t"], rows["sig"], rows["debug_inputs"],
                                          rows["graph_nodes"]):
        prior = by_sig.get(sig)
        if pd.isna(inputs) or prior is None:
            continue
        k = int(np.searchsorted(prior[0], t, side="left")) - 1
        if k < 0:
            continue
        was, now = int(prior[1][k]), int(inputs)
        out.append((int(step), was, now))
        p_nodes = prior[2][k]
        near = pd.isna(nodes) or pd.isna(p_nodes) or abs(int(nodes) - int(p_nodes)) <= 3
        small = near and 1 <= abs(now - was) <= 3
        scalar = scalar or small
        # A graph with many inputs more or fewer, or other ops, is not a scalar baked in (a block
        # skipped at random leaves its parameters out of the optimizer's graph): none is then.
        other = other or (now != was and not small)
    return out if scalar and not other else []


def _debug_barrier_compiles(all_c: pd.DataFrame) -> pd.DataFrame:
    """The compiles at a barrier that torch_xla's debug records give an input count for, in
    time order."""
    return all_c[all_c["debug_inputs"].notna() & (all_c["at"] == "barrier")].sort_values("t", kind="stable")


def _inputs_against_previous(rows: pd.DataFrame, all_c: pd.DataFrame) -> tuple[int, int, int] | None:
    """(step, inputs of the barrier graph compiled before it, its inputs) for the first of
    these compiles torch_xla's debug records give both counts for; None without them."""
    if "debug_inputs" not in rows or "debug_inputs" not in all_c:
        return None
    known = _debug_barrier_compiles(all_c)
    ts, counts = known["t"].to_numpy(), known["debug_inputs"].to_numpy()
    for step, t, inputs in zip(rows["step"], rows["t"], rows["debug_inputs"]):
        if pd.isna(inputs):
            continue
        k = int(np.searchsorted(ts, t, side="left")) - 1
        if k >= 0:
            return int(step), int(counts[k]), int(inputs)
    return None


def _eval_pass_starts(steps: pd.DataFrame) -> list[int]:
    """The training step each eval pass follows."""
    if "phase" not in steps:
        return []
    ids = eval_pass_ids(steps)
    first = np.flatnonzero((ids >= 0) & (ids != np.concatenate(([-1], ids[:-1]))))
    return [int(u) for u in steps["user_step"].to_numpy()[first]]


def _train_steps_before(starts: list[int], eval_ordinals: list[int]) -> list[int]:
    """For each start, how many ordinals in ``range(start)`` are not eval ordinals.

    ``eval_ordinals`` is sorted and distinct; counting with bisect keeps this linear in the
    number of eval passes instead of passes times steps.
    """
    lo = bisect_left(eval_ordinals, 0)
    out = []
    for start in starts:
        if start <= 0:
            out.append(0)
        else:
            out.append(start - (bisect_left(eval_ordinals, start) - lo))
    return out


def _runs(ordinals: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs (start, length) of step ordinals."""
    out: list[tuple[int, int]] = []
    for o in ordinals:
        if out and o == out[-1][0] + out[-1][1]:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((o, 1))
    return out


def _closure_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, syncs: pd.DataFrame) -> Finding:
    """A read inside an ``xm.add_step_closure`` callback compiled a small graph: deferred."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    site = int(key.detail)
    g = syncs[syncs["site"] == site]
    first = g.iloc[0] if len(g) else None
    file = str(first["file"]) if first is not None else None
    line = int(first["line"]) if first is not None else None
    code = str(first["code"]) if first is not None else None
    where = _loc(file, line) if file and line else "a step closure"
    reads = len(g)
    title = (f"A step-closure read at {where} compiled {n} small graph{'s' if n != 1 else ''} of its own "
             f"(deferred, after the barrier): {ms / 1e3:.2f} s once")
    evidence = [c0.evidence] if c0.evidence else []
    if code:
        evidence.append(f"{where}: {code}")
    evidence.append(f"{reads} deferred read{'s' if reads != 1 else ''} at this line; none ran mid-step")
    # The step whose barrier ran the closure (the compile is counted at the next barrier).
    compiled_in = g[g["uncached"] > 0]["step"] if len(g) else []
    comp_steps = sorted({int(s) for s in compiled_in}) or sorted({int(s) for s in rows["step"]})
    return Finding(
        id=str(key), cause="step_closure", kind="deferred_read", title=title, count=reads, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=ADVICE["deferred_read"],
        evidence=evidence, steps=comp_steps, file=file, line=line,
        func=str(first["func"]) if first is not None else None, code=code, severity="info",
    )


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


def _gave_up_finding(gave_up: list[_GaveUp]) -> Finding:
    """torch.compile gave up on a function when its retraces all came in warm-up (so no
    dynamo finding took them): the fact stays a finding of its own, never minor."""
    u = gave_up[0]
    value = f" = {u.value}" if u.value is not None else ""
    evidence = [x.evidence() for x in gave_up]
    if u.reason:
        evidence.append(f"the last failed guard: {u.reason[:200]}")
    return Finding(
        id="dynamo_limit", cause="dynamo", kind="dynamo_limit",
        title=(f"torch.compile gave up on {u.func} at step {u.step} (torch._dynamo.config.{u.limit}{value}) "
               "and runs it uncompiled from then on"),
        count=len(gave_up), compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0,
        advice="Fix what makes torch.compile retrace (the failed guard above; a new input size is the "
               "usual one: keep shapes fixed). " + ADVICE["dynamo_limit"],
        evidence=evidence, steps=[u.barrier], severity="warning",
    )


def _gave_up(marks: list[dict[str, Any]], compiles: pd.DataFrame, causes: list[Cause],
             ordinal_of: dict[int, int]) -> list[_GaveUp]:
    out = []
    steps_of = compiles["step"].to_numpy(dtype=np.int64) if len(compiles) else np.zeros(0, dtype=np.int64)
    for m in marks:
        i = m.get("i")
        if not isinstance(i, int):
            continue
        later = sum(1 for k, c in enumerate(causes)
                    if steps_of[k] >= i and c.cause not in ("dynamo", "warmup"))
        value = m.get("value")
        out.append(_GaveUp(dynamo_func(str(m.get("func") or "?"), m.get("file"), m.get("line")),
                           str(m.get("limit") or "recompile_limit"), value if isinstance(value, int) else None,
                           ordinal_of.get(i, i), later, str(m["reason"]) if m.get("reason") else None, i))
    return out


def _dynamo_finding(key: FindingKey, c0: Cause, rows: pd.DataFrame, reads: pd.DataFrame,
                    guards: list[dict[str, Any]], gave_up: list[_GaveUp] | None = None) -> Finding:
    ms = float(rows["ms"].sum())
    n = len(rows)
    comp_steps = sorted({int(s) for s in rows["step"]})
    firsts = _first_failures(guards)
    reasons = [r for _, r in firsts]
    why = ""
    sized: tuple[str, int, list[int]] | None = None
    if reasons:
        _, example, count = _commonest_guard(reasons)
        # dynamo's retraces (guard failures), not the XLA graphs the title counts
        share = f"{count} of {len(reasons)} dynamo retraces: " if len(reasons) > 1 else ""
        sized = _size_guard(reasons, example)
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
        id=str(key), cause="dynamo", kind="dynamo_recompile", title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=advice,
        evidence=evidence, steps=comp_steps, severity=severity,
        input=sized[0] if sized else None, dim=sized[1] if sized else None,
    )


_SIZE_GUARD = re.compile(r"tensor '(?P<src>.+?)' size mismatch at index (?P<dim>\d+)\. "
                         r"expected (?P<was>\d+), actual (?P<now>\d+)")


def _size_guard(reasons: list[str], example: str) -> tuple[str, int, list[int]] | None:
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


def _first_failures(guards: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
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


def _commonest_guard(reasons: list[str]) -> tuple[str, str, int]:
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


def _barrier_mechanism_finding(mech: _mech.Mechanism, rows: pd.DataFrame, c0: Cause) -> Finding:
    ms = float(rows["ms"].sum())
    n = len(rows)
    title = f"{mech.what} ran a graph of its own at a barrier: {n} compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s"
    return Finding(
        id=mech.key, cause="library", kind=mech.kind, title=title, count=n, compiles=n,
        seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0, advice=mech.advice,
        evidence=[c0.evidence] if c0.evidence else [], steps=sorted({int(s) for s in rows["step"]}),
    )


def _own_barrier_finding(key: str, rows: pd.DataFrame, c0: Cause, site: Site | None) -> Finding:
    """A library call that asked for barriers itself (no reads of its own recorded):
    accelerate's gather, a rendezvous. Its graphs are the call's."""
    ms = float(rows["ms"].sum())
    n = len(rows)
    who = (f"{site.via} (called from {_loc(site.file, site.line)})" if site is not None and site.via
           else "A library call")
    return Finding(
        id=key, cause="implicit_sync", kind="library_sync",
        title=f"{who} asked for a barrier of its own: {n} compile{'s' if n != 1 else ''}, {ms / 1e3:.2f} s",
        count=n, compiles=n, seconds=ms / 1e3, compile_seconds=ms / 1e3, execute_seconds=0.0,
        advice=ADVICE["own_barrier"], evidence=[c0.evidence] if c0.evidence else [],
        steps=sorted({int(s) for s in rows["step"]}),
        file=site.file if site is not None else None, line=site.line if site is not None else None,
        code=site.code if site is not None else None)


def no_barrier(end: Any, steps: pd.DataFrame, syncs: pd.DataFrame, tail_ms: np.ndarray) -> Finding | None:
    """Optimizer steps that never reached a step barrier (a loop ported from CUDA without
    ``torch_xla.sync()`` and without a device loader): the pending graph holds every step
    since the last barrier, and each host read compiles and runs that whole history."""
    if end is None:
        return None
    work = steps["work"].to_numpy(dtype=bool) if len(steps) else np.zeros(0, dtype=bool)
    if end.tail_opt < 1:
        # (graphs run outside the reads, fewer than the reads: ops on the CPU cutting them;
        # more would be eager mode, op by op)
        return None if work.any() or end.tail_graphs > len(syncs) else _reads_only(syncs, tail_ms, end.tail_graphs)
    if end.tail_graphs:
        return None  # (tail_graphs: the last step ran op by op, eager mode's tail step)
    if work.any():
        last = int(steps["i"].to_numpy()[work].max())
        if last + 1 < end.steps:  # barriers that ran nothing after the last graph: not this
            return None
    tail_reads = syncs[syncs["step"] > (int(steps["i"].max()) if len(steps) else -1)] if len(syncs) else syncs
    n_compiles = len(tail_ms)
    compile_ms = float(tail_ms.sum())
    wait_ms = float(tail_reads["ms"].sum()) if len(tail_reads) else 0.0
    opt = int(end.tail_opt)
    if work.any() and not n_compiles and not len(tail_reads):
        # Nothing read or compiled after the last barrier: those steps' ops were still
        # pending when the run ended, and never ran (a sync every N steps, the last few left).
        return Finding(
            id="no_barrier", cause="no_barrier", kind="never_ran",
            title=(f"The last {opt} optimizer step{'s' if opt != 1 else ''} never ran: no step barrier "
                   f"after {'them' if opt != 1 else 'it'}, so {'their' if opt != 1 else 'its'} ops were "
                   "still pending when the run ended"),
            count=opt, compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0,
            advice=ADVICE["never_ran"],
            evidence=[f"{opt} optimizer step{'s' if opt != 1 else ''} after the last barrier; no graph ran "
                      "after it (no host read, no compile)"], steps=[])
    if opt < 2:
        return None  # one step read after the last barrier: too little to call a missing barrier
    since = "the last step barrier" if work.any() else "the start"
    title = (f"No step barrier for the last {opt} optimizer steps: each graph held every step since {since}"
             if work.any() else f"No step barrier: {opt} optimizer steps ran without one, so each graph held "
             f"every step since the start")
    title += (f": {n_compiles} compile{'s' if n_compiles != 1 else ''}, "
              f"{max(wait_ms, compile_ms) / 1e3:.2f} s")
    evidence = [f"{opt} optimizer steps after the last barrier, and no barrier after them"
                if work.any() else f"{opt} optimizer steps, and no step barrier in the run"]
    if len(tail_reads):
        first = tail_reads.iloc[0]
        where = _loc(str(first["file"]), int(first["line"]))
        evidence.append(f"every graph ran at a host read instead: {len(tail_reads)} read"
                        f"{'s' if len(tail_reads) != 1 else ''} (the first at {where}: {first['code']})")
    if n_compiles >= 2:
        ms = tail_ms.tolist()
        evidence.append(f"the graphs grew with the steps they held: compiles of {_dur(ms[0])} to {_dur(ms[-1])}")
    return Finding(
        id="no_barrier", cause="no_barrier", kind="no_barrier", title=title, count=opt, compiles=n_compiles,
        # The reads waited for the compiles and the executions: their waits are the cost (or the
        # compiles alone, if the reads were not recorded).
        seconds=max(wait_ms, compile_ms) / 1e3, compile_seconds=compile_ms / 1e3,
        execute_seconds=0.0, advice=ADVICE["no_barrier"], evidence=evidence, steps=[],
        file=str(tail_reads.iloc[0]["file"]) if len(tail_reads) else None,
        line=int(tail_reads.iloc[0]["line"]) if len(tail_reads) else None,
    )


def _reads_only(syncs: pd.DataFrame, tail_ms: np.ndarray, cut: int) -> Finding | None:
    """No barrier and no optimizer step in the run, and graphs that ran (and compiled) at
    host reads: generation driven by its reads (``model.generate()``), or a loop that never
    syncs. Its reads are everything it ran."""
    n_compiles = len(tail_ms)
    if not len(syncs) or n_compiles < 2:
        return None
    compile_ms = float(tail_ms.sum())
    wait_ms = float(syncs["ms"].sum())
    evidence = []
    keys = [k for k in ("file", "line", "via") if k in syncs]
    for key, g in syncs.groupby(keys, sort=False, dropna=False):
        file, line, via = (list(key) + [None, None, None])[:3]
        via_txt = f" (inside {via})" if isinstance(via, str) and via else ""
        code = g["code"].iloc[0] if "code" in g else ""
        evidence.append(f"{len(g)} read{'s' if len(g) != 1 else ''} at {_loc(str(file), int(line))}{via_txt}: {code}")
    evidence = evidence[:4]
    ms = tail_ms.tolist()
    evidence.append(f"{n_compiles} graphs compiled, {_dur(min(ms))} to {_dur(max(ms))} each: a new graph at almost "
                    "every read")
    if cut:
        evidence.append(f"{cut} more graph{'s' if cut != 1 else ''} ran at ops without an XLA lowering, which run "
                        "the graph before them early")
    first = syncs.iloc[0]
    return Finding(
        id="no_barrier", cause="no_barrier", kind="reads_only",
        title=(f"No step barrier: the graphs ran at host reads: {n_compiles} compiles at {len(syncs)} read"
               f"{'s' if len(syncs) != 1 else ''}, {max(wait_ms, compile_ms) / 1e3:.2f} s"),
        count=len(syncs), compiles=n_compiles, seconds=max(wait_ms, compile_ms) / 1e3,
        compile_seconds=compile_ms / 1e3, execute_seconds=0.0, advice=ADVICE["reads_only"],
        evidence=evidence, steps=[], file=str(first["file"]), line=int(first["line"]),
    )


def eager_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """Training steps after warm-up whose graphs all ran op by op, between barriers: one row
    per training step (``ordinal``), with its first barrier ``i``, the graphs it ran mid-step
    outside host reads (``graphs``) and its wall time (``ms``, over all its barriers). A step
    with a graph at any of its barriers was compiled (``torch_xla.compile``, or traced
    lazily): the few eager ops around it are not counted."""
    cols = ["ordinal", "i", "graphs", "ms"]
    if not len(steps):
        return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in cols})
    ordinal = steps["ordinal"].to_numpy()
    keep = (steps["phase"].to_numpy(dtype=object) == "train") & (ordinal >= WARMUP_STEPS)
    rows = pd.DataFrame({
        "ordinal": ordinal[keep],
        "i": steps["i"].to_numpy()[keep],
        "graphs": steps["mid_graphs"].to_numpy()[keep],
        "at_barrier": barrier_graphs(steps)[keep],
        "ms": steps["step_ms"].to_numpy(dtype=np.float64)[keep],
    })
    g = rows.groupby("ordinal", sort=True).agg(i=("i", "min"), graphs=("graphs", "sum"),
                                               at_barrier=("at_barrier", "sum"), ms=("ms", "sum"))
    g = g[(g["graphs"] > 0) & (g["at_barrier"] == 0)].reset_index()
    return g[cols]


def _eager_finding(steps: pd.DataFrame, compiles: pd.DataFrame, steady: int) -> Finding | None:
    """The training step ran op by op (eager mode): each op a graph of its own, compiled on
    first use and dispatched alone. The evidence is torch_xla's own: op compiles timed in
    EagerOpCompileTime (``at`` = ``op``), and steady steps that ran graphs between barriers,
    outside any host read, with nothing left for the barrier to run."""
    op_compiles = int((compiles["at"] == "op").sum()) if len(compiles) else 0
    if not op_compiles or not steady:
        return None
    eager = eager_steps(steps)
    if not len(eager):
        return None
    n = len(eager)
    graphs = int(np.median(eager["graphs"].to_numpy()))
    step_ms = float(np.median(eager["ms"].to_numpy()))
    share = f"all {steady} steady steps" if n >= steady else f"{n} of {steady} steady steps"
    title = (f"The training step runs op by op (eager mode): {graphs} graph{'s' if graphs != 1 else ''} "
             f"a step, each dispatched on its own ({share}, {_dur(step_ms)} a step)")
    evidence = [
        f"{op_compiles} op graph{'s' if op_compiles != 1 else ''} compiled one at a time "
        "(torch_xla's EagerOpCompileTime), and the steady steps ran their graphs between barriers, "
        "outside any host read, leaving nothing for the barrier to run",
        "torch_xla's eager-mode guide measured pure eager mode at ~45% of a compiled step's speed "
        "for a decoder-only model and ~1% for ResNet50; what compiling saves here is not measured "
        "in this run",
    ]
    return Finding(
        id=str(EAGER_KEY), cause="eager_mode", kind="eager_mode", title=title, count=n, compiles=0,
        seconds=0.0, compile_seconds=0.0, execute_seconds=0.0, advice=ADVICE["eager_mode"],
        evidence=evidence, steps=[int(i) for i in eager["i"].tolist()],
        pattern=None if n >= steady else _pattern([int(o) for o in eager["ordinal"].tolist()], steady),
    )


def _split_finding(steps: pd.DataFrame, sites: dict[int, Site]) -> Finding | None:
    """``split_step`` (:mod:`xprof.diagnosis.rules.split`) from the training barriers that ran
    a graph at the barrier (eager steps, whose graphs run between barriers, are not split)."""
    graphs = (steps["barrier_uncached"] + steps["barrier_cached"]).to_numpy()
    keep = (steps["phase"].to_numpy(dtype=object) == "train") & (graphs > 0) & (steps["ordinal"].to_numpy() >= 0)
    if keep.sum() < 2:
        return None
    rows = steps[keep]
    barriers = [_split.Barrier(int(step), None if pd.isna(site) else int(site), not pd.isna(sig), int(g), int(u))
                for step, site, sig, g, u in zip(rows["ordinal"].tolist(), rows["site"].tolist(), rows["sig"].tolist(),
                                                 graphs[keep].tolist(), rows["barrier_uncached"].tolist())]
    found = _split.split_steps(barriers, WARMUP_STEPS)
    if found is None:
        return None
    where = [_loc(sites[s].file, sites[s].line) if s is not None and s in sites else "a barrier of the loop's"
             for s in found.cut_sites]
    title, evidence = _split.describe(found, where)
    first = sites.get(found.cut_sites[0]) if found.cut_sites and found.cut_sites[0] is not None else None
    return Finding(id=f"split:{where[0]}", cause="split_step", kind="split_step", title=title,
                   count=len(found.steps), compiles=0, seconds=0.0, compile_seconds=0.0, execute_seconds=0.0,
                   advice=_split.ADVICE, evidence=evidence, steps=list(found.steps), severity="info",
                   file=first.file if first else None, line=first.line if first else None,
                   func=first.func if first else None, code=first.code if first else None,
                   via=first.via if first else None)
