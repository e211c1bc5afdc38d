"""Several ranks of one multi-process run, side by side: the rank table, the stragglers, the
findings across ranks and the rank files that are not there (:class:`RanksView`, and its
JSON schemas ``xprof-ranks`` and ``xprof-ranks-summary``, docs/json.md).

Each process of a multi-process run records its own file (``run.rank0.json``,
``run.rank1.json``...). In data-parallel training every rank waits for the slowest one
at each collective, so a rank that compiles more (it saw another input shape) or
waits longer on host syncs slows all of them. This module lines the ranks up and names
the one that stands out.

A pod of 256 hosts is not tidy: a host dies and its file stops mid-run, a file is
garbage, a rank wrote nothing, a folder still holds a file of an older, larger run. Those
are named (:class:`RankFault`) and the rest is analysed. Each rank is kept as a
:class:`RankRun` (its numbers, findings and summary, not its tables), so the view of a
pod costs the memory of one rank's tables at a time. pandas only: no torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from xprof.analysis.model import Analysis, Finding
from xprof.diagnosis.terms import WARMUP_STEPS
from xprof.runfile import Run, rank_of_path
from xprof.words import plural

RANKS_SCHEMA = "xprof-ranks"
RANKS_SUMMARY_SCHEMA = "xprof-ranks-summary"
RANKS_VERSION = 1

COLUMNS = ["rank", "name", "steps", "compiles", "recompiles", "compile_s", "syncs",
           "sync_wait_s", "step_ms_median", "status", "path"]

SYNC_WAIT_FLOOR_S = 0.05
"""Sync-wait differences below this are noise, not a straggler."""
RATIO = 1.5
"""A rank stands out when its sync wait or median step is this many times the others'."""
GROUP_FROM = 16
"""From this many ranks on, ranks that counted alike are shown as one row."""
GROUP_MIN = 3
"""A group of fewer ranks than this is listed rank by rank (outliers)."""


# -- one rank, reduced to what the view needs ------------------------------------------------------


@dataclass
class RankRun:
    """One analysed rank: its table row, findings and summary, and what a per-step judgement
    needs (the step each compile and host read fell in), not its tables."""

    rank: int
    path: str
    name: str
    row: dict[str, Any]
    findings: list[Finding]
    summary: dict[str, Any]
    complete: bool
    world_size: int | None
    recompile_steps: np.ndarray
    """Training step of each uncached compile after warm-up."""
    compile_steps: np.ndarray
    """Training step of each uncached compile."""
    compile_ms: np.ndarray
    sync_steps: np.ndarray
    """Training step of each live host read."""
    sync_ms: np.ndarray
    steady_steps: np.ndarray
    """Training step of each steady-state step (its median step time is judged)."""
    steady_ms: np.ndarray
    digest: str | None = None
    """The digest this rank was read from (then the arrays above are empty: :func:`judged` asks
    the digest for its numbers over fewer steps), None when read from its run file."""
    windows: Callable[[Sequence[str], int], dict[str, dict[str, Any]]] | None = None
    """The digests' window query (``xprof.analysis.digest.window_rows``), set by the digest
    reader with ``digest``: this module is below the digests and does not import them."""

    @property
    def steps(self) -> int:
        return int(self.row["steps"])


def rank_of(run: Run, position: int) -> int:
    """The rank a run's header names, else the N of ``*.rankN.json``, else its position."""
    if run.rank is not None:
        return run.rank
    return rank_of_path(run.path, position)


def _world_size(run: Run) -> int | None:
    w = run.meta.get("world_size")
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 1 else None


def recompile_mask(a: Analysis) -> np.ndarray:
    """Which of the run's uncached compiles are recompiles (after warm-up)."""
    if not len(a.compiles):
        return np.zeros(0, bool)
    return (a.compiles["cause"] != "warmup").to_numpy(dtype=bool)


def steady_mask(a: Analysis) -> np.ndarray:
    """Which barriers are steady-state steps (their median step time is judged)."""
    return a.steps["work"].to_numpy(dtype=bool) & (a.steps["ordinal"].to_numpy() >= WARMUP_STEPS)


