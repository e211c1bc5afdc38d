"""xprof.testing: the compile/sync guard on real torch_xla loops, and its message."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.xla

pytest_plugins = ["pytester"]



def _loop(device: Any, rows: list[int], read: bool = False) -> None:
    import torch
    import torch_xla.core.xla_model as xm

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for n in rows:
        tokens = torch.randn(n, 6).to(device)
        opt.zero_grad()
        loss = model(tokens).pow(2).mean()
        loss.backward()
        opt.step()
        if read:
            loss.item()
        xm.mark_step()


def test_guard_passes_on_a_clean_loop(device: Any, tmp_path: Any) -> None:
    from xprof.testing import max_compiles

    with max_compiles(0, warmup=2, max_syncs=0, path=str(tmp_path / "g.json")) as g:
        _loop(device, [4] * 5)
    assert g.compiles_after_warmup == 0
    assert g.syncs_after_warmup == 0
    assert g.analysis is not None and g.analysis.totals.steps == 5


def test_guard_fails_naming_input_shape_and_the_input(device: Any, tmp_path: Any) -> None:
    from xprof.testing import CompileGuardError, max_compiles

    path = str(tmp_path / "shapes.json")
    with pytest.raises(CompileGuardError) as info:
        with max_compiles(0, warmup=2, path=path):
            _loop(device, [4, 4, 4, 7, 9])
    msg = str(info.value)
    print(msg)
    assert re.search(r"\d+ compiles? after 2 warm-up steps, 0 allowed", msg)
    assert "input_shape" in msg
    assert "'tokens'" in msg
    assert path in msg


def test_guard_counts_syncs_when_asked(device: Any) -> None:
    from xprof.testing import CompileGuardError, max_compiles

    with pytest.raises(CompileGuardError) as info:
        with max_compiles(5, warmup=2, max_syncs=0):
            _loop(device, [4] * 4, read=True)
    msg = str(info.value)
    print(msg)
    assert re.search(r"\d+ host syncs? after 2 warm-up steps, 0 allowed", msg)
    assert "implicit_sync" in msg
    assert "test_testing_guard.py" in msg  # the line of the .item()


def test_user_exception_propagates_unchanged(device: Any) -> None:
    from xprof.testing import max_compiles

    with pytest.raises(KeyError):
        with max_compiles(0):
            raise KeyError("mine")


def test_pytest_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["xprof.testing"]\n')
    pytester.makepyfile(test_fixture="""
        def test_has_guard(xprof_guard, tmp_path):
            guard = xprof_guard(0, warmup=2)
            assert hasattr(guard, "__enter__")
    """)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                          "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(passed=1)


def test_a_failing_guard_shows_the_test_and_the_diagnosis_not_xprofs_source(
        device: Any, pytester: pytest.Pytester) -> None:
    """pytest's convention: the guard's frames carry ``__tracebackhide__``."""
    pytester.makepyfile(test_recompiles="""
        import torch
        import torch_xla
        from xprof.testing import max_compiles

        def test_loop():
            dev = torch_xla.device()
            model = torch.nn.Linear(6, 3).to(dev)
            with max_compiles(0, warmup=2):
                for n in [4, 4, 4, 7, 9]:
                    model(torch.randn(n, 6).to(dev)).sum().backward()
                    torch_xla.sync()
    """)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                          "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    failure = out.split("_ test_loop _")[1].split("short test summary")[0]
    print(failure)
    assert "with max_compiles(0, warmup=2):" in failure
    assert "CompileGuardError: xprof guard:" in failure and "input_shape" in failure
    for source in ("def check(", "def __exit__", "raise CompileGuardError", "contextlib", "self.watch"):
        assert source not in failure
    assert len(failure.splitlines()) < 30, len(failure.splitlines())


def test_a_step_written_on_one_line_names_its_input(device: Any) -> None:
    """The compact form tests use: the input is ``b``, as it would be on a line of its own."""
    import torch
    import torch_xla

    from xprof.testing import CompileGuardError, max_compiles

    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(CompileGuardError) as info:
        with max_compiles(0, warmup=2):
            for n in [4, 4, 4, 7, 9]:
                b = torch.randn(n, 6)
                loss = model(b.to(device)).mean(); loss.backward(); opt.step(); opt.zero_grad(); torch_xla.sync()  # noqa: E702
    msg = str(info.value)
    assert "input 'b' took shapes (4, 6), (7, 6), (9, 6)" in msg, msg
    assert "loss" not in msg, msg
