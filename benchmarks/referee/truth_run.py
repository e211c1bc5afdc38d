"""Run one script plainly and write torch_xla's own counters: the referee's truth side.

    PT_XLA_DEBUG_LEVEL=2 PT_XLA_DEBUG_FILE=debug.txt \
        python truth_run.py counters.json script.py [args...]

How it stays independent of xprof: it imports nothing of xprof (only the standard library
and torch_xla) and patches nothing: the script runs through ``runpy.run_path`` as
``__main__`` with its own ``sys.argv``, and at exit (normal, ``SystemExit``, an exception or
the referee's SIGINT) it waits for the device and reads every counter once. Counters are not
read at each barrier: a Python wrapper around ``torch_xla._XLAC._xla_step_marker`` puts its
own frame innermost, and torch_xla 2.9 then reports every barrier's execution as "user code
trying to access tensor value" (seen while building this; the warm-up boundary is read from
the debug output's own barrier blocks instead, see truth.py).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback
from typing import Any

COUNTERS = ("UncachedCompile", "CachedCompile", "MarkStep", "ExecuteComputation",
            "ExecuteReplicated", "xla::_to_cpu", "aten::_local_scalar_dense")


def read_counters(met: Any) -> dict[str, int]:
    """Every counter torch_xla has (the names listed in ``COUNTERS`` are always present)."""
    values = {name: 0 for name in COUNTERS}
    for name in met.counter_names():
        value = met.counter_value(name)
        if value is not None:
            values[name] = int(value)
    return values


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: truth_run.py OUT.json SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    out, script, args = argv[0], argv[1], argv[2:]
    import torch_xla.debug.metrics as met

    status, error = "ok", None
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    started = time.time()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            status, error = "exit", f"SystemExit({e.code!r})"
    except KeyboardInterrupt:
        status, error = "interrupted", "KeyboardInterrupt (the referee's time limit)"
    except BaseException:
        status, error = "error", traceback.format_exc(limit=-3)
    try:
        import torch_xla.core.xla_model as xm
        xm.wait_device_ops()
    except Exception:
        pass
    record = {"script": script, "args": args, "status": status, "error": error,
              "wall_s": time.time() - started, "exit": read_counters(met)}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
