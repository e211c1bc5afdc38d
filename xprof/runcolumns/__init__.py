"""The run file read into columns: the bulk records (steps, host reads, compiles, samples)
go from JSON Lines into one numpy array per field, parsed by DuckDB's JSON reader.

A long run has a million step records and a pod has hundreds of rank files; one Python
object per record made reading them slow and large. Here the records a run has many of
are parsed in C++ (DuckDB, several threads) straight into typed columns, and only the few
records a run has a handful of (``site``, ``sig``, ``end``, ``error``, ``debug``,
``dynamo``) go through :mod:`xprof.runfile`'s typed decoders, so both readers apply the
same rules to them.

The fields read from each bulk record are listed once, in :data:`BULK` (the JSON key, the
column it becomes, its type and its default when absent): adding a field to a record is
one line there (:mod:`~xprof.runcolumns.fields`). :func:`columns_of` builds the same columns from the typed records of
:func:`xprof.runfile.load_run` (a ``Run`` made in a test, or read by the record reader),
so the analysis has one input, :class:`RunColumns`. :func:`load_columns` returns them
beside a ``Run`` of the other records (:class:`ColumnRun`): ``Run`` itself knows nothing of
columns.

How lines are accounted for, as :func:`xprof.runfile.load_run` does: a first pass over the
bytes (numpy, no object per line) finds the lines that start like the recorder writes a
bulk record (``{"type":"step"`` ...); every other line is decoded in Python. DuckDB parses
the whole file; its rows of bulk types are the columns, and a bulk-looking line it could
not parse is a skipped line (or the cut-off tail). A file written some other way (a bulk
record with its keys in another order) is read by the record reader instead.

The package is split by what each module holds: the fields (:mod:`~xprof.runcolumns.fields`),
the columns and their conversions to and from typed records (:mod:`~xprof.runcolumns.columns`),
the first pass over the bytes (:mod:`~xprof.runcolumns.scan`), reading files
(:mod:`~xprof.runcolumns.load`), the DuckDB connection (:mod:`~xprof.runcolumns.connection`) and
its queries (:mod:`~xprof.runcolumns.queries`). Everyone else imports from ``xprof.runcolumns``.
"""


from __future__ import annotations

from xprof.runcolumns.columns import ColumnRun, RunColumns, columns_of, with_records
from xprof.runcolumns.columns import int_column as int_column
from xprof.runcolumns.connection import BIG_FILE as BIG_FILE
from xprof.runcolumns.connection import close as close
from xprof.runcolumns.connection import connected as connected
from xprof.runcolumns.connection import one_thread as one_thread
from xprof.runcolumns.connection import single_threaded as single_threaded
from xprof.runcolumns.fields import BULK, SAMPLES, Field
from xprof.runcolumns.fields import COMPILE_FIELDS as COMPILE_FIELDS
from xprof.runcolumns.fields import COUNTERS_KEY as COUNTERS_KEY
from xprof.runcolumns.fields import REQUIRED as REQUIRED
from xprof.runcolumns.fields import STEP_FIELDS as STEP_FIELDS
from xprof.runcolumns.fields import SYNC_FIELDS as SYNC_FIELDS
from xprof.runcolumns.load import BATCH_BYTES as BATCH_BYTES
from xprof.runcolumns.load import SMALL_FILE as SMALL_FILE
from xprof.runcolumns.load import load_columns, load_many
from xprof.runcolumns.queries import CODED_COUNTERS as CODED_COUNTERS

__all__ = ["BULK", "SAMPLES", "ColumnRun", "Field", "RunColumns", "columns_of", "load_columns", "load_many",
           "with_records"]
