"""Run files are untrusted input: every output shows their strings and obeys none of them.

Unit tests pin the three reported cases (terminal escapes, PR-comment Markdown, a line
nested 200,000 deep); one property test records a real torch_xla run once, puts
adversarial strings in every string field of it and checks every output.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import xprof.cli.commands  # noqa: F401  (registers the commands)
from xprof.cli.app import app
from xprof.runfile import RunWriter, load_run
from xprof.untrusted import md_code, visible

TERMINAL_PAYLOAD = "demo\x1b[2J\x1b]8;;http://evil\x07link"
MARKDOWN_PAYLOAD = "a|b @octo/team ![t](http://evil/p.png) <img src=x onerror=alert(1)>"

# Characters a terminal acts on: C0 (tab and newline aside), DEL, C1.
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _cli(args: list[str]) -> Any:
    res = CliRunner().invoke(app, args, env={"COLUMNS": "140"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res


# -- the helpers ------------------------------------------------------------------------

def test_visible_shows_every_active_character_as_an_escape() -> None:
    assert visible(TERMINAL_PAYLOAD) == "demo\\x1b[2J\\x1b]8;;http://evil\\x07link"
    assert visible("a\rb\x00c\x7fd\x9be\u202ef") == "a\\x0db\\x00c\\x7fd\\x9be\\u202ef"
    assert visible("tab\tand\nnewline") == "tab\tand\nnewline"
    assert visible("tab\tand\nnewline", one_line=True) == "tab\\x09and\\x0anewline"
    assert visible("naïve café 日本語 ✓") == "naïve café 日本語 ✓"


@pytest.mark.parametrize("text, span", [
    ("x", "`x`"), ("a`b", "``a`b``"), ("`start", "`` `start ``"), ("``", "``` `` ```"),
    ("a|b", "`a|b`"), ("", ""),
])
def test_md_code_fences_past_the_backticks_inside(text: str, span: str) -> None:
    assert md_code(text) == span


def test_md_code_in_a_table_escapes_the_pipe() -> None:
    assert md_code("a|b", in_table=True) == "`a\\|b`"


# -- the three reported cases -------------------------------------------------------------

def _run_file(path: Path, name: str, code: str) -> Path:
    w = RunWriter(path, {"xprof_version": "0.1.0", "name": name, "started_unix": 1.0,
                         "meta": {"device": "CPU", "torch_xla": "2.9.0"}})
    w.write({"type": "site", "id": 0, "kind": "item", "file": "/w/train.py", "line": 7, "func": "main",
             "via": None, "code": code})
    for i in range(6):
        w.write({"type": "step", "i": i, "t0": 1.0 + i, "tb": 1.5 + i, "t1": 1.9 + i, "barrier": "mark_step",
                 "c": {"CachedCompile": 1, "ExecuteComputation": 1}, "bc": 1})
        w.write({"type": "sync", "i": i, "site": 0, "t0": 1.1 + i, "t1": 1.2 + i, "x": 1})
    w.write({"type": "end", "t": 8.0, "status": "ok", "exception": None, "steps": 6, "syncs": 6, "errors": 0})
    w.close()
    return path


def test_summary_shows_escapes_instead_of_sending_them(tmp_path: Path) -> None:
    run = _run_file(tmp_path / "r.json", TERMINAL_PAYLOAD, "loss.item()  \x1b[31m# red")
    out = _cli(["summary", str(run)]).output
    assert not _RAW_CONTROL.search(out)
    assert "demo\\x1b[2J\\x1b]8;;http://evil\\x07link" in out
    assert "\\x1b[31m# red" in out


def test_markdown_puts_run_strings_in_code_spans(tmp_path: Path) -> None:
    a = _run_file(tmp_path / "a.json", MARKDOWN_PAYLOAD, "loss.item()")
    b = _run_file(tmp_path / "b.json", "b", "loss.item()")
    md = _cli(["compare", str(a), str(b), "--markdown"]).output
    assert "`a\\|b @octo/team ![t](http://evil/p.png) <img src=x onerror=alert(1)>`" in md
    assert _live_markup(md) == []


def test_a_line_nested_200000_deep_is_one_skipped_line(tmp_path: Path) -> None:
    run = _run_file(tmp_path / "r.json", "deep", "x")
    lines = run.read_text().splitlines(keepends=True)
    lines.insert(3, "[" * 200_000 + "\n")
    lines.insert(4, '{"type": "step", "i": ' + "9" * 10_000 + "}\n")  # past Python's int-digit limit
    run.write_text("".join(lines))
    loaded = load_run(run)
    assert len(loaded.steps) == 6 and loaded.skipped_lines == 2 and loaded.complete
    res = _cli(["summary", str(run)])
    assert res.exit_code == 0 and "2 unreadable lines" in res.output


def test_a_header_nested_too_deep_refuses_the_file_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 200_000 + "\n")
    res = _cli(["summary", str(bad)])
    assert res.exit_code == 2 and res.output.startswith("xprof: error: ") and res.output.count("\n") == 1


# -- one real run, adversarial strings in every field ------------------------------------------

_OWN_FOLD = re.compile(r"<details><summary>[A-Za-z ]+\(\d+\)</summary>\n|</details>\n")
"""compare --markdown's own fold, in its own words only (no run-file string inside)."""