def rank_run(analysis: Analysis, position: int, summary: bool = True) -> RankRun:
    """What the pod view keeps of one rank's analysis (``summary``: with its ``xprof-summary``
    object, which only ``--json`` prints)."""
    a, t = analysis, analysis.totals
    live = a.live_syncs
    barrier_i = a.steps["i"].to_numpy(dtype=np.int64)
    user_step = a.steps["user_step"].to_numpy(dtype=np.int64)

    def training_step(barriers: Any) -> np.ndarray:
        """The training step of each barrier index (the index itself where there is none)."""
        b = np.asarray(barriers, dtype=np.int64)
        pos = np.clip(np.searchsorted(barrier_i, b), 0, max(len(barrier_i) - 1, 0))
        hit = (pos < len(barrier_i)) & (barrier_i[pos] == b) if len(barrier_i) else np.zeros(len(b), bool)
        return np.where(hit, user_step[pos] if len(barrier_i) else 0, b)

    compiles = a.compiles
    compile_steps = training_step(compiles["step"]) if len(compiles) else np.zeros(0, dtype=np.int64)
    recompile = recompile_mask(a)
    ordinal = a.steps["ordinal"].to_numpy()
    steady = steady_mask(a)
    rank = rank_of(a.run, position)
    row = {
        "rank": rank,
        "name": a.run.name,
        "steps": t.steps,
        "compiles": t.compiles,
        "recompiles": t.recompiles,
        "compile_s": round(t.compile_seconds, 6),
        "syncs": t.syncs,
        "sync_wait_s": round(float(live["ms"].sum()) / 1e3 if len(live) else 0.0, 6),
        "step_ms_median": t.step_ms_median,
        "status": "ok" if a.run.complete else "incomplete",
        "path": a.run.path,
    }
    return RankRun(
        rank=rank, path=a.run.path, name=a.run.name, row=row, findings=list(a.findings),
        summary=a.summary() if summary else {},
        complete=a.run.complete, world_size=_world_size(a.run),
        recompile_steps=compile_steps[recompile], compile_steps=compile_steps,
        compile_ms=compiles["ms"].to_numpy(dtype=float) if len(compiles) else np.zeros(0),
        sync_steps=training_step(live["step"]) if len(live) else np.zeros(0, dtype=np.int64),
        sync_ms=live["ms"].to_numpy(dtype=float) if len(live) else np.zeros(0),
        steady_steps=ordinal[steady].astype(np.int64), steady_ms=a.steps["step_ms"].to_numpy(dtype=float)[steady],
    )


# -- what is not there ----------------------------------------------------------------------------------


@dataclass
class RankFault:
    """A rank file that is unreadable, missing, incomplete or extra, with the sentence that says so.

    Unreadable, missing and extra ranks are left out of the table; an incomplete rank is
    in it (flagged) but never judged a straggler or a baseline for the others."""

    kind: str
    """``unreadable``, ``missing``, ``incomplete`` or ``extra``."""
    ranks: list[int]
    message: str
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def span(values: Sequence[int]) -> str:
    """``0-3, 5, 7-249``: sorted integers as runs."""
    vals = sorted(set(values))
    out: list[str] = []
    k = 0
    while k < len(vals):
        j = k
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[k]) if j == k else f"{vals[k]}, {vals[j]}" if j == k + 1 else f"{vals[k]}-{vals[j]}")
        k = j + 1
    return ", ".join(out)


def _majority_world(ranks: Sequence[RankRun]) -> int | None:
    sizes = Counter(r.world_size for r in ranks if r.world_size is not None)
    return sizes.most_common(1)[0][0] if sizes else None


