"""A container whose own ``.to`` moves its fields (PyG's ``Batch``: ``data = data.to(dev)``
calls ``Tensor.to`` on ``x``, ``edge_index``, ``y`` from the library's ``apply``): each tensor
is its own input, named by its field, on real torch_xla. Named by the line alone they were
``data``, ``data#2``... and read as copies of one input (micro-batches of different kinds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.installed import installed
from xprof.analysis import analyze
from xprof.runfile import load_run

pytestmark = pytest.mark.xla

_LIB = '''
class Batch:
    """Fields in a store, moved by walking it: the pattern of PyG's BaseStorage.apply."""

    def __init__(self, **fields):
        self._store = dict(fields)

    def __getattr__(self, name):
        return self.__dict__["_store"][name]

    def apply(self, func):
        for key, value in self._store.items():
            self._store[key] = func(value)
        return self

    def to(self, device):
        return self.apply(lambda t: t.to(device))
'''


def test_a_containers_fields_are_named_each_by_its_field(device: Any, tmp_path: Path) -> None:
    import torch
    import torch_xla

    import xprof

    lib = installed(tmp_path, "graphlib_stub", _LIB)
    torch.manual_seed(0)
    model = torch.nn.Linear(7, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "run.json"
    with xprof.watch(path, live=False):
        for _ in range(4):
            data = lib.Batch(x=torch.randn(12, 7), edge_index=torch.randint(0, 12, (2, 30)),
                             y=torch.randint(0, 2, (3,)))
            data = data.to(device)
            h = model(data.x) + data.edge_index.float().mean()
            loss = torch.nn.functional.cross_entropy(h[:3], data.y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
    run = load_run(path)
    names = {tuple(i.name for i in sig) for sig in run.signatures.values()}
    assert names == {("data.x", "data.edge_index", "data.y")}
    a = analyze(run)
    assert a.totals.steps == 4 and not a.findings
