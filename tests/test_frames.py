"""Who a host read is blamed on: the user's line, and the library function that line called
(``via``), on real frames from a package laid out as an installed one."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from types import FrameType
from typing import Any

from tests.installed import installed
from xprof.recorder.frames import FrameClassifier

_LIB = '''
import functools
import sys


def deprecate_kwarg(fn):
    @functools.wraps(fn)
    def wrapped_func(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapped_func


class Model:
    @deprecate_kwarg
    def generate(self):
        return self._stop_check()

    def _stop_check(self):
        return sys._getframe(0)


def make_callback():
    def callback():
        return sys._getframe(0)
    return callback
'''


def _library(tmp_path: Path) -> Any:
    return installed(tmp_path, "fakelib", _LIB)


def test_via_is_the_function_called_not_its_decorator_wrapper(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    frame: FrameType = lib.Model().generate()  # the "read" happens in _stop_check
    site = FrameClassifier().user_site(frame)
    assert site is not None and site.file == __file__
    assert site.func == "test_via_is_the_function_called_not_its_decorator_wrapper"
    assert site.via == "fakelib.Model.generate"  # not fakelib.deprecate_kwarg.<locals>.wrapped_func
    assert site.inner == "fakelib.Model._stop_check"
    assert site.chain[0] == "fakelib.Model._stop_check" and any("<locals>" in c for c in site.chain)


def test_a_closure_called_directly_is_still_named(tmp_path: Path) -> None:
    lib = _library(tmp_path)
    site = FrameClassifier().user_site(lib.make_callback()())  # the only library frame is a closure
    assert site is not None and site.via == "fakelib.make_callback.<locals>.callback"


_INTERNAL = '''
import helpermod


def clip(norm, error_if_nonfinite=False):
    if error_if_nonfinite and helpermod.truth(norm):
        return helpermod.LAST[0]
    return None
'''

_HELPER = '''
import sys

LAST = []
CLASSIFY = None


def truth(value):  # a helper between the library's line and the read: the read is here
    LAST[:] = [CLASSIFY(sys._getframe(0))]  # classified while the frames are live, as a hook does
    return bool(value)
'''


def test_a_read_inside_torch_itself_names_the_line_that_read(tmp_path: Path) -> None:
    # torch and torch_xla are internal frames, not installed libraries: no `inner`, but the
    # line in the called function's package that led to the read is still the evidence.
    root = tmp_path / "torchish"
    root.mkdir()
    (root / "clipmod.py").write_text(textwrap.dedent(_INTERNAL))
    (root / "helpermod.py").write_text(textwrap.dedent(_HELPER))
    sys.path.insert(0, str(root))
    try:
        mod = importlib.import_module("clipmod")
        helper = importlib.import_module("helpermod")
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("clipmod", None)
        sys.modules.pop("helpermod", None)
    classifier = FrameClassifier()
    classifier._internal = classifier._internal + (str(root.resolve()),)
    helper.CLASSIFY = classifier.user_site
    site = mod.clip(1.0, error_if_nonfinite=True)
    assert site is not None and site.file == __file__ and site.via == "clipmod.clip" and site.inner is None
    assert site.inner_file is not None and Path(site.inner_file).name == "clipmod.py"
    assert site.inner_code() == "if error_if_nonfinite and helpermod.truth(norm):"  # not the helper's line


def test_a_package_installed_outside_site_packages_is_a_library(tmp_path: Any, monkeypatch: Any) -> None:
    # `pip install --target DIR pkg` with DIR on sys.path: pkg's RECORD says it is installed;
    # the user's own package beside it has no record and stays the user's code.
    from xprof.recorder import frames

    (tmp_path / "tbx").mkdir()
    (tmp_path / "tbx" / "x2num.py").write_text("")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "loop.py").write_text("")
    (tmp_path / "tbx-2.6.dist-info").mkdir()
    (tmp_path / "tbx-2.6.dist-info" / "RECORD").write_text("tbx/x2num.py,sha256=x,1\ntbx-2.6.dist-info/RECORD,,\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(frames, "_INSTALLED", {})
    assert frames.classify_path(str(tmp_path / "tbx" / "x2num.py")) is frames.FrameKind.LIBRARY
    assert frames.classify_path(str(tmp_path / "mine" / "loop.py")) is frames.FrameKind.USER


def _read_here() -> Any:  # a user function that reads (a meter's update()): the read is here
    return FrameClassifier().user_site(sys._getframe(0))


def test_a_direct_read_inside_a_user_function_records_the_calling_line(tmp_path: Path) -> None:
    first = _read_here()
    second = _read_here()
    assert first is not None and second is not None and first.func == "_read_here"
    assert (first.caller_file, second.caller_file) == (__file__, __file__)
    assert second.caller_line == first.caller_line + 1  # one site per calling line
    assert first.caller_code() == "first = _read_here()"
    # at module level (the loop of a script) there is no caller to record
    script = tmp_path / "loop.py"
    script.write_text("SITE = CLASSIFY(sys._getframe(0))\n")
    scope: dict[str, Any] = {"sys": sys, "CLASSIFY": FrameClassifier().user_site}
    exec(compile(script.read_text(), str(script), "exec"), scope)
    assert scope["SITE"].func == "<module>" and scope["SITE"].caller_file is None


_MODULES = '''
import sys

import torch
from torch import nn


class Probe(nn.Module):
    def forward(self, x):
        self.frame = sys._getframe(0)
        return x


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.probe = Probe()

    def forward(self, x):
        return self.probe(x)
'''


def test_via_of_a_read_inside_a_module_call_is_the_module_not_its_call_machinery(tmp_path: Path) -> None:
    """``nn.TransformerEncoder(...)(x, mask=...)`` reads in its causal-mask check: the owner is
    ``TransformerEncoder.forward``, not ``Module._wrapped_call_impl`` that every call goes through."""
    import torch

    lib = installed(tmp_path, "fakemodels", _MODULES)
    block = lib.Block()
    block(torch.zeros(1))
    site = FrameClassifier().user_site(block.probe.frame)
    assert site is not None and site.file == __file__
    assert site.via == "fakemodels.Block.forward"
    assert site.inner == "fakemodels.Probe.forward"
