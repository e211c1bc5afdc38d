"""XLA graphs for ``--explain``: reading an ``HloModuleProto`` without protobuf
(:mod:`~xprof.hlo.reader`) and what changed between two graphs, at which user line
(:mod:`~xprof.hlo.diff`).

Pure Python; imports no torch and nothing else of xprof: the recorder's ``--explain``
(:mod:`xprof.recorder.explain`) reads and compares graphs on its writer thread, and writes
what changed as ``debug`` records of kind ``graph`` (``runfile.GraphChange``). Everyone else
imports from ``xprof.hlo``.
"""

from __future__ import annotations

from xprof.hlo.diff import CHANGE_KINDS, MAX_LINES, GraphDiff, LineChange, describe, diff, distance, keys, user_frame
from xprof.hlo.reader import Frame, Graph, HloError, Op, Shape, read_module

__all__ = ["CHANGE_KINDS", "MAX_LINES", "Frame", "Graph", "GraphDiff", "HloError", "LineChange", "Op", "Shape",
           "describe", "diff", "distance", "keys", "read_module", "user_frame"]
