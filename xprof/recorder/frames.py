"""Finding the user's line in a call stack, and the one rule for what a frame's file is.

A host read happens deep inside torch; the user wants the line of *their* code that
asked for it, and, when their line called a library that did the read (a ``GradScaler``
step, a checkpoint save, a Trainer's logging), the name of that library function.
Files are classified once and cached, so a lookup is a short walk up the stack.
"""

from __future__ import annotations

import enum
import linecache
import os
import sys
import sysconfig
from types import FrameType
from typing import NamedTuple

_XPROF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_USER_FILES = frozenset({os.path.realpath(os.path.join(_XPROF_DIR, "demo.py"))})
"""Files inside xprof that are the user's code to a report: the ``xprof demo`` loop."""


class FrameKind(enum.IntEnum):
    """What a frame's file is, to a report."""

    USER = 0
    """The user's code: the line a report points at."""
    LIBRARY = 1
    """Installed packages and the stdlib (and ``<frozen ...>``-style pseudo files)."""
    INTERNAL = 2
    """torch, torch_xla and xprof itself: never the line to blame."""


_XPROF_MARKERS = ("/xprof/recorder/", "/xprof/runner.py")
"""Path pieces of xprof's own hooks on another machine (a debug file read elsewhere; the
runner lived at ``xprof/runner.py`` before it moved beside the recorder)."""


def classify_path(path: str, internal: tuple[str, ...] = (), libraries: tuple[str, ...] | None = None) -> FrameKind:
    """The one rule for a frame's file, in the recording process and when reading a debug file.

    ``internal``: folders of torch/torch_xla as imported in this process, when known. A path
    is judged by name first (``site-packages``, xprof's own hook folders), so a frame from
    another machine is classified the same way as a local one.
    """
    if path.startswith("<"):
        return FrameKind.USER if path.startswith("<ipython") else FrameKind.LIBRARY
    real = os.path.realpath(path)
    if real in _USER_FILES:
        return FrameKind.USER
    norm = path.replace("\\", "/")
    if real.startswith(_XPROF_DIR) or any(m in norm for m in _XPROF_MARKERS):
        return FrameKind.INTERNAL
    if internal and real.startswith(internal):
        return FrameKind.INTERNAL
    if "site-packages" in norm or "dist-packages" in norm:
        return FrameKind.LIBRARY
    if real.startswith(_LIBRARY_ROOTS if libraries is None else libraries):
        return FrameKind.LIBRARY
    if _installed_elsewhere(real):
        return FrameKind.LIBRARY
    return FrameKind.USER


_INSTALLED: dict[str, frozenset[str]] = {}
"""A folder on sys.path -> the top-level names the distributions installed there own."""

_REAL: dict[str, str] = {}
"""A sys.path entry -> its real path (a debug file's frames are classified one by one)."""


def _installed_elsewhere(real: str) -> bool:
    """A file of a distribution installed outside site-packages (``pip install --target
    DIR`` with DIR on sys.path): its top-level folder is listed by a ``*.dist-info/RECORD``
    (or an ``*.egg-info/top_level.txt``) in the same sys.path folder. A user's own
    package beside their script has no such record."""
    for entry in sys.path:
        root = _REAL.get(entry) if entry else os.path.realpath(".")  # ("": the working folder, which moves)
        if root is None:
            root = _REAL[entry] = os.path.realpath(entry)
        if not real.startswith(root + os.sep):
            continue
        top = real[len(root) + 1:].split(os.sep, 1)[0]
        if top.endswith(".py"):
            top = top[:-3]
        owned = _INSTALLED.get(root)
        if owned is None:
            owned = _INSTALLED[root] = _installed_tops(root)
        if top in owned:
            return True
    return False


def _installed_tops(root: str) -> frozenset[str]:
    tops: set[str] = set()
    try:
        names = os.listdir(root)
    except OSError:
        return frozenset()
    for name in names:
        try:
            if name.endswith(".dist-info"):
                with open(os.path.join(root, name, "RECORD"), encoding="utf-8") as f:
                    for line in f:
                        first = line.split(",", 1)[0].split("/", 1)[0]
                        if first and not first.endswith((".dist-info", ".data")) and first != "..":
                            tops.add(first[:-3] if first.endswith(".py") else first)
            elif name.endswith(".egg-info"):
                with open(os.path.join(root, name, "top_level.txt"), encoding="utf-8") as f:
                    tops.update(line.strip() for line in f if line.strip())
        except OSError:
            continue
    return frozenset(tops)


def _library_roots() -> tuple[str, ...]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    for path in sys.path:
        if path.endswith(("site-packages", "dist-packages")):
            roots.add(os.path.realpath(path))
    return tuple(sorted(roots, key=len, reverse=True))


_LIBRARY_ROOTS = _library_roots()


def _package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return os.path.dirname(os.path.realpath(file)) if file else None