def sort_out(ranks: Sequence[RankRun], unreadable: Sequence[tuple[str, int, str]]) -> tuple[
        list[RankRun], list[RankFault], int | None]:
    """The ranks that belong to the pod, the faults, and the pod's world size.

    ``unreadable``: (path, rank from its name, why) of each file that could not be read. The
    world size is what most headers say; a file whose header says another, a rank outside
    it or a second file for one rank is *extra*; a rank of the world without any file is
    *missing*; a file without its ``end`` record is *incomplete* ("stopped at step 133").
    """
    faults: list[RankFault] = []
    world = _majority_world(ranks)
    kept: list[RankRun] = []
    seen: dict[int, str] = {}
    for r in sorted(ranks, key=lambda r: (r.rank, r.path)):
        if world is not None and r.world_size is not None and r.world_size != world:
            faults.append(RankFault("extra", [r.rank], f"rank {r.rank}: {r.path} is from a run of {r.world_size} "
                                                       f"ranks, the others of {world}; left out", r.path))
        elif world is not None and not 0 <= r.rank < world:
            faults.append(RankFault("extra", [r.rank], f"rank {r.rank}: {r.path} is outside a world of {world} "
                                                       "ranks; left out", r.path))
        elif r.rank in seen:
            faults.append(RankFault("extra", [r.rank], f"rank {r.rank}: {r.path} is a second file for rank "
                                                       f"{r.rank} (the first: {seen[r.rank]}); left out", r.path))
        else:
            seen[r.rank] = r.path
            kept.append(r)
    for path, rank, why in unreadable:
        faults.append(RankFault("unreadable", [rank], f"rank {rank}: unreadable, left out: {why}", path))
        seen.setdefault(rank, path)
    if world is not None:
        missing = [k for k in range(world) if k not in seen]
        if missing:
            faults.append(RankFault("missing", missing, f"{'rank' if len(missing) == 1 else 'ranks'} "
                                                        f"{span(missing)} of {world} "
                                                        f"{'has' if len(missing) == 1 else 'have'} no file"))
    longest = max((r.steps for r in kept), default=0)
    for r in kept:
        if not r.complete:
            of = f" of {longest}" if longest > r.steps else ""
            left = "; not judged against the others" if _stopped_early(r, kept) else ""
            faults.append(RankFault("incomplete", [r.rank], f"rank {r.rank} stopped at step {r.steps}{of}, "
                                                            f"file incomplete{left}", r.path))
    order = {"unreadable": 0, "missing": 1, "incomplete": 2, "extra": 3}
    faults.sort(key=lambda f: (order[f.kind], f.ranks))
    return kept, faults, world


# -- the table, the groups, the stragglers -----------------------------------------------------------------


def rank_table(ranks: Sequence[RankRun] | Sequence[Analysis]) -> pd.DataFrame:
    """One row per rank, sorted by rank: the numbers that make ranks wait for each other."""
    runs = _as_rank_runs(ranks)
    df = pd.DataFrame([r.row for r in runs], columns=COLUMNS)
    return df.sort_values("rank", kind="stable").reset_index(drop=True)


def _as_rank_runs(ranks: Sequence[RankRun] | Sequence[Analysis]) -> list[RankRun]:
    out: list[RankRun] = []
    for pos, r in enumerate(ranks):
        if isinstance(r, Analysis):
            out.append(rank_run(r, pos))
        elif isinstance(r, RankRun):
            out.append(r)
    return out


@dataclass
class RankGroup:
    """Ranks whose counts are identical (steps, compiles, recompiles, host reads, status);
    their times as median and range."""

    ranks: list[int]
    steps: int
    compiles: int
    recompiles: int
    syncs: int
    status: str
    compile_s: tuple[float, float, float]
    """(min, median, max)."""
    sync_wait_s: tuple[float, float, float]
    step_ms_median: tuple[float, float, float] | None

    def to_json(self) -> dict[str, Any]:
        def trio(v: tuple[float, float, float] | None) -> dict[str, float] | None:
            return None if v is None else {"min": round(v[0], 6), "median": round(v[1], 6), "max": round(v[2], 6)}

        return {"ranks": self.ranks, "count": len(self.ranks), "steps": self.steps, "compiles": self.compiles,
                "recompiles": self.recompiles, "syncs": self.syncs, "status": self.status,
                "compile_s": trio(self.compile_s), "sync_wait_s": trio(self.sync_wait_s),
                "step_ms_median": trio(self.step_ms_median)}


def _trio(values: pd.Series) -> tuple[float, float, float] | None:
    v = values.dropna().astype(float)
    return (float(v.min()), float(v.median()), float(v.max())) if len(v) else None