def _live_markup(md: str) -> list[str]:
    """What GitHub would act on outside code spans: HTML, links, images, mentions, bare URLs."""
    from markdown_it import MarkdownIt

    found: list[str] = []

    def walk(tokens: list[Any]) -> None:
        for t in tokens:
            if t.type in ("html_inline", "html_block", "image", "link_open") and not _OWN_FOLD.fullmatch(t.content):
                found.append(f"{t.type}: {t.content or t.attrs}")
            if t.type == "text" and re.search(r"@\w|https?:|www\.", t.content, re.I):
                found.append(f"text: {t.content}")
            if t.type == "tr_open":
                rows.append(0)
            if t.type in ("th_open", "td_open"):
                rows[-1] += 1
            if t.children:
                walk(t.children)

    rows: list[int] = []
    walk(MarkdownIt("commonmark", {"html": True}).enable("table").parse(md))
    if len(set(rows)) > 1:
        found.append(f"table rows of different widths: {rows}")
    return found


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.handlers: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.scripts += tag == "script"
        self.handlers += [k for k, _ in attrs if k.startswith("on")]


def _page_tags(page: str) -> _Tags:
    from xprof.report.page import plotly_js

    parser = _Tags()
    parser.feed(page.replace(plotly_js(), ""))
    return parser


@pytest.fixture(scope="module")
def real_records(device: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A real recording (torch_xla on the CPU): a shape change, an .item() and a print."""
    import torch
    import torch_xla

    import xprof

    path = tmp_path_factory.mktemp("real") / "real.json"
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(device)
    with xprof.watch(path, name="real"):
        for i in range(6):
            x = torch.randn(4 if i < 4 else 2, 5).to(device)
            loss = model(x).pow(2).mean()
            loss.backward()
            if i == 3:
                print(f"loss {loss}")
            loss.item()
            torch_xla.sync()
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def clean_tags(real_records: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The tags of the report of the real run with plain strings: all a page may have."""
    from xprof.analysis import analyze
    from xprof.report import render_report

    return _page_tags(render_report(analyze(load_run(_clean_path(real_records, tmp_path_factory.mktemp("c")))))).tags


FRAGMENTS = ["\x1b[2J", "\x1b]8;;http://evil\x07", "\x07", "\r", "\x9b", "\x00", "\x7f", "\u202e", "\t", "\n",
             "`", "``", "|", "@octo/team", "![t](http://evil/p.png)", "[x](http://e)", "<img src=x onerror=1>",
             "</script><script>alert(1)</script>", "<!--", "&amp;", "*", "_", "#", "\\", "\"", "'", "{{ x }}",
             "www.evil.com", "a", " ", "日本", "\udce9", "\ud800", "caf\udcc3\udca9", "\x00\x00"]
PAYLOADS = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6).map("".join),
    st.text(st.characters(), min_size=1, max_size=20),  # lone surrogates (category Cs) too
)
_STRUCTURE = {"type", "format"}


def _poison(value: Any, payload: str) -> Any:
    if isinstance(value, str):
        return payload
    if isinstance(value, list):
        return [_poison(v, payload) for v in value]
    if isinstance(value, dict):
        return {k: (v if k in _STRUCTURE else _poison(v, payload)) for k, v in value.items()}
    return value


def _poisoned_file(records: list[dict[str, Any]], payload: str, path: Path) -> str:
    """The real run with ``payload`` in every string field; the name is ``n`` + payload."""
    name = "n" + payload
    out = []
    for rec in records:
        rec = _poison(rec, payload)
        if rec.get("format"):
            rec["name"] = name
        if rec.get("type") == "step" and rec.get("i") == 2:
            rec["c"] = {**rec.get("c", {}), f"aten::{payload}": 1}  # a CPU-fallback op of that name
        out.append(json.dumps(rec))
    path.write_text("\n".join(out) + "\n")
    return name


