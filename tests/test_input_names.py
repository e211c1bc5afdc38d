"""How a tensor moved to the device is named in a step's input signature: the variable its
line assigns to, read from the source (no torch needed: a stand-in ``.to`` sees the frames)."""

from __future__ import annotations

import builtins
import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any

from xprof.recorder.inputs import name_from_line

_LOOP = '''
import sys


class Tensor:
    def to(self, device):
        caller = sys._getframe(1)  # named while the call runs, as the recorder's hook does
        SEEN.append((NAME(caller.f_code.co_filename, caller.f_lineno, caller, self), caller.f_lineno))
        return Tensor()


SEEN = []
NAME = None


def step(data, target, batch):
    data, target = data.to("xla"), target.to("xla")
    ids = batch.to("xla")
    x, (a, b) = data.to("xla"), (1, 2)
    return data, target, ids


def compiled_call(ids, mask, y, step_fn, model):
    loss = step_fn(ids.to("xla"), mask.to("xla"), y.to("xla"))
    out = model(mask.to("xla"))
    logits = model(make(ids).to("xla"))
    return loss, out, logits


def fresh(n):
    x, y = Tensor().to("xla"), make(n).to("xla")
    a, b = make(n).to("xla"), (
        Tensor().to("xla"))
    return x, y


def make(n):
    return Tensor()


data, target = Tensor(), Tensor()
labels, inputs = target.to("xla"), data.to("xla")


def one_line(n):
    src = make(n).to("xla"); tgt = make(n).to("xla")
    a = Tensor(); b = a.to("xla")
    return src, tgt, b


def whole_step(b, model, done):
    loss = model(b.to("xla")); done.append(loss); done.append(b)
    x = b.to("xla"); done.append(model(x))
    return loss
'''


def _module(tmp_path: Path) -> Any:
    (tmp_path / "loopmod.py").write_text(textwrap.dedent(_LOOP).replace("NAME = None", "NAME = NAMER"))
    sys.path.insert(0, str(tmp_path))
    builtins.NAMER = name_from_line  # type: ignore[attr-defined]
    try:
        return importlib.import_module("loopmod")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("loopmod", None)
        del builtins.NAMER  # type: ignore[attr-defined]


def test_each_tensor_of_a_tuple_assignment_is_named_by_its_target(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    assert [name for name, _ in mod.SEEN] == ["labels", "inputs"]  # module level: globals
    mod.SEEN.clear()
    mod.step(mod.Tensor(), mod.Tensor(), mod.Tensor())
    # `x, (a, b) = data.to(dev), (1, 2)`: the nested target has no name, x still has one
    assert mod.SEEN == [("data", 17), ("target", 17), ("ids", 18), ("x", 19)]
    # without the frame (a line reached through a library) the line stands in too
    assert name_from_line(str(tmp_path / "loopmod.py"), 17) == "loopmod.py:17"


def test_tensors_moved_inside_a_call_are_named_by_their_variables(tmp_path: Path) -> None:
    # `loss = step_fn(ids.to(dev), mask.to(dev), y.to(dev))` (a torch_xla.compile step): the
    # inputs are ids, mask and y, not loss, loss#2 and loss#3.
    mod = _module(tmp_path)
    mod.SEEN.clear()
    mod.compiled_call(mod.Tensor(), mod.Tensor(), mod.Tensor(), lambda *a: a, lambda t: t)
    # `logits = policy(torch.tensor(state).to(dev))`: the data's variable, not what the line assigns
    assert [name for name, _ in mod.SEEN] == ["ids", "mask", "y", "mask", "ids"]


def test_unnamed_tensors_moved_in_a_tuple_assignment_are_named_by_position(tmp_path: Path) -> None:
    # `x, y = torch.randn(n, 16).to(dev), torch.randn(n, 1).to(dev)`: no variable holds
    # either tensor; the column of the running call says which target it is. A statement
    # over several lines (not parsed from one line) is named by the line that moved it.
    mod = _module(tmp_path)
    mod.SEEN.clear()
    mod.fresh(3)
    assert [name for name, _ in mod.SEEN] == ["x", "y", "loopmod.py:32", "loopmod.py:33"]
    mod.SEEN.clear()
    mod.fresh(3)  # cached per line and per call: the same names again
    assert [name for name, _ in mod.SEEN] == ["x", "y", "loopmod.py:32", "loopmod.py:33"]


def test_statements_sharing_a_line_are_named_each_by_its_own_target(tmp_path: Path) -> None:
    # `src = torch.randn(4, 8).to(dev); tgt = torch.randn(4, T).to(dev)`: tgt, not src#2
    # (a user's loop: the length that changed was tgt's, reported as src's)
    mod = _module(tmp_path)
    mod.SEEN.clear()
    mod.one_line(3)
    assert [name for name, _ in mod.SEEN] == ["src", "tgt", "b"]


def test_a_loader_batch_is_named_by_what_the_line_unpacks_it_into(tmp_path: Path) -> None:
    from xprof.recorder.inputs import names_from_unpacking

    src = tmp_path / "loop.py"
    src.write_text(textwrap.dedent('''
        for xl, yl in lab_loader:
        for i, (ids, mask, labels) in enumerate(loader):
        (xu,) = next(unl_iter)
        x, y = next(it)
        for (a, b), (c, d) in zip(one, two):
        for batch in loader:
        for step, (x, y) in enumerate(loader, start=1):
        for tok in loader:
    '''))
    f = str(src)
    assert names_from_unpacking(f, 2, 2) == ("xl", "yl")
    assert names_from_unpacking(f, 3, 3) == ("ids", "mask", "labels")
    assert names_from_unpacking(f, 4, 1) == ("xu",)
    assert names_from_unpacking(f, 5, 2) == ("x", "y")
    assert names_from_unpacking(f, 6, 2) is None  # two loaders zipped, batches of one size: which is which?
    assert names_from_unpacking(f, 7, 2) is None  # not unpacked on the line
    assert names_from_unpacking(f, 8, 2) == ("x", "y")
    assert names_from_unpacking(f, 2, 3) is None  # a batch of another size than the line unpacks
    assert names_from_unpacking(f, 9, 1) == ("tok",)  # a batch that is one tensor
    assert names_from_unpacking(f, 7, 1) == ("batch",)  # (the loop variable, whatever it holds)


def test_a_step_on_one_line_names_the_moved_tensor_not_the_loss(tmp_path: Path) -> None:
    # `loss = model(b.to(dev)).mean(); loss.backward(); opt.step(); ...; torch_xla.sync()` (a
    # compact test's step): the input is b, as on a line of its own, never loss
    mod = _module(tmp_path)
    mod.SEEN.clear()
    mod.whole_step(mod.Tensor(), lambda t: t, [])
    assert [name for name, _ in mod.SEEN] == ["b", "x"]
