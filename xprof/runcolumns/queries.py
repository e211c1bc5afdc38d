"""The DuckDB queries: the bulk records of a batch of files read into columns, the
impossible numbers among them found, the counters decoded.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

import numpy as np

from xprof.runcolumns.columns import ColumnsRead, RunColumns, py_list, shared_strings
from xprof.runcolumns.connection import close, one_reader, thread_connection
from xprof.runcolumns.fields import (
    BULK,
    BULK_TYPES,
    COMPILE_FIELDS,
    COUNTERS_KEY,
    NUMPY_TYPES,
    REQUIRED,
    SAMPLES,
    SQL_TYPES,
    STEP_FIELDS,
    SYNC_FIELDS,
    Field,
)
from xprof.runfile import MAX_COUNT, MAX_LINE, MAX_NS, MAX_SECONDS

_GLOB = re.compile(r"[*?\[\]{}]")
_SURROGATE = re.compile("[\ud800-\udfff]")

def _key_types() -> dict[str, str]:
    """The SQL type each JSON key is read as: its field's type, or JSON where two record
    types give one key different types (a step's ``c`` is an object, a read's a count)."""
    kinds: dict[str, set[str]] = {}
    for fields in BULK.values():
        for f in fields:
            kinds.setdefault(f.key, set()).add(SQL_TYPES[f.kind])
    kinds.setdefault(COUNTERS_KEY, set()).add("JSON")
    out = {k: (v.pop() if len(v) == 1 else "JSON") for k, v in kinds.items()}
    out["type"] = "VARCHAR"
    out["samples"] = "DOUBLE[][]"
    return out


_KEY_TYPES = _key_types()


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _sql_ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _select(f: Field, key_type: str) -> str:
    """The SQL expression of one field: cast from JSON where the key is shared, with its default."""
    col = _sql_ident(f.key)
    expr = col if key_type != "JSON" else f"TRY_CAST({col} AS {SQL_TYPES[f.kind]})"
    if f.default is not None and f.default is not REQUIRED:
        expr = f"COALESCE({expr}, {_sql_literal(f.default)})"
    return expr


def _sql_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return _sql_str(v)
    return repr(v)


MAX_OBJECT = 256 << 20
"""DuckDB's ``maximum_object_size`` where a line is longer than :data:`xprof.runfile.MAX_LINE`."""


def object_size(longest: int) -> int:
    """DuckDB's ``maximum_object_size`` for files whose longest line has ``longest`` bytes.

    DuckDB's JSON reader holds a buffer of about this size while it reads: 256 MB for every
    file was most of the peak memory of a million-step report. Twice the longest line (at
    least 1 MB) reads every line that 256 MB did (DuckDB 2.0 reads a longer object anyway;
    the 1.x versions the project allows stop at it)."""
    return MAX_OBJECT if longest > MAX_LINE else min(MAX_OBJECT, max(1 << 20, 2 * longest + 2))


_KINDS = {t: k for k, t in enumerate((*BULK, *SAMPLES))}
_KIND = "CASE type " + " ".join(f"WHEN {_sql_str(t)} THEN {k}" for t, k in _KINDS.items()) + " END::UTINYINT"
"""A row's record type as a number (``xprof_kind``): a string a row would cost 16 bytes."""
_RARE = [k for k in dict.fromkeys(f.key for f in (*SYNC_FIELDS, *COMPILE_FIELDS))
         if k not in {f.key for f in STEP_FIELDS} | {COUNTERS_KEY}]
"""The keys only reads and compiles have (a few rows of a million): packed into one list
column, 16 bytes a row, where a column each cost 8 or 16 bytes a row, most of them empty."""
_PACKED = (f"CASE WHEN type IN ({', '.join(_sql_str(t) for t, fs in BULK.items() if any(f.key in _RARE for f in fs))}) "
           "THEN [{" + ", ".join(f"{_sql_str(k)}: {_sql_ident(k)}" for k in _RARE) + "}] END")
