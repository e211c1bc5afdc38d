"""The fields read from each bulk record, listed once (:data:`BULK`): the JSON key, the column
it becomes, its type and its default when absent. Adding a field to a record is one line here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

# -- what is read from each bulk record ---------------------------------------------------

REQUIRED = object()
"""Default of a field a record cannot do without: a record lacking it is skipped and counted."""


class Field(NamedTuple):
    """One field of a bulk record (docs/run-format.md): its JSON ``key``, the ``column`` it
    becomes (the analysis table's name for it), its ``kind`` (``int``, ``float``, ``str``,
    ``bool``), the value when the key is absent (None: a missing value; :data:`REQUIRED`:
    the record is skipped) and the typed record's field it mirrors (``attr``)."""

    key: str
    column: str
    kind: str
    default: Any
    attr: str


STEP_FIELDS = (
    Field("i", "i", "int", REQUIRED, "i"),
    Field("t0", "t0", "float", 0.0, "t0"),
    Field("tb", "tb", "float", 0.0, "tb"),
    Field("t1", "t1", "float", 0.0, "t1"),
    Field("barrier", "barrier", "str", "sync", "barrier"),
    Field("bu", "barrier_uncached", "int", 0, "barrier_uncached"),
    Field("bc", "barrier_cached", "int", 0, "barrier_cached"),
    Field("sig", "sig", "int", None, "sig"),
    Field("o", "opt", "int", 0, "opt"),
    Field("ng", "nograd", "bool", False, "nograd"),
    Field("dz", "dynamo_graphs", "int", 0, "dynamo_graphs"),
    Field("site", "site", "int", None, "site"),
    Field("ev", "eval_mode", "bool", False, "eval_mode"),
    Field("bw", "backward", "int", 0, "backward"),
    Field("mg", "mid_graphs", "int", 0, "mid_graphs"),
    Field("gd", "grad_off", "bool", False, "grad_off"),
)
COUNTERS_KEY = "c"
"""A step's counter deltas (an object): one int column per counter name, 0 where absent."""

SYNC_FIELDS = (
    Field("i", "step", "int", 0, "i"),
    Field("site", "site", "int", -1, "site"),
    Field("t0", "t0", "float", 0.0, "t0"),
    Field("t1", "t1", "float", 0.0, "t1"),
    Field("u", "uncached", "int", 0, "uncached"),
    Field("c", "cached", "int", 0, "cached"),
    Field("x", "executions", "int", 0, "executions"),
    Field("deferred", "deferred", "bool", False, "deferred"),
    Field("thread", "thread", "str", None, "thread"),
)

COMPILE_FIELDS = (
    Field("i", "step", "int", REQUIRED, "i"),
    Field("t", "t", "float", 0.0, "t"),
    Field("ns", "ns", "float", 0.0, "ns"),
    Field("at", "at", "str", "barrier", "at"),
)

BULK: dict[str, tuple[Field, ...]] = {"step": STEP_FIELDS, "sync": SYNC_FIELDS, "compile": COMPILE_FIELDS}
"""Record type -> its fields, read into columns."""

SAMPLES: dict[str, str] = {"exec": "executions", "xfer": "transfers", "graph_sizes": "graph_sizes"}
"""Record types whose ``samples`` (``[[a, b], ...]``) become one (n, 2) float array each, under
the name of the typed ``Run`` list they mirror."""

SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN"}
NUMPY_TYPES = {"int": np.int64, "float": np.float64, "bool": np.bool_}

BULK_TYPES = frozenset((*BULK, *SAMPLES))
