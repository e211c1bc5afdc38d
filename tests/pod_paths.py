"""The pod tests run twice: on the run files alone, and with a digest beside every run file
(``xprof digest`` run just before each command), so every pod behaviour is checked on both
paths. A test module takes it by importing :func:`read_path` (an autouse fixture) and
calling :func:`invoke` for its commands."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from typer.testing import CliRunner

from xprof.cli import commands  # noqa: F401  (registers the commands)
from xprof.cli.app import app

_DIGESTS = {"on": False}


@pytest.fixture(autouse=True, params=["run_files", "digests"])
def read_path(request: Any) -> Iterator[str]:
    _DIGESTS["on"] = request.param == "digests"
    yield request.param
    _DIGESTS["on"] = False


def digesting() -> bool:
    return _DIGESTS["on"]


def digest_all(paths: Sequence[str]) -> None:
    """Write (or refresh) the digest of every run file in ``paths`` (folders and files); a file
    that cannot be digested (a garbage rank) is left without one, as it would be in a pod."""
    named = [p for p in paths if os.path.isdir(p) or (os.path.isfile(p) and p.endswith(".json"))]
    if named:
        res = CliRunner().invoke(app, ["digest", *named])
        assert "Traceback" not in res.output, res.output


def invoke(args: Sequence[str], **kwargs: Any) -> Any:
    """The command, on the path of this run of the test (its digests written first)."""
    if not digesting():
        return CliRunner().invoke(app, list(args), **kwargs)
    digest_all(list(args))
    res = CliRunner().invoke(app, list(args), **kwargs)
    if res.exit_code == 0 and args[0] in ("summary", "ranks"):
        _check_read_from_digests(args, res)
    return res


def _check_read_from_digests(args: Sequence[str], res: Any) -> None:
    """A pod view on this path says it read its ranks from their digests."""
    if "--json" in args:
        doc = json.loads(res.stdout)
        if "read_from" in doc:
            assert doc["read_from"]["digests"], doc["read_from"]
    elif "Ranks (" in res.output:
        assert "read from digests: " in res.output, res.output
