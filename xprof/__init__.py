"""xprof: find what makes a PyTorch/XLA training loop recompile and sync, and what to change.

``xprof.watch()`` records a run inside the training process (needs torch_xla);
``xprof.load()``, ``xprof.analyze()`` and ``xprof.compare()`` read run files anywhere
(pandas only). Importing ``xprof`` imports neither torch nor pandas.
"""

from __future__ import annotations

import sys as _sys
from typing import TYPE_CHECKING, Any

from xprof import openxla as _openxla
from xprof._version import __version__
from xprof.runfile import Run, RunFileError
from xprof.runfile import load_run as load

_openxla.check()  # OpenXLA's xprof in the same environment: one line on stderr
if "ipykernel" in _sys.modules:  # a notebook kernel: runs shown as HTML in cells (xprof.notebook)
    from xprof import notebook as _notebook

    _notebook.setup()

if TYPE_CHECKING:
    from xprof.notebook import show as show
    from xprof.recorder.watch import watch as watch


def __getattr__(name: str) -> Any:
    if name == "watch":
        from xprof.recorder.watch import watch

        return watch
    if name == "analyze":
        from xprof.analysis import analyze

        return analyze
    if name == "show":
        from xprof.notebook import show

        return show
    if name == "compare":
        from xprof.comparison import compare

        return compare
    raise AttributeError(f"module 'xprof' has no attribute {name!r}")


__all__ = ["Run", "RunFileError", "__version__", "analyze", "compare", "load", "show", "watch"]