def rank_groups(table: pd.DataFrame) -> list[RankGroup]:
    """Ranks grouped by identical counts, largest group first."""
    keys = ["steps", "compiles", "recompiles", "syncs", "status"]
    out = []
    for key, g in table.groupby(keys, sort=False):
        steps, compiles, recompiles, syncs, status = key
        out.append(RankGroup(sorted(int(r) for r in g["rank"]), int(steps), int(compiles), int(recompiles),
                             int(syncs), str(status), _trio(g["compile_s"]) or (0.0, 0.0, 0.0),
                             _trio(g["sync_wait_s"]) or (0.0, 0.0, 0.0), _trio(g["step_ms_median"])))
    out.sort(key=lambda g: (-len(g.ranks), g.ranks[0]))
    return out


@dataclass
class Straggler:
    """A rank that stands out: which number (``metric``), its value and the others' baseline."""

    rank: int
    metric: str
    """``recompiles``, ``compiles``, ``sync_wait`` or ``step_time``."""
    value: float
    baseline: float
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def stragglers(table: pd.DataFrame, window: str = "") -> list[Straggler]:
    """The ranks that stand out, each with the number that stands out and a sentence.

    ``recompiles`` (or ``compiles`` when recompiles are equal): a rank compiled more
    than the rank that compiled least (another input shape or code path reached it).
    ``sync_wait``: a rank spent at least :data:`RATIO` times the median rank's time in host syncs (and
    :data:`SYNC_WAIT_FLOOR_S` more). ``step_time``: its median step is :data:`RATIO`
    times the median rank's. ``window`` ends each sentence (the steps they were judged on).
    """
    out: list[Straggler] = []
    if len(table) < 2:
        return out
    # Recompiles first: the graph cache can be shared (CPU ranks are threads of one
    # process), so a rank's total compiles can hide that it alone met a new shape.
    for col, what in (("recompiles", "recompiled"), ("compiles", "compiled")):
        fewest = int(table[col].min())
        if int(table[col].max()) == fewest:
            continue
        for row in table.itertuples(index=False):
            value = int(getattr(row, col))
            if value > fewest:
                extra_s = float(row.compile_s) - float(table["compile_s"].min())
                out.append(Straggler(int(row.rank), col, value, fewest,
                                     f"rank {row.rank} {what} {plural(value, 'time')} where the fewest was "
                                     f"{fewest} ({max(extra_s, 0.0):.2f} s more compiling){window}; the "
                                     "other ranks wait for it at the next collective"))
        break
    wait = table["sync_wait_s"].astype(float)
    median_wait = float(wait.median())
    for row in table.itertuples(index=False):
        w = float(row.sync_wait_s)
        if w >= RATIO * median_wait and w - median_wait >= SYNC_WAIT_FLOOR_S:
            out.append(Straggler(int(row.rank), "sync_wait", w, median_wait,
                                 f"rank {row.rank} waited {w:.2f} s on host syncs, the median rank "
                                 f"{median_wait:.2f} s{window}"))
    step = table["step_ms_median"].astype(float)
    if step.notna().sum() >= 2:
        median_step = float(step.median())
        for row, value in zip(table.itertuples(index=False), step):
            if value == value and median_step > 0 and value >= RATIO * median_step:
                out.append(Straggler(int(row.rank), "step_time", float(value), median_step,
                                     f"rank {row.rank}'s median step took {value:.1f} ms, the median "
                                     f"rank's {median_step:.1f} ms{window}"))
    return out


def _stopped_early(r: RankRun, ranks: Sequence[RankRun]) -> bool:
    """An incomplete file that ends before the ranks that finished (its host died). When no
    rank finished (the whole job was stopped) none is left out: they are compared over the
    steps they all reached."""
    finished = [o.steps for o in ranks if o.complete]
    return not r.complete and bool(finished) and r.steps < max(finished)


