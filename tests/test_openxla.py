"""OpenXLA's XProf (PyPI ``xprof``) installed in the same environment: both orders, as pip
leaves the shared ``xprof/`` folder (checked by hand in two venvs with xprof==2.24.2; here
a copy of this package with the files their wheel adds), and one line that says the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xprof import openxla

PACKAGE = Path(openxla.__file__).resolve().parent
THEIR_INIT = '"""Entry point for the TensorBoard plugin package for XProf."""\n\nfrom __future__ import annotations\n'


def _site(tmp_path: Path, theirs_last: bool) -> Path:
    """site-packages after ``pip install xprof-lazy`` and ``pip install xprof`` in one order."""
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "xprof", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "xprof" / "profile_plugin_loader.py").write_text("class ProfilePluginLoader:\n    pass\n")
    (site / "xprof" / "version.py").write_text('"""Version information."""\n\n__version__ = "2.24.2"\n')
    if theirs_last:
        (site / "xprof" / "__init__.py").write_text(THEIR_INIT)
    return site


def _python(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "PJRT_DEVICE": "CPU"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120,
                          cwd=site)


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("xprof: OpenXLA's xprof 2.24.2 is installed in this environment too")
    assert "Fix: pip uninstall -y xprof xprof-lazy, then pip install xprof-lazy here" in lines[0]
    return lines[0]


def test_ours_installed_last_our_import_and_command_say_so(tmp_path: Path) -> None:
    site = _site(tmp_path, theirs_last=False)
    res = _python(site, "-c", "import xprof, xprof.recorder, xprof.testing; print(hasattr(xprof, 'watch'))")
    assert res.stdout.strip() == "True"
    assert "the `xprof` command is this profiler's" in _one_line(res.stderr)  # once per process
    res = _python(site, "-m", "xprof", "--version")
    assert res.returncode == 0 and res.stdout.strip().startswith("xprof ")
    _one_line(res.stderr)


def test_theirs_installed_last_our_command_and_modules_say_so(tmp_path: Path) -> None:
    site = _site(tmp_path, theirs_last=True)
    res = _python(site, "-c", "import xprof; print(hasattr(xprof, 'watch'))")
    assert (res.stdout.strip(), res.stderr) == ("False", "")  # their module: nothing of ours runs
    res = _python(site, "-m", "xprof", "--version")
    assert res.returncode == 0 and res.stdout.strip().startswith("xprof ")
    assert "`import xprof` and the `xprof` command are OpenXLA's" in _one_line(res.stderr)
    res = _python(site, "-c", "import xprof.testing")
    _one_line(res.stderr)


@pytest.mark.parametrize("files", [{}, {"version.py": "__version__ = '1.0'\n"}])
def test_nothing_is_said_without_their_plugin_file(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert openxla.other_version(tmp_path) is None and openxla.check(tmp_path) is None


def test_this_environment_has_no_clash() -> None:
    res = subprocess.run([sys.executable, "-c", "import xprof, xprof.recorder"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stderr == ""
