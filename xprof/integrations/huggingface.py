"""``XprofCallback``: record a Hugging Face ``Trainer`` run without touching the loop.

>>> trainer = Trainer(model, args, train_dataset=ds, callbacks=[XprofCallback("run.json")])
>>> trainer.train()

The watch starts at ``on_train_begin`` (after the Trainer has moved the model to the
device and built its optimizer) and ends at ``on_train_end``. The Trainer's own host
reads (its loss ``.item()`` at each logging step, ``grad_norm.item()``, the learning
rate) are recorded like any sync: their site is the user's ``trainer.train()`` line and
their ``via`` names the transformers function they went through
(``transformers.trainer.Trainer.train``), so a report can tell them from the user's
code. Each ``on_log`` also writes a ``debug`` record of kind ``hf_log`` (the step it
fell in, the Trainer's global step and the logged keys), which marks those steps as the
Trainer's logging steps.

If ``trainer.train()`` raises, the Trainer calls no ``on_train_end``: the run is closed at
interpreter exit with the exception that ended the program, so the file is complete and
names the real error. Catching it yourself, pass it on: ``callback.close(exc)``.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError("xprof.integrations.huggingface needs transformers: "
                      "pip install 'xprof-lazy[hf]'") from exc


class TrainingDidNotFinish(RuntimeError):
    """Recorded as the run's exception when the Trainer never reached ``on_train_end``."""


class XprofCallback(TrainerCallback):  # type: ignore[misc]
    """Watch a ``Trainer`` run into ``path`` (``run.rankN.json`` per process when distributed)."""

    def __init__(self, path: str | os.PathLike[str] = "run.json", *, name: str | None = None,
                 inputs: bool = True, syncs: bool = True, live: bool | None = None) -> None:
        self.requested_path = os.fspath(path)
        self.live = live
        self.name = name
        self.inputs = inputs
        self.syncs = syncs
        self._watch: Any = None
        self.path: str | None = None
        """The file written (set when training starts)."""
        self.logging_steps: list[int] = []
        """The Trainer's global steps at which it logged (and so read the loss)."""

    # -- Trainer events -----------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._watch is not None:
            return
        from xprof.recorder.watch import watch

        w = watch(self.requested_path, name=self.name or _run_name(args),
                  inputs=self.inputs, syncs=self.syncs, live=self.live)
        w.__enter__()
        self._watch = w
        self.path = w.path
        atexit.register(self._close_at_exit)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        w = self._watch
        if w is None or w.recorder is None:
            return
        step = int(getattr(state, "global_step", 0) or 0)
        self.logging_steps.append(step)
        w.recorder.mark("hf_log", global_step=step, keys=sorted((logs or {}).keys()))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.close()

    # -- closing --------------------------------------------------------------------------

    def close(self, exc: BaseException | None = None) -> None:
        """End the watch (idempotent). Pass the exception when training failed."""
        w, self._watch = self._watch, None
        if w is None:
            return
        try:
            atexit.unregister(self._close_at_exit)
        except Exception:
            pass
        if exc is None:
            w.__exit__(None, None, None)
        else:
            w.__exit__(type(exc), exc, exc.__traceback__)

    def _close_at_exit(self) -> None:
        """The run left open at interpreter exit: closed with the exception that ended the
        program (``sys.last_value``, set before exit handlers run), else as unfinished."""
        last = getattr(sys, "last_value", None)
        self.close(last if isinstance(last, BaseException)
                   else TrainingDidNotFinish("the Trainer did not reach on_train_end"))


def _run_name(args: Any) -> str:
    name = getattr(args, "run_name", None)
    if isinstance(name, str) and name and name != getattr(args, "output_dir", None):
        return name
    return "trainer"