class Site(NamedTuple):
    """Where a host read came from. A named tuple: one is made at every hooked read, and
    a tuple is several times cheaper to build than a frozen dataclass."""

    file: str
    line: int
    func: str
    via: str | None
    """The library function the user's line called that did the read, if any."""
    inner: str | None = None
    """The innermost installed-library function on the way (``transformers.trainer.Trainer.
    _maybe_log_save_evaluate``), or with none, the torch function whose line read
    (``torch.nn.modules.transformer._detect_is_causal_mask``), when it is not ``via`` itself."""
    chain: tuple[str, ...] = ()
    """Installed-library functions between the read and the user's line, innermost first
    (the innermost and the outermost :data:`CHAIN_LIMIT` of a deeper stack): which library
    mechanism did the read (a model's mask check inside ``generate()`` inside the Trainer's
    evaluation)."""
    inner_file: str | None = None
    """File of the innermost installed-library frame (the library line that did the read)."""
    inner_line: int = 0
    caller_file: str | None = None
    """A direct read inside a user function: the user line that called it (a meter's
    ``update()`` that reads ``.item()``, called before the barrier and after it)."""
    caller_line: int = 0

    def code(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    def inner_code(self) -> str:
        return linecache.getline(self.inner_file, self.inner_line).strip() if self.inner_file else ""

    def caller_code(self) -> str:
        return linecache.getline(self.caller_file, self.caller_line).strip() if self.caller_file else ""


CHAIN_LIMIT = 8

CALL_PLUMBING = frozenset({"_wrapped_call_impl", "_call_impl"})
"""``torch.nn.Module``'s call machinery: every module call passes through it, so it is never
the library function that a user's line called; the module's ``forward`` is (a read in
``nn.TransformerEncoder``'s causal-mask check belongs to ``TransformerEncoder.forward``)."""


class FrameClassifier:
    """Tells the profiler's and torch's own frames from the user's, with a per-file cache."""

    def __init__(self) -> None:
        internal = [_XPROF_DIR]
        for pkg in ("torch", "torch_xla"):
            d = _package_dir(pkg)
            if d:
                internal.append(d)
        self._internal = tuple(internal)
        self._libraries = _library_roots()
        self.cache: dict[str, FrameKind] = {}
        """Each file's kind, as :meth:`kind` gives it (a hook on a hot path reads it first)."""

    def kind(self, filename: str) -> FrameKind:
        k = self.cache.get(filename)
        if k is None:
            k = self.cache[filename] = classify_path(filename, self._internal, self._libraries)
        return k

    def user_site(self, frame: FrameType | None, limit: int = 64) -> Site | None:
        """The first user frame above ``frame``, and the library call it went through.

        When no frame is user code (a script run from site-packages, say), the first
        frame outside torch, torch_xla and xprof stands in for it.
        """
        first_outside: FrameType | None = None
        last_library: FrameType | None = None
        last_named: FrameType | None = None
        """The outermost library frame that is not a closure: a decorator's wrapper
        (``deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func``) is not what the user
        called, the function it wraps is."""
        innermost: FrameType | None = None
        chain: list[FrameType] = []
        f = frame
        n = 0
        cache = self.cache
        while f is not None and n < limit:
            code = f.f_code
            k = cache.get(code.co_filename)
            if k is None:
                k = self.kind(code.co_filename)
            if k == FrameKind.USER:
                if last_library is None:  # a direct read: no library on the way
                    back = f.f_back if code.co_name != "<module>" else None
                    if back is not None and self.kind(back.f_code.co_filename) == FrameKind.USER:
                        return Site(code.co_filename, f.f_lineno, code.co_name, None,
                                    caller_file=back.f_code.co_filename, caller_line=back.f_lineno)
                    return Site(code.co_filename, f.f_lineno, code.co_name, None)
                via = _via(last_named or last_library)
                if len(chain) > 2 * CHAIN_LIMIT:
                    chain = chain[:CHAIN_LIMIT] + chain[-CHAIN_LIMIT:]
                names = tuple(n for n in (_via(c) for c in chain) if n)
                at = innermost if innermost is not None else _line_in(frame, via, f) if via else None
                # (torch's own functions are no installed library's: the line's function is)
                inner = _via(innermost if innermost is not None else at)
                return Site(code.co_filename, f.f_lineno, code.co_name, via,
                            inner if inner != via else None, names,
                            at.f_code.co_filename if at is not None else None,
                            at.f_lineno if at is not None else 0)
            if k == FrameKind.LIBRARY and first_outside is None:
                first_outside = f
            if k == FrameKind.INTERNAL and f.f_code.co_filename.startswith(_XPROF_DIR):
                f = f.f_back  # xprof's own wrappers are never the library the user called
                n += 1
                continue
            if k == FrameKind.LIBRARY and "-packages" in f.f_code.co_filename:
                if innermost is None:
                    innermost = f
                chain.append(f)
            last_library = f
            if code.co_name not in CALL_PLUMBING and "<locals>" not in getattr(code, "co_qualname", ""):
                last_named = f
            f = f.f_back
            n += 1
        if first_outside is not None:
            code = first_outside.f_code
            return Site(code.co_filename, first_outside.f_lineno, code.co_name, None)
        return None


_TENSOR_METHOD_MODULES = ("torch._tensor", "torch._tensor_str", "torch.overrides")


def _line_in(frame: FrameType | None, via: str, user: FrameType) -> FrameType | None:
    """The innermost frame below the user's in the package of ``via``: the library line that
    did the read when no installed package is on the way (torch's own ``clip_grad_norm_``:
    ``if error_if_nonfinite and (...)``), not a stdlib helper or generated code in between."""
    top = via.split(".", 1)[0]
    f = frame
    while f is not None and f is not user:
        module = str(f.f_globals.get("__name__", ""))
        if (module == top or module.startswith(top + ".")) and module not in _TENSOR_METHOD_MODULES:
            return f
        f = f.f_back
    return None


def _via(frame: FrameType | None) -> str | None:
    """Dotted name of the library function a user's line called, or None for a direct read."""
    if frame is None:
        return None
    module = str(frame.f_globals.get("__name__", ""))
    if module.startswith("xprof.") or module in _TENSOR_METHOD_MODULES:
        return None
    qual = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return f"{module}.{qual}" if module else qual