def judged(ranks: Sequence[RankRun]) -> tuple[pd.DataFrame, str]:
    """The numbers stragglers are judged on, and the sentence end that says over which steps.

    Never from a rank that stopped: a rank whose file ends early (the host died) compiled
    and waited less only because it ran less; it is left out. The others are compared step
    for step: over the steps every one of them reached, when they did not all reach as many.
    """
    keep = [r for r in ranks if not _stopped_early(r, ranks)]
    if not keep:
        return pd.DataFrame(columns=COLUMNS), ""
    upto = min(r.steps for r in keep)
    if all(r.steps == upto for r in keep):
        return rank_table(keep), ""
    rows = [{**r.row, **counts} for r, counts in zip(keep, _windowed(keep, upto))]
    table = pd.DataFrame(rows, columns=COLUMNS).sort_values("rank", kind="stable").reset_index(drop=True)
    return table, f" in steps 0-{upto - 1} (the steps every rank judged reached)"


def _windowed(ranks: Sequence[RankRun], upto: int) -> list[dict[str, Any]]:
    """Each rank's counts and times over steps ``0 .. upto - 1``: from its arrays, or from its
    digest (one query for every rank read from one)."""
    from_digests: dict[str, dict[str, Any]] = {}
    digests = [r.digest for r in ranks if r.digest is not None]
    if digests:
        query = next(r.windows for r in ranks if r.windows is not None)
        from_digests = query(digests, upto)
    out = []
    for r in ranks:
        if r.digest is not None:
            out.append(from_digests[r.digest])
            continue
        compiled = r.compile_steps < upto
        read = r.sync_steps < upto
        steady = r.steady_ms[r.steady_steps < upto]
        out.append({"compiles": int(compiled.sum()), "recompiles": int((r.recompile_steps < upto).sum()),
                    "compile_s": round(float(r.compile_ms[compiled].sum()) / 1e3, 6), "syncs": int(read.sum()),
                    "sync_wait_s": round(float(r.sync_ms[read].sum()) / 1e3, 6),
                    "step_ms_median": float(np.median(steady)) if len(steady) else None})
    return out


@dataclass
class RankFinding:
    """One finding across ranks: as found on the rank where it cost most, and where it appeared."""

    finding: Finding
    ranks: list[int]
    seconds: dict[int, float]
    """Seconds it cost on each rank it appeared on."""
    missing_on: list[int]
    """Ranks where it did not appear (a per-rank difference worth a look)."""

    @property
    def title(self) -> str:
        return self.finding.title

    @property
    def worst_seconds(self) -> float:
        return max(self.seconds.values(), default=0.0)

    def to_json(self) -> dict[str, Any]:
        f = self.finding
        return {"id": f.id, "cause": f.cause, "kind": f.kind, "title": f.title, "advice": f.advice,
                "ranks": self.ranks, "seconds": {str(r): round(v, 6) for r, v in self.seconds.items()},
                "worst_seconds": round(self.worst_seconds, 6), "missing_on": self.missing_on}


def merged_findings(ranks: Sequence[RankRun] | Sequence[Analysis]) -> list[RankFinding]:
    """Findings across ranks: one per finding id, with the ranks it appeared on.

    Sorted by the seconds lost on the worst rank; each holds the finding as found there.
    """
    runs = _as_rank_runs(ranks)
    all_ranks = sorted(r.rank for r in runs)
    by_id: dict[str, RankFinding] = {}
    for r in runs:
        for f in r.findings:
            entry = by_id.get(f.id)
            if entry is None:
                entry = by_id[f.id] = RankFinding(f, [], {}, [])
            elif f.seconds >= entry.worst_seconds:
                entry.finding = f
            entry.ranks.append(r.rank)
            entry.seconds[r.rank] = f.seconds
    out = list(by_id.values())
    for entry in out:
        entry.ranks.sort()
        present = set(entry.ranks)
        entry.missing_on = [r for r in all_ranks if r not in present]
    out.sort(key=lambda e: (-round(e.worst_seconds, 6), e.finding.id))
    return out


