"""The HTML report: rendered from a real recorded torch_xla run and from exact synthetic runs.

Synthetic runs are written with the real :class:`RunWriter` and read back with
``load_run`` + ``analyze``, so the report is always tested through the same path the
CLI uses.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from xprof.analysis import analyze
from xprof.report import default_report_path, plots, render_report, write_report
from xprof.report.page import plotly_js
from xprof.runfile import RunWriter, load_run

EVIL = "</script><img src=x onerror=alert(1)>"


# -- helpers ---------------------------------------------------------------------------


def charts_of(page: str) -> dict[str, Any]:
    """The chart data the page hands to plotly.js, parsed strictly (no NaN allowed)."""
    m = re.search(r'<script id="xprof-charts" type="application/json">(.*?)</script>', page, re.S)
    assert m, "chart data block missing"

    def no_constants(name: str) -> Any:
        raise AssertionError(f"non-JSON constant {name} in chart data")

    return json.loads(m.group(1), parse_constant=no_constants)


def synthetic_run(path: Path, steps: int, *, changes: dict[int, int] | None = None,
                  name: str = "synthetic", argv: list[str] | None = None, input_name: str = "input_ids",
                  end: bool = True, sync_at: tuple[int, ...] = (), sync_file: str = "train.py",
                  sync_code: str = "print(loss)", errors: int = 0) -> Path:
    """A run of ``steps`` steps of 1 ms; ``changes`` maps step -> new sequence length, each
    change costing one 500 ms uncached compile at the barrier (step 0 always compiles)."""
    changes = {0: 16, **(changes or {})}
    w = RunWriter(path, {"xprof_version": "0.1.0", "name": name, "started_at": "2026-01-01T00:00:00+00:00",
                         "meta": {"python": "3.11", "torch": "2.9.0", "torch_xla": "2.9.0", "device": "CPU",
                                  "host": "h", "pid": 1, "argv": argv or ["train.py"], "cwd": "/w",
                                  "rank": 0, "world_size": 1, "inputs": True, "syncs": True}})
    t = 1000.0
    sigs: dict[int, int] = {}
    length = changes[0]
    execs: list[list[float]] = []
    for n in range(errors):
        w.write({"type": "error", "t": t, "where": f"hook{n}", "error": f"ValueError: boom {EVIL}",
                 "trace": None})
    if sync_at:
        w.write({"type": "site", "id": 0, "kind": "print", "file": sync_file, "line": 42, "func": "train",
                 "via": None, "code": sync_code})
    for i in range(steps):
        length = changes.get(i, length)
        if length not in sigs:
            sigs[length] = len(sigs)
            w.write({"type": "sig", "id": sigs[length], "inputs": [
                {"name": input_name, "shape": [8, length], "dtype": "int64", "src": "batch"},
                {"name": "labels", "shape": [8, length], "dtype": "int64", "src": "batch"}]}, flush=False)
        t0 = t
        if i in sync_at:
            w.write({"type": "sync", "i": i, "site": 0, "t0": t + 0.0002, "t1": t + 0.0004, "x": 1},
                    flush=False)
        compiled = i in changes
        tb = t0 + 0.0005
        if compiled:
            w.write({"type": "compile", "i": i, "t": tb + 0.25, "ns": 5e8, "at": "barrier"}, flush=False)
        t1 = tb + (0.5 if compiled else 0.0) + 0.001
        execs.append([t1 - 0.0002, 1e6])
        c = {"UncachedCompile" if compiled else "CachedCompile": 1, "ExecuteComputation": 1, "MarkStep": 1}
        rec: dict[str, Any] = {"type": "step", "i": i, "t0": t0, "tb": tb, "t1": t1, "barrier": "sync",
                               "c": c, "sig": sigs[length]}
        rec["bu" if compiled else "bc"] = 1
        if compiled or len(execs) >= 256:
            w.write({"type": "exec", "samples": execs}, flush=False)
            execs = []
        w.write(rec, flush=False)
        t = t1
    if execs:
        w.write({"type": "exec", "samples": execs}, flush=False)
    if end:
        w.write({"type": "end", "t": t, "status": "ok", "exception": None, "steps": steps,
                 "syncs": len(sync_at), "errors": errors})
    w.close()
    return path


# -- a real run ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(device: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six real torch_xla steps on the CPU: the input grows at step 3, one .item() at step 4."""
    import torch
    import torch_xla

    import xprof

    path = tmp_path_factory.mktemp("real") / "tiny.json"
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with xprof.watch(path):
        for step in range(6):
            rows = 4 if step < 3 else 6
            x = torch.randn(rows, 8).to(device)
            loss = model(x).pow(2).mean()
            if step == 4:
                loss.item()
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
    return path


