"""A stalled disk never stalls training (issue 38): with every write of the run file made to
block (a hung NFS or FUSE mount, a full disk that blocks), the training thread never waits on
it. The queue stays under its cap (what does not fit is dropped and counted), ``stop()`` leaves
after a few seconds, and the count reaches the ``end`` record and the summary once the disk
takes writes again. Counts and bounds, not timings: exact counters, no torch."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.fake_metrics import Counters
from xprof.recorder import core
from xprof.recorder.core import Recorder
from xprof.runfile import RunWriter

STEPS = 20_000


def _blocked_writer(path: Path, release: threading.Event) -> tuple[RunWriter, list[int]]:
    """A writer whose every write after the header waits for ``release`` (at most 10 s each)."""
    writer = RunWriter(str(path), {"xprof_version": "0.1.0", "meta": {}})
    emit = writer._emit
    blocked: list[int] = []

    def stalled(text: str, flush: bool) -> None:
        if not release.is_set():
            blocked.append(threading.get_ident())
            release.wait(10)
        emit(text, flush)

    writer._emit = stalled  # type: ignore[method-assign]
    return writer, blocked


def test_a_blocked_disk_drops_and_counts_events_and_never_holds_training(tmp_path: Path) -> None:
    path, release = tmp_path / "r.json", threading.Event()
    writer, blocked = _blocked_writer(path, release)
    source = Counters({"UncachedCompile": 1, "CachedCompile": 0, "ExecuteComputation": 1})
    rec = Recorder(writer, source)
    rec.start()
    longest = 0
    try:
        for i in range(STEPS):
            source.values["ExecuteComputation"] += 1
            before = (source.values["UncachedCompile"], source.values["CachedCompile"], i)
            if i % 50 == 0:
                rec.on_host_read("item", None, 1.0, 1.0, before, before, False)
            rec.on_barrier(1.0, before, "mark_step")
            longest = max(longest, len(rec._events))
        assert rec.step == STEPS  # every step ran: none waited for the writer
        assert longest <= core.QUEUE_CAP + 1  # memory stays bounded
        assert rec.events_dropped > 0 and rec.dropped_from is not None
        main = threading.get_ident()
        assert blocked and main not in blocked  # only the writer thread ever touched the disk
        started = time.monotonic()
        rec.stop("ok", None)
        assert time.monotonic() - started < core.EXIT_WAIT + 20  # a generous bound: it left
        assert rec.abandoned and rec._flusher is not None and rec._flusher.is_alive()  # still stuck
        assert main not in blocked
    finally:
        release.set()
    assert rec._flusher is not None
    rec._flusher.join(60)
    assert not rec._flusher.is_alive()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    end = records[-1]
    assert end["type"] == "end" and end["steps"] == STEPS
    assert end["events_dropped"] == rec.events_dropped and end["dropped_from"] == rec.dropped_from
    written = sum(r.get("type") in ("step", "sync") for r in records)
    assert written + end["events_dropped"] == STEPS + STEPS // 50  # each event written or counted

    from xprof.analysis import analyze
    from xprof.runcolumns import load_columns

    notes = analyze(load_columns(str(path))).notes
    assert any(f"dropped {end['events_dropped']:,} events" in n or f"dropped {end['events_dropped']} events" in n
               for n in notes), notes


def test_a_disk_that_keeps_up_drops_nothing(tmp_path: Path) -> None:
    """The cap is never reached by a writer that is merely busy: the same loop, disk free."""
    path = tmp_path / "r.json"
    writer = RunWriter(str(path), {"xprof_version": "0.1.0", "meta": {}})
    source = Counters({"UncachedCompile": 1, "CachedCompile": 0, "ExecuteComputation": 1})
    rec = Recorder(writer, source)
    rec.start()
    for i in range(STEPS):
        source.values["ExecuteComputation"] += 1
        before = (1, 0, i)
        rec.on_barrier(1.0, before, "mark_step")
        if i % 2000 == 0:
            time.sleep(0.01)  # (a real step gives the writer thread the GIL now and then)
    rec.stop("ok", None)
    assert not rec.abandoned and rec.events_dropped == 0
    end = json.loads(path.read_text().splitlines()[-1])
    assert end["type"] == "end" and "events_dropped" not in end