_UNPACKED = ("(SELECT * EXCLUDE (xprof_rare), "
             + ", ".join(f"struct_extract(xprof_rare[1], {_sql_str(k)}) AS {_sql_ident(k)}" for k in _RARE)
             + " FROM xprof_bulk)")


_FILE = "xprof_f"
"""The column holding which file of the batch a row came from (its index)."""


def read_bulk(paths: list[str], longest: int = MAX_OBJECT, release: bool = False) -> list[_Read_and_seen]:
    """The bulk records of each file as columns, and how many rows of bulk types DuckDB read
    from it: one query over all of them (``longest``: bytes in the files' longest line;
    ``release``: close the connection once the table is read, before the steps' counters are
    made: DuckDB keeps the memory of its table until then)."""
    con = thread_connection()
    with _readable_paths(paths) as sources, one_reader(con):
        columns = "{" + ", ".join(f"{_sql_str(k)}: {_sql_str(t)}" for k, t in _KEY_TYPES.items()) + "}"
        types = ", ".join(_sql_str(t) for t in BULK_TYPES)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE xprof_bulk AS SELECT list_position(?::VARCHAR[], filename) - 1 AS {_FILE}, "
            f"{_KIND} AS xprof_kind, * EXCLUDE (filename, type, samples, {', '.join(map(_sql_ident, _RARE))}), "
            f"{_PACKED} AS xprof_rare, {_PAIRS} AS samples FROM read_json(?, format='newline_delimited', "
            f"columns={columns}, ignore_errors=true, maximum_object_size={object_size(longest)}, filename=true) "
            f"WHERE type IN ({types})", [sources, sources])
    n = len(paths)
    try:
        facts = _facts(con)
        seen, skipped = [0] * n, [0] * n
        for f, total, missing in zip(facts["files"], facts["rows"], facts["missing"]):
            seen[int(f)], skipped[int(f)] = int(total), int(missing)
        syncs = _split(_query_table(con, "sync", SYNC_FIELDS), {}, n)[0]
        compiles = _split(_query_table(con, "compile", COMPILE_FIELDS), {}, n)[0]
        samples = _query_samples(con, n)
        step_rows, coded = _query_steps(con, facts)  # (last: the most rows, with the least left in the table)
    finally:
        con.execute("DROP TABLE IF EXISTS xprof_bulk")
    if release:
        close()
    steps, counters = _split(step_rows, coded if isinstance(coded, dict) else coded.spread(thread_connection()), n)
    out = []
    odd = set(facts["odd_counters"])
    for k in range(n):
        possible = k not in odd and _possible(steps[k], counters[k], syncs[k], compiles[k], samples[k])
        st, ctr = _sorted_steps(steps[k], counters[k])
        cols = RunColumns(steps=st, counters=ctr, syncs=syncs[k], compiles=compiles[k], samples=samples[k])
        out.append((ColumnsRead(cols, skipped[k], possible), seen[k]))
    return out


def _counts(table: dict[str, np.ndarray], fields: Sequence[Field]) -> bool:
    """Every count of the table's rows is one (ids such as ``sig`` and ``site`` aside)."""
    return all(((table[f.column] >= 0) & (table[f.column] <= MAX_COUNT)).all()
               for f in fields if f.kind == "int" and f.key not in ("sig", "site"))


def _ordered(*times: np.ndarray) -> bool:
    """Times in seconds, each after the one before (NaN is never)."""
    ok = (times[0] >= 0) & (times[-1] < MAX_SECONDS)
    for a, b in zip(times, times[1:]):
        ok &= a <= b
    return bool(ok.all())


def _possible(steps: dict[str, np.ndarray], counters: dict[str, np.ndarray], syncs: dict[str, np.ndarray],
              compiles: dict[str, np.ndarray], samples: dict[str, np.ndarray]) -> bool:
    """No number the record reader calls impossible (:class:`xprof.runfile.Impossible`), steps in
    file order: such a file is read record by record, which skips and counts each one."""
    i = steps["i"]
    return (_counts(steps, STEP_FIELDS) and _ordered(steps["t0"], steps["tb"], steps["t1"])
            and not (np.diff(i) <= 0).any()
            and all(((c >= 0) & (c <= MAX_COUNT)).all() for c in counters.values())
            and _counts(syncs, SYNC_FIELDS) and _ordered(syncs["t0"], syncs["t1"])
            and _counts(compiles, COMPILE_FIELDS) and _ordered(compiles["t"])
            and bool(((compiles["ns"] >= 0) & (compiles["ns"] <= MAX_NS)).all())
            and all(_ordered(p[:, 0]) and bool(((p[:, 1] >= 0) & (p[:, 1] <= MAX_NS)).all()) for p in samples.values()))