@pytest.mark.xla
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=PAYLOADS)
def test_adversarial_strings_in_every_field_are_safe_in_every_output(
        real_records: list[dict[str, Any]], clean_tags: set[str], tmp_path: Path, payload: str) -> None:
    from xprof.analysis import analyze
    from xprof.report import render_report
    from xprof.report.trace import chrome_trace

    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    run_path = folder / "run.json"
    name = _poisoned_file(real_records, payload, run_path)
    clean = _clean_path(real_records, folder)
    run = load_run(run_path)
    assert run.name == name and run.skipped_lines == 0

    # terminal: summary, compare, ranks
    ranks = folder / "ranks"
    ranks.mkdir()
    for k in (0, 1):
        shutil.copy(run_path, ranks / f"run.rank{k}.json")
    for args in (["summary", str(run_path)], ["compare", str(run_path), str(clean)],
                 ["ranks", str(ranks)], ["summary", str(ranks)]):
        res = _cli(args)
        assert res.exit_code == 0, res.output
        assert not _RAW_CONTROL.search(res.output), (args, res.output)

    # --json: valid, and the string comes back as it was
    doc = json.loads(_cli(["summary", str(run_path), "--json"]).output)
    assert doc["name"] == name
    cmp = json.loads(_cli(["compare", str(run_path), str(clean), "--json"]).output)
    assert [r["name"] for r in cmp["runs"]] == [name, "nplain"]

    # --markdown: nothing live outside code spans, tables line up
    md = _cli(["compare", str(run_path), str(clean), "--markdown"]).output
    assert _live_markup(md) == [], md

    # HTML: no tag or handler the clean page does not have, the page's own three scripts only
    analysis = analyze(run)
    page = _page_tags(render_report(analysis))
    assert page.tags <= clean_tags and not page.handlers and page.scripts == 3

    # Chrome trace: valid JSON that carries the name back
    trace = json.loads(json.dumps(chrome_trace(run)))
    assert trace["otherData"]["run"] == name


def _clean_path(records: list[dict[str, Any]], folder: Path) -> Path:
    path = folder / "clean.json"
    _poisoned_file(records, "plain", path)
    return path


# -- a folder name that is not UTF-8 ------------------------------------------------------------

def test_a_name_that_is_not_utf8_shows_its_escapes_and_exits_0(tmp_path: Path) -> None:
    """The recorder writes a non-UTF-8 folder name as ``\\udce9`` escapes (valid JSON); every
    output shows them as text, with a strict UTF-8 stdout, wherever the file itself lies."""
    import os
    import subprocess

    from tests.test_cli_report import XPROF
    from xprof.runcolumns import load_columns

    folder = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    run = _run_file(folder / "r.json", "caf\udce9", "loss.item()")
    lines = run.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace('"/w/train.py"', '"/w/caf\\udce9/train.py"')
    run.write_text("".join(lines), encoding="utf-8")
    assert load_columns(run, engine="duckdb").run.sites[0].file == "/w/caf\udce9/train.py"
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"}
    for args in (["summary", str(run)], ["compare", str(run), str(run)],
                 ["compare", str(run), str(run), "--markdown"],
                 ["compare", str(run), str(run), "-o", str(tmp_path / "c.md")],
                 ["report", str(run), "-o", str(tmp_path / "r.html")]):
        proc = subprocess.run([str(XPROF), *args], capture_output=True, timeout=120, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        if "-o" not in args:
            assert b"caf\\udce9" in proc.stdout, (args, proc.stdout)
    assert "caf\\udce9" in (tmp_path / "c.md").read_text(encoding="utf-8")
    assert "caf\\udce9" in (tmp_path / "r.html").read_text(encoding="utf-8")


# -- impossible numbers in every numeric field ------------------------------------------------

NUMBERS = [-1, -3.5, float("nan"), float("inf"), float("-inf"), 1e300, 2 ** 63, 10 ** 30, -(2 ** 63)]


def _numeric_keys(records: list[dict[str, Any]]) -> list[str]:
    """Every key that holds a number, or numbers, somewhere in the run (``c``, ``samples``,
    ``shape`` included)."""
    keys: set[str] = set()

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key is not None:
            keys.add(key)

    for rec in records:
        walk(rec, None)
    return sorted(keys - {"version"})


def _with_number(value: Any, key: str, number: float, inside: bool = False) -> Any:
    if isinstance(value, dict):
        return {k: _with_number(v, key, number, inside or k == key) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_number(v, key, number, inside) for v in value]
    if inside and isinstance(value, (int, float)) and not isinstance(value, bool):
        return number
    return value


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.xla
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_impossible_numbers_in_any_field_are_counted_never_shown(
        real_records: list[dict[str, Any]], tmp_path: Path, data: st.DataObject) -> None:
    import warnings

    from xprof.report.trace import chrome_trace

    key = data.draw(st.sampled_from(_numeric_keys(real_records)), label="key")
    number = data.draw(st.sampled_from(NUMBERS), label="number")
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path, clean = folder / "run.json", _clean_path(real_records, folder)
    path.write_text("".join(json.dumps(_with_number(r, key, number)) + "\n" for r in real_records))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a numpy warning on stderr is a failure
        res = _cli(["summary", str(path)])
        assert res.exit_code == 0, res.output
        assert not _RAW_CONTROL.search(res.output)
        shown = " ".join(res.output.split()).replace("negative, NaN or infinite", "")  # (the note's words)
        assert not re.search(r"\b(nan|inf)\b", shown, re.I), res.output
        doc = _strict_json(_cli(["summary", str(path), "--json"]).output)
        run = load_run(path)
        assert (run.impossible > 0) == any("impossible values" in n for n in doc["notes"])
        assert _cli(["report", str(path), "-o", str(folder / "r.html")]).exit_code == 0
        _strict_json(json.dumps(chrome_trace(run), allow_nan=False))
        cmp = _cli(["compare", str(clean), str(path)])
        assert cmp.exit_code == (2 if run.impossible else 0), cmp.output