@pytest.fixture(scope="module")
def real_page(real_run: Path) -> tuple[Any, str]:
    analysis = analyze(load_run(real_run))
    return analysis, render_report(analysis)


@pytest.mark.xla
def test_real_run_opens_with_the_answer(real_page: tuple[Any, str]) -> None:
    analysis, page = real_page
    t = analysis.totals
    assert t.steps == 6
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert "This run trained 6 steps in" in text
    assert "Compiling took" in text and "of the wall time" in text
    assert f"uncached compiles of {t.distinct_graphs} distinct graph" in text or t.distinct_graphs == 1
    assert "after warm-up" in text
    assert "implicit host read" in text
    # The sentences come before the findings, which come before the timeline and tables.
    order = [page.index(s) for s in ('id="summary"', 'id="findings"', 'id="timeline-section"',
                                    'id="compiles"', 'id="run"')]
    assert order == sorted(order)


@pytest.mark.xla
def test_real_run_findings_name_the_input_and_the_line(real_page: tuple[Any, str]) -> None:
    analysis, page = real_page
    assert analysis.findings, "the shape change and the .item() should be findings"
    text = html.unescape(page)
    for f in analysis.findings:
        assert f.title in text
        assert f.advice in text
    syncs = [f for f in analysis.findings if f.cause == "implicit_sync"]
    assert syncs and syncs[0].file and syncs[0].file.endswith("test_report.py")
    assert f"test_report.py:{syncs[0].line}" in page
    assert "loss.item()" in page
    shapes = [f for f in analysis.findings if f.input]
    if shapes:
        charts = charts_of(page)
        assert any(k.endswith("-chart") for k in charts), "the input finding has a shape chart"


@pytest.mark.xla
def test_real_run_timeline_marks_every_compile(real_page: tuple[Any, str]) -> None:
    analysis, page = real_page
    charts = charts_of(page)
    fig = charts["timeline"]
    compiled_steps = sorted({int(s) for s in analysis.compiles["step"]})
    bar_x = sorted({x for tr in fig["data"] if tr["type"] == "bar" for x in tr["x"]})
    assert set(compiled_steps) <= set(bar_x)
    assert 3 in compiled_steps, "the new input shape at step 3 compiled"
    exe = next(tr for tr in fig["data"] if tr.get("name") == "execute ms")
    assert exe["x"] == list(range(6))
    # the compile table lists those steps
    table = page[page.index('id="compiles"'):page.index('id="run"')]
    for s in compiled_steps:
        assert f'<td class="num">{s}</td>' in table


@pytest.mark.xla
def test_plotly_is_inlined_and_nothing_is_fetched(real_page: tuple[Any, str]) -> None:
    _, page = real_page
    bundle = plotly_js()
    assert "plotly.js v" in bundle[:200] and len(bundle) > 1_000_000
    assert f"<script>{bundle}</script>" in page
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    assert not re.search(r"<link[^>]*\bhref\s*=", page, re.I)
    ours = page.replace(bundle, "")
    assert "http://" not in ours and "https://" not in ours, "only plotly.js itself names URLs"
    assert page.count("<script") == 3 and page.count("</script>") == 3


# -- exact synthetic runs --------------------------------------------------------------


def test_every_value_from_the_run_is_escaped(tmp_path: Path) -> None:
    path = synthetic_run(tmp_path / "evil.json", 12, changes={5: 20, 9: 24}, name=EVIL,
                         argv=["train.py", EVIL], input_name=EVIL, sync_at=(2, 3, 4, 6, 7),
                         sync_file=f"/src/{EVIL}.py", sync_code=f"print({EVIL!r})", errors=1)
    analysis = analyze(load_run(path))
    page = render_report(analysis)
    assert "<img" not in page
    assert "onerror=alert(1)>" not in page
    assert page.count("</script>") == 3
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    charts = charts_of(page)  # the JSON block still parses
    blob = json.dumps(charts)
    assert "<img" not in page[page.index('id="xprof-charts"'):]
    assert EVIL in blob or html.escape(EVIL) in blob  # the value survives, as text
    # the default file name is made safe too
    p = default_report_path(EVIL)
    assert p.parent == Path("reports") and "/" not in p.name and "<" not in p.name


