"""Rebuilding each script of the manifest from its repository, with our edits.

A repository is read from a bare git mirror (``MIRRORS/<owner>+<name>/repo``, what the
``fetch`` tool brings; any ``git clone --mirror`` of it works with ``--mirrors``), at the
pinned commit, so the scripts folder can be rebuilt anywhere without this repository
holding their code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.referee.manifest import Entry


class PrepareError(Exception):
    """A file is missing at the commit, or an edit did not match."""


def git_dir(mirrors: Path, repo: str) -> Path:
    return mirrors / repo.replace("/", "+") / "repo"


def show(mirrors: Path, repo: str, commit: str, path: str) -> str:
    cmd = ["git", f"--git-dir={git_dir(mirrors, repo)}", "show", f"{commit}:{path}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PrepareError(f"{repo}@{commit[:10]}:{path}: {done.stderr.strip()}")
    return done.stdout


def apply_edits(text: str, edits: list[list[str]], where: str) -> str:
    """``text`` with each ``[old, new]`` replaced (every occurrence); an edit that matches
    nothing is an error, so a script that moved on is noticed rather than run unpatched."""
    for old, new in edits:
        if old not in text:
            raise PrepareError(f"{where}: the edit does not match: {old[:60]!r}")
        text = text.replace(old, new)
    return text


def prepare(entry: Entry, mirrors: Path, scripts: Path) -> Path:
    """Write the entry's files under ``scripts/<id>/``; returns the script's path."""
    root = scripts / entry.id
    for path in [entry.path, *entry.extra]:
        text = show(mirrors, entry.repo, entry.commit, path)
        text = apply_edits(text, entry.edits.get(path, []), f"{entry.id}: {path}")
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    unknown = set(entry.edits) - {entry.path, *entry.extra}
    if unknown:
        raise PrepareError(f"{entry.id}: edits for files not copied: {sorted(unknown)}")
    for path, text in entry.files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if entry.setup:
        done = subprocess.run([sys.executable, "-c", entry.setup], cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            raise PrepareError(f"{entry.id}: its setup failed: {done.stderr.strip()[-300:]}")
    return entry.script(scripts)
