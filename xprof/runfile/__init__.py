"""The run file: its format, its writer and its loader (the one thing the recorder and the
analysis share).

This package owns the format: the record keys are spelled here and nowhere else. The
recorder writes records through :class:`RunWriter`; :func:`load_run` decodes each line
once into a typed record (:class:`Step`, :class:`Sync`, :class:`Site`, ...) and every
reader after it works on those fields.

A run file is JSON Lines. Its first line is a header object that says what the file
is (``"format": "xprof-run"``) and which version of the format wrote it; every other
line is one record with a ``"type"`` key. The recorder appends records as the run goes
and flushes them, so a process that is killed still leaves a readable file; a complete
run ends with an ``end`` record. ``docs/run-format.md`` documents every record.

The package is split by what each module holds: the format's names and typed records
(:mod:`~xprof.runfile.records`), reading a field and the numbers no recorder writes
(:mod:`~xprof.runfile.values`), the decoders (:mod:`~xprof.runfile.decoders`), the writer
(:mod:`~xprof.runfile.writer`), the tolerant loader (:mod:`~xprof.runfile.loader`) and finding
run files in folders (:mod:`~xprof.runfile.paths`). Everyone else imports from
``xprof.runfile``, which holds every public name.

This package imports nothing heavy: it is used inside the training process (writing)
and on a laptop without torch (reading).
"""

from __future__ import annotations

from xprof.runfile.decoders import (
    compile_record,
    file_record,
    graph_change_record,
    signature_record,
    site_record,
    step_record,
    sync_record,
)
from xprof.runfile.loader import (
    MAX_HEADER,
    MAX_LINE,
    Undecodable,
    bounded_lines,
    decode_line,
    gc_paused,
    load_run,
    open_run,
    require_regular,
)
from xprof.runfile.paths import RANK_IN_NAME, expand_run_paths, rank_of_path
from xprof.runfile.records import (
    CACHED,
    EXECUTE,
    EXECUTION_COUNTERS,
    FORMAT,
    LOCAL_SCALAR,
    MARK_STEP,
    REPLICATED,
    TO_CPU,
    UNCACHED,
    VERSION,
    Compile,
    Debug,
    End,
    Error,
    GraphChange,
    GraphLine,
    Input,
    Run,
    RunFileError,
    Site,
    Spmd,
    Step,
    Sync,
    base_input_name,
    is_fallback_counter,
)
from xprof.runfile.values import MAX_COUNT, MAX_NS, MAX_SECONDS, Impossible
from xprof.runfile.writer import EncodedRecord, RunWriter, append_records, encode_record

__all__ = [
    "CACHED", "EXECUTE", "EXECUTION_COUNTERS", "FORMAT", "LOCAL_SCALAR", "MARK_STEP", "MAX_COUNT", "MAX_HEADER",
    "MAX_LINE", "MAX_NS", "MAX_SECONDS", "RANK_IN_NAME", "REPLICATED", "TO_CPU", "UNCACHED", "VERSION",
    "Compile", "Debug", "EncodedRecord", "End", "Error", "GraphChange", "GraphLine", "Impossible", "Input",
    "Run", "RunFileError", "RunWriter", "Site", "Spmd", "Step", "Sync", "Undecodable", "append_records",
    "base_input_name", "bounded_lines", "compile_record", "decode_line", "encode_record", "expand_run_paths",
    "file_record", "gc_paused", "graph_change_record", "is_fallback_counter", "load_run", "open_run",
    "rank_of_path", "require_regular", "signature_record", "site_record", "step_record", "sync_record",
]
