"""Hooks armed by evidence: installed once a torch_xla counter shows they can matter (either
thread), so a hook on a call as common as ``Tensor.__getitem__`` costs nothing until then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from xprof.recorder import metrics as m


class ArmedHooks:
    """The armed hooks of the :class:`~xprof.recorder.core.Recorder` (a base class of it; its
    state is set up in ``Recorder.__init__``)."""

    counters: m.CounterReader
    _stopped: threading.Event
    _arms: list[tuple[str, str, Callable[[], None]]]
    _arm_lock: threading.Lock
    error: Callable[[str, BaseException], None]
    mark: Callable[..., None]

    def arm_on_counter(self, counter: str, hook: str, install: Callable[[], None]) -> None:
        """Call ``install`` once torch_xla's ``counter`` exists (now, if it does at start).

        For a hook on a call so common that wrapping it would cost every training step
        (``Tensor.__getitem__``: a data loader indexes each sample) and that only matters
        after torch_xla has run a given op (``aten::nonzero``, which boolean-mask indexing
        of an XLA tensor runs on the CPU). The counter appears when that op first runs; the
        barrier that follows (or the writer thread, within a quarter second) installs the
        hook, and a ``debug`` record of kind ``hook`` says from which step it is on."""
        with self._arm_lock:
            self._arms.append((counter, hook, install))

    def _check_arms(self, at_start: bool = False) -> None:
        """Install the armed hooks whose counter the counter reader now tracks; never raises.
        Not once the recording has stopped: its patches are being restored."""
        if self._stopped.is_set():
            return
        names = self.counters.names
        with self._arm_lock:
            due = [a for a in self._arms if a[0] in names]
            if not due:
                return
            self._arms = [a for a in self._arms if a[0] not in names]
        for counter, hook, install in due:
            try:
                install()
            except Exception as exc:
                self.error(f"{hook} hook", exc)
                continue
            if not at_start:
                self.mark("hook", hook=hook, counter=counter)
