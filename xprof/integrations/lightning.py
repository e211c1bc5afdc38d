"""``XprofCallback``: record a PyTorch Lightning ``Trainer.fit`` without touching the module.

>>> trainer = lightning.Trainer(accelerator="tpu", callbacks=[XprofCallback("run.json")])
>>> trainer.fit(model, data)

The watch starts at ``on_fit_start`` (after Lightning's XLA strategy has moved the module to
the device and built its optimizers) and ends at ``on_fit_end``, so the sanity check and the
validation passes are in the run. If ``fit()`` raises, Lightning calls ``on_exception``: the
run is closed with that exception, and Lightning re-raises it unchanged.

Lightning's own host reads are recorded like any read: their site is the user's
``trainer.fit()`` line and their library functions name the mechanism
(:mod:`xprof.diagnosis.mechanisms`): the metrics logged with ``prog_bar=True`` turned into
numbers at every batch end, the progress bar's refresh, the logger every
``log_every_n_steps``, each finding's advice in Lightning's own settings. ``xprof run
script.py`` records the same run without the callback.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - the older package name
    try:
        from pytorch_lightning.callbacks import Callback
    except ImportError as exc:
        raise ImportError("xprof.integrations.lightning needs lightning: pip install lightning") from exc


class XprofCallback(Callback):  # type: ignore[misc]
    """Watch a ``Trainer.fit`` into ``path`` (``run.rankN.json`` per process when distributed)."""

    def __init__(self, path: str | os.PathLike[str] = "run.json", *, name: str | None = None,
                 inputs: bool = True, syncs: bool = True, live: bool | None = None) -> None:
        self.requested_path = os.fspath(path)
        self.name = name
        self.inputs = inputs
        self.syncs = syncs
        self.live = live
        self._watch: Any = None
        self.path: str | None = None
        """The file written (set when ``fit`` starts)."""

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if self._watch is not None:
            return
        from xprof.recorder.watch import watch

        w = watch(self.requested_path, name=self.name or type(pl_module).__name__,
                  inputs=self.inputs, syncs=self.syncs, live=self.live)
        w.__enter__()
        self._watch = w
        self.path = w.path

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.close(exception)

    def close(self, exc: BaseException | None = None) -> None:
        """End the watch (idempotent). Pass the exception when training failed."""
        w, self._watch = self._watch, None
        if w is None:
            return
        if exc is None:
            w.__exit__(None, None, None)
        else:
            w.__exit__(type(exc), exc, exc.__traceback__)