_Read_and_seen = tuple[ColumnsRead, int]


class _readable_paths:
    """The paths as DuckDB should read them: links with plain names when a path holds
    characters DuckDB would take for a glob pattern, or a name that is not UTF-8 (a
    ``\\udce9`` DuckDB cannot take)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> list[str]:
        if not any(_GLOB.search(p) or _SURROGATE.search(p) for p in self.paths):
            return list(self.paths)
        self.tmp = tempfile.TemporaryDirectory(prefix="xprof-")
        out = []
        for k, p in enumerate(self.paths):
            link = os.path.join(self.tmp.name, f"run{k}.json")
            os.symlink(os.path.abspath(p), link)
            out.append(link)
        return out

    def __exit__(self, *exc: object) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


def _split(table: dict[str, np.ndarray], counters: dict[str, np.ndarray],
           n: int) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """One query's rows cut into each file's (rows come file by file, in file order)."""
    f = np.asarray(table.pop(_FILE), dtype=np.int64)
    if len(f) > 1 and (np.diff(f) < 0).any():
        order = np.argsort(f, kind="stable")
        f = f[order]
        table = {k: v[order] for k, v in table.items()}
        counters = {k: v[order] for k, v in counters.items()}
    edges = np.searchsorted(f, np.arange(n + 1), side="left")
    if n == 1:
        return [table], [counters]
    return ([{k: v[edges[j]:edges[j + 1]] for k, v in table.items()} for j in range(n)],
            [{k: v[edges[j]:edges[j + 1]] for k, v in counters.items()} for j in range(n)])


def _sorted_steps(steps: dict[str, np.ndarray],
                  counters: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Steps by index (stable), as the record reader sorts them; counters a step never moved
    in this file are left out."""
    counters = {k: v for k, v in counters.items() if v.any()}
    order = steps["i"]
    if len(order) > 1 and (np.diff(order) < 0).any():
        perm = np.argsort(order, kind="stable")
        steps = {k: v[perm] for k, v in steps.items()}
        counters = {k: v[perm] for k, v in counters.items()}
    return steps, counters


def _fetch(con: Any, fields: Sequence[Field], where: str, extra: Sequence[str] = (),
           source: str = "xprof_bulk", strings: dict[str, list[Any]] | None = None,
           constant: Collection[str] = ()) -> dict[str, Any]:
    """Rows of one record type (with the file each came from), each field with its default
    (missing values flagged).

    ``strings``: the distinct values of string fields, which then come as an index into them,
    so a million steps do not make a million Python strings; ``constant``: the fields that
    are their default on every row, not fetched (:func:`_constant`)."""
    parts = [_FILE]
    coded = strings or {}
    for f in fields:
        expr = _select(f, _KEY_TYPES[f.key])
        if f.column in constant:
            continue
        if f.kind == "str" and f.column in coded:
            listed = "[" + ", ".join(_sql_str(v) for v in coded[f.column] if v is not None) + "]::VARCHAR[]"
            parts.append(f"COALESCE(list_position({listed}, {expr}), 0) AS {_sql_ident(f.column)}")
        elif f.kind == "str":
            parts.append(f"{expr} AS {_sql_ident(f.column)}")
        elif f.default is None:
            parts.append(f"COALESCE({expr}, 0) AS {_sql_ident(f.column)}")
            parts.append(f"({expr}) IS NULL AS {_sql_ident(f.column + ':missing')}")
        else:
            parts.append(f"{expr} AS {_sql_ident(f.column)}")
    parts.extend(extra)
    got = dict(con.execute(f"SELECT {', '.join(parts)} FROM {source} WHERE {where}").fetchnumpy())
    made: dict[tuple[Any, ...], np.ndarray] = {}
    for f in fields:
        if f.column in constant:
            got[f.column] = _constant(f, len(got[_FILE]), made)
            if f.default is None:
                got[f.column + ":missing"] = _constant(Field("", "", "bool", True, ""), len(got[_FILE]), made)
    for column, found in coded.items():
        known = [v for v in found if v is not None]
        table = np.empty(len(known) + 1, dtype=object)
        table[:] = [None, *known]
        got[column] = table[np.asarray(got[column], dtype=np.int64)]
    return got


