"""The bookkeeping every hook shares: installing attribute patches and restoring all of
them (:class:`Patches`), a wrapper named as the original it stands in for, and the hooks'
frames taken out of a traceback that passes through them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

_MISSING = object()

_HERE = os.path.dirname(__file__)
"""The folder of the hooks' wrappers (this package): their frames are dropped from a traceback."""


def user_frames_only(exc: BaseException) -> None:
    """Take the hooks' wrappers out of the traceback of an exception passing through one
    (``.item()`` of a 3-element tensor), so it shows the user's line on top, as without xprof.

    Each wrapper calls this and re-raises with a bare ``raise``, which adds no entry for its
    own frame; the entries the wrappers inside it added are dropped here. A library frame in
    between (torch's own Python) stays."""
    tb = exc.__traceback__
    head = prev = None
    while tb is not None:
        if os.path.dirname(tb.tb_frame.f_code.co_filename) != _HERE:
            if prev is None:
                head = tb
            else:
                prev.tb_next = tb
            prev = tb
        tb = tb.tb_next
    if prev is not None:
        prev.tb_next = None
    exc.__traceback__ = head


_Wrapper = TypeVar("_Wrapper", bound=Callable[..., Any])


def posing_as(wrapper: _Wrapper, original: Any, name: str) -> _Wrapper:
    """``wrapper`` named and documented as the ``original`` it stands in for (``name`` when
    that has none), as ``help()`` and tracebacks show it."""
    wrapper.__name__ = getattr(original, "__name__", name)
    wrapper.__qualname__ = getattr(original, "__qualname__", name)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


@dataclass
class _Patch:
    owner: Any
    attr: str
    original: Any
    had_own: bool
    wrapper: Any


class Patches:
    """Installs attribute patches and restores all of them, newest first."""

    def __init__(self) -> None:
        self._patches: list[_Patch] = []
        self._undo: list[Callable[[], Any]] = []

    def on_restore(self, undo: Callable[[], Any]) -> None:
        """Run ``undo`` (remove a registered hook) when the patches are restored."""
        self._undo.append(undo)

    def set(self, owner: Any, attr: str, wrapper: Any) -> None:
        own = owner.__dict__ if isinstance(owner, type) else vars(owner)
        had_own = attr in own
        original = own[attr] if had_own else getattr(owner, attr, _MISSING)
        setattr(owner, attr, wrapper)
        self._patches.append(_Patch(owner, attr, original, had_own, wrapper))

    def restore(self) -> list[str]:
        """Undo every patch; returns the ones someone else had patched over (left alone)."""
        skipped = []
        while self._undo:
            try:
                self._undo.pop()()
            except Exception:
                pass
        while self._patches:
            p = self._patches.pop()
            current = (p.owner.__dict__ if isinstance(p.owner, type) else vars(p.owner)).get(p.attr)
            if current is not p.wrapper:
                skipped.append(f"{getattr(p.owner, '__name__', p.owner)}.{p.attr}")
                continue
            if p.had_own:
                setattr(p.owner, p.attr, p.original)
            else:
                delattr(p.owner, p.attr)
        return skipped
