"""The summary cache: asking again for the summary of the same run file costs a file hash,
not the analysis, and prints exactly what the analysis printed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xprof.cli import summary_cache

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_runs" / "clean_a.json"


def _summary(cache: Path | None, *args: str, columns: str = "80",
             importtime: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XPROF_NO_CACHE", "COLUMNS")}
    env["COLUMNS"] = columns
    if cache is None:
        env["XPROF_NO_CACHE"] = "1"
    else:
        env["XPROF_CACHE_DIR"] = str(cache)
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "xprof", "summary", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("args", [(), ("--json",), ("--brief",)], ids=["text", "json", "brief"])
def test_a_second_summary_is_the_first_and_imports_no_analysis(tmp_path: Path, args: tuple[str, ...]) -> None:
    first = _summary(tmp_path, str(SAMPLE), *args)
    again = _summary(tmp_path, str(SAMPLE), *args, importtime=True)
    plain = _summary(None, str(SAMPLE), *args)
    assert first.returncode == again.returncode == plain.returncode == 0
    assert again.stdout == first.stdout == plain.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in again.stderr.splitlines() if "|" in line}
    assert "pandas" not in imported and "xprof.analysis" not in imported
    assert len(list((tmp_path / "summary").iterdir())) == 1


def test_another_width_another_file_and_no_cache_are_made_afresh(tmp_path: Path) -> None:
    wide = _summary(tmp_path, str(SAMPLE), columns="120").stdout
    narrow = _summary(tmp_path, str(SAMPLE), columns="80").stdout
    assert wide != narrow and wide == _summary(None, str(SAMPLE), columns="120").stdout
    other = tmp_path / "other.json"
    shutil.copyfile(ROOT / "sample_runs" / "clean_b.json", other)
    assert _summary(tmp_path, str(other)).stdout == _summary(None, str(other)).stdout
    assert len(list((tmp_path / "summary").iterdir())) == 3


def test_xprof_no_cache_writes_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "XPROF_CACHE_DIR": str(tmp_path / "off"), "XPROF_NO_CACHE": "1"}
    out = subprocess.run([sys.executable, "-m", "xprof", "summary", str(SAMPLE)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and "steps" in out.stdout
    assert not (tmp_path / "off").exists()


def test_the_key_follows_the_bytes_the_output_and_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XPROF_NO_CACHE", raising=False)
    monkeypatch.setenv("XPROF_CACHE_DIR", str(tmp_path))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(b'{"x": 1}\n')
    b.write_bytes(b'{"x": 2}\n')
    assert summary_cache.key(str(a), "json") != summary_cache.key(str(b), "json")
    assert summary_cache.key(str(a), "json") != summary_cache.key(str(a), "brief")
    assert summary_cache.key(str(a), "json") == summary_cache.key(str(a), "json")
    monkeypatch.setattr(summary_cache, "code_fingerprint", lambda: "another build")
    assert summary_cache.key(str(a), "json") != summary_cache.key(str(b), "json")
    assert summary_cache.key(str(tmp_path / "missing.json"), "json") is None


def test_a_cache_that_cannot_be_written_is_no_cache(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    out = _summary(blocked, str(SAMPLE))
    assert out.returncode == 0 and out.stdout == _summary(None, str(SAMPLE)).stdout
    assert out.stderr == ""


def test_only_the_newest_entries_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XPROF_NO_CACHE", raising=False)
    monkeypatch.setenv("XPROF_CACHE_DIR", str(tmp_path))
    for n in range(summary_cache.KEEP + 5):
        summary_cache.put(f"{n:064x}", str(n))
        os.utime(tmp_path / "summary" / f"{n:064x}", (n, n))
    kept = sorted(p.name for p in (tmp_path / "summary").iterdir())
    assert len(kept) == summary_cache.KEEP and f"{0:064x}" not in kept
    assert summary_cache.get(f"{summary_cache.KEEP + 4:064x}") == str(summary_cache.KEEP + 4)


RUNS = sorted((ROOT / "sample_runs").glob("*.json")) + sorted((ROOT / "tests" / "corpus" / "runs").glob("*.json"))


def _entries() -> int:
    where = summary_cache.folder()
    return len(list(where.iterdir())) if where is not None and where.exists() else 0


def _cached_equals_uncached(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``xprof summary ARGS`` run twice with the cache on prints what it prints with it off.
    A first run that fills an entry made its output afresh (it is the uncached output); one
    that was served from an entry is checked against an uncached run."""
    from tests.test_cli_report import invoke

    before = _entries()
    first = invoke(["summary", *args], cwd=cwd)
    filled = _entries() > before
    again = invoke(["summary", *args], cwd=cwd)
    assert first.exit_code == again.exit_code == 0, first.output
    assert again.stdout == first.stdout, (args, cwd)
    if not filled:
        monkeypatch.setenv("XPROF_NO_CACHE", "1")
        plain = invoke(["summary", *args], cwd=cwd)
        monkeypatch.delenv("XPROF_NO_CACHE")
        assert first.stdout == plain.stdout, (args, cwd)


def test_cached_output_is_uncached_output_over_every_run_two_names_two_folders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sample and corpus run, under its own name and a copy's, from the checkout and from
    another folder (each path as a user would type it there): text for all, --json and --brief
    for the sample runs. Entries made under one name or folder must never be served to another."""
    monkeypatch.delenv("XPROF_NO_CACHE", raising=False)
    monkeypatch.setenv("XPROF_CACHE_DIR", str(tmp_path / "cache"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert len(RUNS) >= 60
    for run in RUNS:
        copy = elsewhere / "other.json"
        shutil.copyfile(run, copy)
        variants = [[], ["--json"], ["--brief"]] if run.parent.name == "sample_runs" else [[]]
        for extra in variants:
            for name in (run, copy):
                _cached_equals_uncached([os.path.relpath(name, ROOT), *extra], ROOT, monkeypatch)
                _cached_equals_uncached([os.path.relpath(name, elsewhere), *extra], elsewhere, monkeypatch)


def test_the_path_shown_is_the_path_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: a copy of a run summarized after the original names the copy."""
    from tests.test_cli_report import invoke

    monkeypatch.delenv("XPROF_NO_CACHE", raising=False)
    monkeypatch.setenv("XPROF_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copyfile(ROOT / "sample_runs" / "padded_longest.json", tmp_path / "other.json")
    for args in ([], ["--json"], ["--brief"]):
        assert invoke(["summary", "sample_runs/padded_longest.json", *args], cwd=ROOT).exit_code == 0
        res = invoke(["summary", "other.json", *args], cwd=tmp_path)
        assert res.exit_code == 0 and "other.json" in res.stdout
        assert "padded_longest.json" not in res.stdout


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_only_a_regular_file_is_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, special: str) -> None:
    """The key goes through the loaders' door: a device or a FIFO gets no key (the summary then
    refuses it as the loader does), and nothing is opened."""
    monkeypatch.delenv("XPROF_NO_CACHE", raising=False)
    monkeypatch.setenv("XPROF_CACHE_DIR", str(tmp_path / "cache"))
    path = special
    if special == "fifo":
        path = str(tmp_path / "run.json")
        os.mkfifo(path)
    assert summary_cache.key(path, "json") is None
