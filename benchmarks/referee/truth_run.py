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

A SIGINT (the referee's time limit) often lands while torch_xla compiles a large graph in C++,
where Python's handler cannot run until the compile returns. So the counters are also written
at once, by a thread woken by the signal itself (``signal.set_wakeup_fd``), with the status
``interrupted``; the main thread overwrites that record if it gets to its own exit. SIGUSR1
dumps every thread's Python stack to stderr (``faulthandler``), which the referee sends before
its SIGINT, so a run stopped at its limit shows where it was.
"""

from __future__ import annotations

import faulthandler
import json
import os
import runpy
import signal
import sys
import threading
import time
import traceback
from typing import Any

COUNTERS = ("UncachedCompile", "CachedCompile", "MarkStep", "ExecuteComputation",
            "ExecuteReplicated", "xla::_to_cpu", "aten::_local_scalar_dense")
INTERRUPTED = "KeyboardInterrupt (the referee's time limit)"


def read_counters(met: Any) -> dict[str, int]:
    """Every counter torch_xla has (the names listed in ``COUNTERS`` are always present)."""
    values = {name: 0 for name in COUNTERS}
    for name in met.counter_names():
        value = met.counter_value(name)
        if value is not None:
            values[name] = int(value)
    return values


class Recorder:
    """Writes the counters record; the signal's thread and the main thread share it."""

    def __init__(self, out: str, script: str, args: list[str], met: Any) -> None:
        self.out, self.script, self.args, self.met = out, script, args, met
        self.started = time.time()
        self.lock = threading.Lock()
        self.signalled = False
        """Set when SIGINT came; the script may catch it and go on to its end or to an error."""
        self.ended: tuple[str, str | None] | None = None
        """The script's own outcome, once it has ended (the device wait after it may still hang)."""

    def write(self, status: str, error: str | None) -> None:
        record = {"script": self.script, "args": self.args, "status": status, "error": error,
                  "wall_s": time.time() - self.started, "exit": read_counters(self.met)}
        with self.lock:
            tmp = f"{self.out}.tmp{threading.get_ident()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(record, f, indent=1)
            os.replace(tmp, self.out)

    def on_signal(self) -> None:
        """Wake on SIGINT's byte in a pipe (written by the C-level handler, so even while the main
        thread is inside a compile) and write the counters as they are now."""
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)

        def wait() -> None:
            while True:
                got = os.read(r, 64)
                if not got or signal.SIGINT in got:
                    break
            self.signalled = self.ended is None
            status, error = self.ended or ("interrupted", INTERRUPTED + "; counters read when the signal came")
            try:
                self.write(status, error)
            except Exception:
                pass

        threading.Thread(target=wait, name="referee-sigint", daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: truth_run.py OUT.json SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    out, script, args = argv[0], argv[1], argv[2:]
    import torch_xla.debug.metrics as met

    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    rec = Recorder(out, script, args, met)
    rec.on_signal()
    status, error = "ok", None
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            status, error = "exit", f"SystemExit({e.code!r})"
    except KeyboardInterrupt:
        status, error = "interrupted", INTERRUPTED
    except BaseException:
        status, error = "error", traceback.format_exc(limit=-3)
    if rec.signalled and status != "interrupted":
        # the script caught the stop and went on (to its end, or to an error of its own after it)
        status, error = "interrupted", INTERRUPTED + f"; the script caught it, then ended {status}" + (
            f": {error.strip().splitlines()[-1]}" if error else "")
    rec.ended = (status, error)
    rec.write(status, error)
    if status != "interrupted":
        try:
            import torch_xla.core.xla_model as xm
            xm.wait_device_ops()
        except Exception:
            pass
    rec.write(status, error)
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
