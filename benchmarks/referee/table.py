"""The referee's table: one row per script, facts only, as Markdown (readable in a pipe too)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.referee import truth as truth_mod
from benchmarks.referee import xprof_side
from benchmarks.referee.manifest import Entry
from benchmarks.referee.truth import Truth
from benchmarks.referee.verdict import Judgement, judge
from benchmarks.referee.xprof_side import Said


@dataclass
class Row:
    entry: Entry
    truth: Truth | None
    said: Said
    judgement: Judgement


def judge_all(entries: list[Entry], work: Path, scripts: Path) -> list[Row]:
    rows = []
    for e in entries:
        folder = work / e.id
        if not (folder / "status.json").exists():
            rows.append(Row(e, None, Said(failure=""), Judgement("not-run", None, None)))
            continue
        t = truth_mod.load(folder, scripts / e.id)
        s = xprof_side.load(folder)
        j = judge(t, s)
        # any run stopped at the limit is a timeout, unless the truth's script failed on its own
        # before the stop (and then hung, as diffusers' rendezvous does): a script that catches the
        # stop and goes on to an error (word_language_model) is recorded "interrupted" (truth_run.py)
        failed_first = t is not None and t.status == "error"
        if _timed_out(folder) and not failed_first:
            j = Judgement("timeout", None, None, notes=[_limit_note(folder)])
        rows.append(Row(e, t, s, j))
    return rows


def _limit_note(folder: Path) -> str:
    status = json.loads((folder / "status.json").read_text(encoding="utf-8"))
    stopped = [side for side in ("truth", "xprof") if status.get(f"{side}_rc") == 124]
    runs = ", ".join(f"{side} run after {status.get(side + '_s')} s" for side in stopped)
    return "stopped at the time limit: " + runs


def _timed_out(folder: Path) -> bool:
    try:
        status = json.loads((folder / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return 124 in (status.get("truth_rc"), status.get("xprof_rc"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _truth_cell(t: Truth | None) -> str:
    if t is None:
        return "no counters"
    late = "-" if t.late_compiles is None else str(t.late_compiles)
    return (f"{t.compiles} compiles ({late} late), {t.executions} exec, {t.barriers} barriers, "
            f"{sum(t.reads.values())} forced reads")


def _said_cell(s: Said) -> str:
    if s.failure == "":
        return "not run"
    if s.failure is not None:
        return "no summary"
    heads = ", ".join(f.cause + (f" {f.lines[0][0]}:{f.lines[0][1]}" if f.lines else "") for f in s.major)
    heads = heads or "nothing stands out"
    return f"{s.compiles} compiles ({s.recompiles} recompiles), {s.executions} exec; {heads}"


def _counts(j: Judgement) -> str:
    if j.compiles_equal is None:
        return "-"
    return ("=" if j.compiles_equal else "≠") + "/" + ("=" if j.executions_equal else "≠")


def _why(j: Judgement) -> str:
    parts = [f"missed: {m}" for m in j.missed] + [f"unsupported: {u}" for u in j.unsupported] + j.notes
    return "; ".join(parts)


def render(rows: list[Row]) -> str:
    out = ["| script | repository @ commit | truth (torch_xla) | claims | xprof | counts c/e | verdict | why |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        e, j = r.entry, r.judgement
        claims = ", ".join(str(c) for c in j.claims) or "none"
        out.append("| " + " | ".join(_cell(x) for x in (
            f"{e.id} (`{e.path}`)", f"{e.repo} @ {e.commit[:10]}", _truth_cell(r.truth), claims,
            _said_cell(r.said), _counts(j), j.verdict, _why(j))) + " |")
    tally = Counter(r.judgement.verdict for r in rows)
    judged = sum(tally[v] for v in ("right", "right*", "miss"))
    right = tally["right"] + tally["right*"]
    out.append("")
    out.append(f"Whole verdict right on {right} of {judged} judged scripts ({tally['right*']} of them right* ); "
               + ", ".join(f"{v}: {n}" for v, n in sorted(tally.items())) + ".")
    counted = [r for r in rows if r.judgement.verdict in ("right", "right*", "miss")]
    same_compiles = sum(bool(r.judgement.compiles_equal) for r in counted)
    out.append(f"On the judged scripts: compiles equal on {same_compiles} of {len(counted)}, "
               f"executions equal on {sum(bool(r.judgement.executions_equal) for r in counted)} of {len(counted)}.")
    return "\n".join(out) + "\n"
