"""A warning torch raises from C inside a hooked call is given the caller's line, not the
hook's (Python gives a C warning the innermost Python frame: the wrapper's), whether it is
shown or recorded."""

from __future__ import annotations

import io
import os
import warnings
from types import SimpleNamespace
from typing import Any

from xprof.recorder import hooks
from xprof.recorder.hooks.evidence import _HOOKS_DIR

# A stand-in for a hook's wrapper: code whose file is in xprof's hooks folder, warning at
# stacklevel 1 as a C function called from it does.
_WRAPPER = compile("def wrapper():\n    warnings.warn('Converting a tensor to a scalar', UserWarning)\n",
                   os.path.join(_HOOKS_DIR, "hooks.py"), "exec")
_NS: dict[str, object] = {"warnings": warnings}
exec(_WRAPPER, _NS)


def _call_hooked() -> None:
    _NS["wrapper"]()  # type: ignore[operator]  # the user's line


def _installed(rec: Any) -> hooks.Patches:
    patches = hooks.Patches()
    hooks.install_warning_location(rec, patches, None)
    return patches


def test_a_recorded_warning_from_a_hooked_call_has_the_callers_line() -> None:
    # The catch_warnings block starts after watch() did (pytest's own capture, a user's
    # `with warnings.catch_warnings(record=True)` in the loop).
    rec = SimpleNamespace(active=True)
    patches = _installed(rec)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _call_hooked()
            warnings.warn("another one", UserWarning, stacklevel=1)  # not from a hook: as it came
            rec.active = False
            _call_hooked()  # after watch() stopped: as it came
    finally:
        assert patches.restore() == []
    shown = [(os.path.basename(w.filename), str(w.message)) for w in caught]
    assert shown == [("test_warning_location.py", "Converting a tensor to a scalar"),
                     ("test_warning_location.py", "another one"),
                     ("hooks.py", "Converting a tensor to a scalar")]
    assert caught[0].lineno == _call_hooked.__code__.co_firstlineno + 1


def test_a_shown_warning_from_a_hooked_call_has_the_callers_line() -> None:
    rec = SimpleNamespace(active=True)
    out = io.StringIO()
    saved = warnings.showwarning

    def to_out(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
               line: Any = None) -> None:
        out.write(f"{os.path.basename(filename)}:{lineno}: {message}\n")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = to_out  # a user's (or logging.captureWarnings') own
        patches = _installed(rec)
        try:
            _call_hooked()
        finally:
            assert patches.restore() == []
            warnings.showwarning = saved
    line = _call_hooked.__code__.co_firstlineno + 1
    assert out.getvalue() == f"test_warning_location.py:{line}: Converting a tensor to a scalar\n"