def test_long_run_is_downsampled_but_keeps_every_compile(tmp_path: Path) -> None:
    n = 12_000
    changes = {k: 16 + (k // 997) % 7 for k in range(997, n, 997)}
    path = synthetic_run(tmp_path / "long.json", n, changes=changes)
    analysis = analyze(load_run(path))
    assert analysis.totals.steps == n
    fig = plots.timeline_figure(analysis)
    assert fig is not None and fig["layout"]["meta"]["bucketed"] is True
    lines = [tr for tr in fig["data"] if tr["type"] == "scatter" and tr.get("mode") == "lines"]
    assert lines and all(len(tr["x"]) <= plots.BUCKETS for tr in lines)
    bar_x = {x for tr in fig["data"] if tr["type"] == "bar" for x in tr["x"]}
    compiled = {int(s) for s in analysis.compiles["step"]}
    assert compiled == {0, *changes}
    assert compiled <= bar_x
    page = render_report(analysis)
    data_bytes = len(page) - len(plotly_js())
    assert data_bytes < 600_000, f"{data_bytes} bytes of report beyond plotly.js for {n} steps"
    assert "mean and the maximum of each run of" in page


def test_short_run_is_not_downsampled(tmp_path: Path) -> None:
    analysis = analyze(load_run(synthetic_run(tmp_path / "s.json", 40, changes={20: 24})))
    fig = plots.timeline_figure(analysis)
    assert fig is not None and fig["layout"]["meta"]["bucketed"] is False
    exe = next(tr for tr in fig["data"] if tr.get("name") == "execute ms")
    assert exe["x"] == list(range(40))


def test_incomplete_run_has_a_banner_and_profiler_errors_are_shown(tmp_path: Path) -> None:
    path = synthetic_run(tmp_path / "cut.json", 10, changes={4: 20}, end=False, errors=2)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"type":"step","i":10,"t0":')  # killed mid-write
    analysis = analyze(load_run(path))
    page = render_report(analysis)
    assert 'id="banner"' in page and "Incomplete run" in page
    assert "cut off mid-write" in page
    assert "Profiler errors" in page and "hook0" in page
    complete = render_report(analyze(load_run(synthetic_run(tmp_path / "ok.json", 10))))
    assert 'id="banner"' not in complete and "Profiler errors" not in complete


def test_clean_run_says_nothing_to_change(tmp_path: Path) -> None:
    analysis = analyze(load_run(synthetic_run(tmp_path / "clean.json", 30)))
    page = render_report(analysis)
    assert "Nothing recompiled after warm-up" in page
    assert "Nothing to change" in page or "Nothing costly to change" in page


def test_host_reads_table_and_what_if(tmp_path: Path) -> None:
    path = synthetic_run(tmp_path / "pad.json", 40, changes={5: 20, 9: 24, 13: 17, 21: 31},
                         sync_at=tuple(range(0, 40, 5)))
    analysis = analyze(load_run(path))
    page = render_report(analysis)
    assert 'id="syncs"' in page and "train.py:42" in page and "print(loss)" in page
    pad = [f for f in analysis.findings if f.input == "input_ids"]
    assert pad, [f.title for f in analysis.findings]
    if pad[0].what_if:
        assert 'class="whatif"' in page
        for row in pad[0].what_if:
            assert str(row["strategy"]) in html.unescape(page)


def test_write_report_creates_the_folder_and_replaces_atomically(tmp_path: Path) -> None:
    analysis = analyze(load_run(synthetic_run(tmp_path / "w.json", 5)))
    out = write_report(analysis, tmp_path / "deep" / "er" / "r.html")
    assert out.exists() and out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temp file left
    assert default_report_path("my run/1") == Path("reports") / "my_run_1.html"


def test_a_run_with_no_steps_still_renders(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"format": "xprof-run", "version": 1, "name": "empty"}\n', encoding="utf-8")
    page = render_report(analyze(load_run(path)))
    assert "recorded no training steps" in page
    assert "No steps were recorded." in page and "Incomplete run" in page
    charts_of(page)


def test_every_finding_cause_has_a_label_and_a_colour() -> None:
    from xprof.diagnosis.registry import FINDING_CAUSES
    from xprof.report.prose import CAUSE_COLORS, CAUSE_LABELS

    assert "eager_mode" in FINDING_CAUSES and "warmup" not in FINDING_CAUSES
    assert set(FINDING_CAUSES) <= set(CAUSE_LABELS) and set(FINDING_CAUSES) <= set(CAUSE_COLORS)