@dataclass
class RanksView:
    """What the report, the summary and ``xprof ranks`` show about a multi-rank run."""

    table: pd.DataFrame
    """:func:`rank_table`: one row per analysed rank, sorted by rank."""
    stragglers: list[Straggler]
    findings: list[RankFinding]
    focus: int | None
    """The rank shown in full (the first straggler, else the first rank)."""
    focus_index: int
    """Its position among the analysed ranks as given."""
    faults: list[RankFault] = field(default_factory=list)
    world_size: int | None = None
    focus_path: str | None = None
    per_rank: list[dict[str, Any]] = field(default_factory=list)
    """Each analysed rank's summary (``xprof summary --json`` of several ranks)."""
    from_digests: list[int] = field(default_factory=list)
    """The ranks of the table read from their digests (the others from their run files)."""
    notes: list[str] = field(default_factory=list)
    """One line for each digest that was there but not used (its rank was read from its run file)."""

    @property
    def from_run_files(self) -> list[int]:
        digested = set(self.from_digests)
        return [int(r) for r in self.table["rank"] if int(r) not in digested]

    @property
    def sources_line(self) -> str | None:
        """Which ranks were read from digests and which from run files (None: no digest used)."""
        if not self.from_digests:
            return None
        digested, files = self.from_digests, self.from_run_files
        line = f"read from digests: {'rank' if len(digested) == 1 else 'ranks'} {span(digested)}"
        if files:
            line += f"; from run files: {'rank' if len(files) == 1 else 'ranks'} {span(files)}"
        return line

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The table's rows as plain dicts (with ``path``)."""
        return list(self.table.to_dict(orient="records"))

    @property
    def groups(self) -> list[RankGroup]:
        return rank_groups(self.table)

    @property
    def grouped(self) -> bool:
        """Show groups of alike ranks rather than every row."""
        return len(self.table) >= GROUP_FROM

    def to_json(self) -> dict[str, Any]:
        """The ``xprof ranks --json`` object (schema ``xprof-ranks``, docs/json.md)."""
        return {"schema": RANKS_SCHEMA, "version": RANKS_VERSION, "ranks": self.rows,
                "stragglers": [s.to_json() for s in self.stragglers],
                "findings": [f.to_json() for f in self.findings], "focus": self.focus,
                "world_size": self.world_size, "faults": [f.to_json() for f in self.faults],
                "groups": [g.to_json() for g in self.groups],
                "read_from": {"digests": self.from_digests, "run_files": self.from_run_files},
                "notes": self.notes}


def pod_view(ranks: Sequence[RankRun], unreadable: Sequence[tuple[str, int, str]] = (),
             notes: Sequence[str] = ()) -> RanksView:
    """The view of a pod's ranks (in the order given) and of its unreadable files; ``notes``:
    the digests that were not used."""
    positions = {id(r): k for k, r in enumerate(ranks)}
    kept, faults, world = sort_out(ranks, unreadable)
    table = rank_table(kept)
    judge, window = judged(kept)
    found = stragglers(judge, window)
    focus_run = None
    if found:
        focus_run = next((r for r in kept if r.rank == found[0].rank), None)
    if focus_run is None and kept:
        focus_run = min(kept, key=lambda r: r.rank)
    return RanksView(table=table, stragglers=found, findings=merged_findings(kept),
                     focus=focus_run.rank if focus_run else None,
                     focus_index=positions[id(focus_run)] if focus_run else 0, faults=faults, world_size=world,
                     focus_path=focus_run.path if focus_run else None, per_rank=[r.summary for r in kept],
                     from_digests=sorted(r.rank for r in kept if r.digest is not None), notes=list(notes))


def ranks_view(analyses: Sequence[Analysis]) -> RanksView:
    """:func:`pod_view` of analyses already made (few ranks, or from Python)."""
    return pod_view([rank_run(a, pos) for pos, a in enumerate(analyses)])


def analyze_ranks(runs: Sequence[Run]) -> list[Analysis]:
    from xprof.analysis import analyze

    return [analyze(r) for r in runs]


def focus_rank(analyses: Sequence[Analysis]) -> int:
    """Index of the analysis to show in full: the first straggler, else the first rank."""
    return ranks_view(analyses).focus_index


def ranks_summary_json(view: RanksView, analyses: Sequence[Analysis] | None = None) -> dict[str, Any]:
    """The ``xprof summary --json`` object of several ranks (schema ``xprof-ranks-summary``)."""
    per_rank = [a.summary() for a in analyses] if analyses is not None else view.per_rank
    return {**view.to_json(), "schema": RANKS_SUMMARY_SCHEMA, "version": RANKS_VERSION, "per_rank": per_rank}
