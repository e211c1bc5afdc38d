"""A warning torch raises from C inside a hooked call is shown at the caller's line, not at
the hook's (Python gives a C warning the innermost Python frame: the wrapper's)."""

from __future__ import annotations

import os
import warnings
from types import SimpleNamespace

from xprof.recorder import hooks

# A stand-in for a hook's wrapper: code whose file is in xprof's hooks folder, warning at
# stacklevel 1 as a C function called from it does.
_WRAPPER = compile("def wrapper():\n    warnings.warn('Converting a tensor to a scalar', UserWarning)\n",
                   os.path.join(hooks._HOOKS_DIR, "hooks.py"), "exec")
_NS: dict[str, object] = {"warnings": warnings}
exec(_WRAPPER, _NS)


def _call_hooked() -> None:
    _NS["wrapper"]()  # type: ignore[operator]  # the user's line


def test_a_warning_from_a_hooked_call_is_shown_at_the_callers_line() -> None:
    patches = hooks.Patches()
    rec = SimpleNamespace(active=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hooks.install_warning_location(rec, patches, None)  # type: ignore[arg-type]
        try:
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