def _required(fields: Sequence[Field], record: str) -> tuple[str, str]:
    """WHERE clauses for the rows of ``record`` with every required field, and without."""
    need = [f"({_select(f, _KEY_TYPES[f.key])}) IS NOT NULL" for f in fields if f.default is REQUIRED]
    ok = " AND ".join([f"xprof_kind = {_KINDS[record]}", *need])
    bad = f"xprof_kind = {_KINDS[record]} AND NOT ({' AND '.join(need)})" if need else "FALSE"
    return ok, bad


def _finish(raw: dict[str, Any], fields: Sequence[Field]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {_FILE: np.asarray(raw[_FILE])}
    for f in fields:
        v = raw[f.column]
        if f.kind == "str" and v.dtype == object and not isinstance(v, np.ma.MaskedArray):
            out[f.column] = v if len(v) > 1000 else shared_strings(v.tolist())
        elif f.kind == "str":
            out[f.column] = shared_strings(py_list(v) if isinstance(v, np.ma.MaskedArray) else v.tolist())
        elif f.default is None:
            out[f.column] = np.ma.MaskedArray(np.asarray(v, dtype=NUMPY_TYPES[f.kind]),
                                              np.asarray(raw[f.column + ":missing"], dtype=bool))
        else:
            out[f.column] = np.asarray(v, dtype=NUMPY_TYPES[f.kind])
    return out


def _query_table(con: Any, record: str, fields: Sequence[Field]) -> dict[str, np.ndarray]:
    return _finish(_fetch(con, fields, _required(fields, record)[0], source=_UNPACKED), fields)


_COUNTERS = f"CASE WHEN json_type({_sql_ident(COUNTERS_KEY)}) = 'OBJECT' THEN {_sql_ident(COUNTERS_KEY)} END"
"""A step's counters object (NULL where ``c`` is something else)."""
_PAIRS = "flatten([s FOR s IN samples IF len(s) = 2 AND s[1] IS NOT NULL AND s[2] IS NOT NULL])"
"""A sample record's pairs that are two numbers (the record reader drops the others), one after
the other in one list: a list of pairs costs twice the memory in DuckDB's table."""


def _facts(con: Any) -> dict[str, Any]:
    """What the other queries need to know first, in one round trip: rows and rows without a
    required field per file, the counter names and the distinct strings of the step fields."""
    ok_step = _required(STEP_FIELDS, "step")[0]
    missing = " + ".join(f"count(*) FILTER (WHERE {_required(fields, record)[1]})"
                         for record, fields in BULK.items())
    strings = [f for f in STEP_FIELDS if f.kind == "str"]
    parts = [
        f"(SELECT list(f ORDER BY f) FROM (SELECT {_FILE} AS f FROM xprof_bulk GROUP BY {_FILE}))",
        f"(SELECT list(n ORDER BY f) FROM (SELECT {_FILE} AS f, count(*) AS n FROM xprof_bulk GROUP BY {_FILE}))",
        f"(SELECT list(m ORDER BY f) FROM (SELECT {_FILE} AS f, {missing} AS m FROM xprof_bulk GROUP BY {_FILE}))",
        # (over each distinct counters object: steps repeat a handful, and parsing is the cost)
        f"(SELECT list(DISTINCT k) FROM (SELECT unnest(json_keys({_COUNTERS})) AS k FROM "
        f"(SELECT DISTINCT {_sql_ident(COUNTERS_KEY)} FROM xprof_bulk WHERE {ok_step})))",
        *(f"(SELECT list(DISTINCT {_select(f, _KEY_TYPES[f.key])}) FROM xprof_bulk WHERE {ok_step})" for f in strings),
        f"(SELECT CASE WHEN count(*) <= {CODED_COUNTERS} THEN list(o) END FROM (SELECT DISTINCT "
        f"{_sql_ident(COUNTERS_KEY)}::VARCHAR AS o FROM xprof_bulk WHERE {ok_step} AND {_sql_ident(COUNTERS_KEY)} "
        "IS NOT NULL))",
        f"(SELECT [{', '.join(map(_varies, _MAYBE_CONSTANT))}] FROM xprof_bulk WHERE {ok_step})",
    ]
    got = con.execute("SELECT " + ", ".join(parts)).fetchone()
    files, rows, miss, names = (v or [] for v in got[:4])
    objects = got[-2]
    return {"files": files, "rows": rows, "missing": miss, "counters": sorted(names),
            "strings": {f.column: list(v or []) for f, v in zip(strings, got[4:4 + len(strings)])},
            "counter_objects": objects, "odd_counters": _odd_counters(con, ok_step, objects),
            "constant": {f.column for f, varies in zip(_MAYBE_CONSTANT, got[-1]) if not varies}}


def _odd_counters(con: Any, ok_step: str, objects: list[str] | None) -> list[int]:
    """The files with a counter value that is not a count DuckDB reads as one (NaN, a fraction,
    past 64 bits). Where the steps have few distinct counters objects (``objects``) and none
    looks odd here, none is (Python's ``\\s`` takes every space RE2's does, and more), and the
    files are not searched."""
    if objects is not None and not any(_ODD_COUNT_RE.search(o) for o in objects):
        return []
    got = con.execute(
        f"SELECT list(DISTINCT f) FROM (SELECT DISTINCT {_FILE} AS f, {_sql_ident(COUNTERS_KEY)}::VARCHAR AS o "
        f"FROM xprof_bulk WHERE {ok_step}) WHERE regexp_matches(o, {_sql_str(_ODD_COUNT)})").fetchone()
    return list(got[0] or [])


_MAYBE_CONSTANT = [f for f in STEP_FIELDS if f.kind in ("int", "bool") and f.default is not REQUIRED]
"""Step fields that most runs leave at their default on every step (``dz``, ``mg``, ``site``...):
such a column is not fetched but given as one read-only array (:func:`_constant`)."""


def _varies(f: Field) -> str:
    """Whether any step has ``f`` other than its default (missing, for a field without one)."""
    expr = _select(f, _KEY_TYPES[f.key])
    return f"bool_or(({expr}) IS NOT NULL)" if f.default is None else f"bool_or(({expr}) <> {_sql_literal(f.default)})"


def _constant(f: Field, rows: int, made: dict[tuple[Any, ...], np.ndarray]) -> np.ndarray:
    """A column of ``rows`` defaults of ``f`` (0 for a field without one), read-only and shared by
    the columns of one fetch that hold the same (``made``): a million steps' column of zeros
    fetched costs 8 MB, each."""
    kind = NUMPY_TYPES[f.kind]
    value = 0 if f.default is None else f.default
    key = (kind, value)
    if key not in made:
        made[key] = np.full(rows, value, dtype=kind)
        made[key].flags.writeable = False
    return made[key]


_ODD_COUNT = r":\s*(-|N|I|[0-9]*\.|[0-9]+[eE]|[0-9]{14})"
"""A counter value in a step's ``c`` that DuckDB would read as 0 or round, where the record
reader sees an impossible count (a false match only costs reading that file record by record)."""
_ODD_COUNT_RE = re.compile(_ODD_COUNT)


CODED_COUNTERS = 64
"""Up to this many distinct counters objects (steps repeat a handful), each is parsed once and
the steps point at theirs; more, and every step's object is parsed."""


def _query_steps(con: Any, facts: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | _Coded]:
    """The step rows and their counters, or (where few distinct counters objects) each step's
    object as an index, the counters made from it later (:class:`_Coded`)."""
    ok = _required(STEP_FIELDS, "step")[0]
    names = facts["counters"]
    objects = facts.get("counter_objects")
    if names and objects is not None:
        listed = "[" + ", ".join(_sql_str(o) for o in objects) + "]::VARCHAR[]"
        code = f"COALESCE(list_position({listed}, {_sql_ident(COUNTERS_KEY)}::VARCHAR), 0) AS xprof_code"
        raw = _fetch(con, STEP_FIELDS, ok, [code], strings=facts["strings"], constant=facts["constant"])
        which = np.asarray(np.ma.filled(raw.pop("xprof_code"), 0), dtype=np.int64)
        return _finish(raw, STEP_FIELDS), _Coded(names, objects, which)
    extra = [f"struct_extract(xprof_c, {_sql_str(n)}) AS {_sql_ident('counter:' + n)}" for n in names]
    source = "xprof_bulk"
    if names:
        struct = "{" + ", ".join(f'{_json_str(n)}: "BIGINT"' for n in names) + "}"
        source = f"(SELECT *, json_transform({_COUNTERS}, {_sql_str(struct)}) AS xprof_c FROM xprof_bulk)"
    raw = _fetch(con, STEP_FIELDS, ok, extra, source, strings=facts["strings"], constant=facts["constant"])
    counters: dict[str, np.ndarray] = {}
    for n in names:
        v = raw.pop("counter:" + n)
        counters[n] = np.asarray(np.ma.filled(v, 0) if isinstance(v, np.ma.MaskedArray) else v, dtype=np.int64)
    return _finish(raw, STEP_FIELDS), counters


class _Coded(NamedTuple):
    """Each step's counters object as an index into the distinct ``objects`` (0: none)."""

    names: list[str]
    objects: list[str]
    which: np.ndarray

    def spread(self, con: Any) -> dict[str, np.ndarray]:
        """The counters of each object parsed once, then given to its steps: as
        :func:`_query_steps` reads them where every step's object is parsed."""
        struct = "{" + ", ".join(f'{_json_str(n)}: "BIGINT"' for n in self.names) + "}"
        parsed = f"json_transform(CASE WHEN json_type(o) = 'OBJECT' THEN o END, {_sql_str(struct)})"
        values = ", ".join(f"struct_extract({parsed}, {_sql_str(n)}) AS {_sql_ident('counter:' + n)}"
                           for n in self.names)
        got = con.execute(f"SELECT {values} FROM (SELECT unnest(?::JSON[]) AS o, unnest(range(?)) AS k) ORDER BY k",
                          [self.objects, len(self.objects)]).fetchnumpy()
        counters: dict[str, np.ndarray] = {}
        for n in self.names:
            v = got["counter:" + n]
            per_object = np.zeros(len(self.objects) + 1, dtype=np.int64)
            per_object[1:] = np.asarray(np.ma.filled(v, 0) if isinstance(v, np.ma.MaskedArray) else v, dtype=np.int64)
            counters[n] = per_object[self.which]
        return counters


def _json_str(s: str) -> str:
    import json

    return json.dumps(s)


def _query_samples(con: Any, n: int) -> list[dict[str, np.ndarray]]:
    """Every ``samples`` pair of the sample records, by file and record type: one query a
    record type, each number a row, read straight into the (pairs, 2) arrays."""
    out: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
    for record, name in SAMPLES.items():
        got = con.execute(f"SELECT {_FILE} AS f, unnest(samples) AS v FROM xprof_bulk WHERE xprof_kind = ? "
                          "AND samples IS NOT NULL", [_KINDS[record]]).fetchnumpy()
        values = np.asarray(got.pop("v"), dtype=np.float64)
        if not len(values):
            continue
        pairs = values.reshape(-1, 2)
        files = np.asarray(got.pop("f"))[::2] if n > 1 else None
        for j in range(n):
            mine = pairs if files is None else pairs[files == j]
            if len(mine):
                out[j][name] = mine
    return out
