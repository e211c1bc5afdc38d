"""The HTML reports in a real browser: headless Chromium, driven over the DevTools protocol.

Each report (``xprof demo``, ``xprof compare -o``) is made with the real CLI, opened
from ``file://`` (offline, as a user opens a mailed report) and checked for: no console
error or uncaught exception, every plot div rendered to SVG by the inlined plotly, the
findings and their "What to change" advice on the page. A full-page screenshot is saved
under ``reports/``.

The browser is Debian's ``chromium`` (``apt-get install -y chromium``), driven through
``--remote-debugging-pipe``: DevTools messages are NUL-terminated JSON on file
descriptors 3 and 4, so no websocket or selenium package is needed. The tests skip, with
the reason, only when no Chromium or Chrome binary can be found.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> str | None:
    env = os.environ.get("XPROF_BROWSER")
    if env and os.path.exists(env):
        return env
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """A headless Chromium and one page, spoken to over the DevTools pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_r, self._to_w = os.pipe()  # we write, chromium reads on fd 3
        self._from_r, from_w = os.pipe()  # chromium writes on fd 4, we read

        def child_fds() -> None:
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-extensions", "--no-first-run", "--no-default-browser-check",
             "--disable-dev-shm-usage", "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--window-size=1280,2000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=child_fds, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        return self._next_id

    def _read_one(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_r], [], [], left)
            if ready:
                chunk = os.read(self._from_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return dict(json.loads(raw))

    def call(self, method: str, params: dict[str, Any] | None = None, *, page: bool = True,
             timeout: float = 60) -> dict[str, Any]:
        msg_id = self._send(method, params, self.session if page else None)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_one(deadline)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        for ev in self.events:
            if ev["method"] == method:
                return ev
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_one(deadline)
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg

    def open(self, url: str, width: int = 1280, mobile: bool = False) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 page=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": 1000 if width > 600 else 800, "deviceScaleFactor": 1,
                   "mobile": mobile})
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]  # an earlier page's
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path, first_screen: bool = False) -> None:
        """The whole page, or only what shows before any scrolling (``first_screen``)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": not first_screen}
        data = self.call("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors seen so far."""
        out = []
        for ev in self.events:
            p = ev.get("params", {})
            if ev["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
            elif ev["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                        for a in p.get("args", [])))
            elif ev["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url', '')})")
        return out

    def close(self) -> None:
        try:
            self.call("Browser.close", page=False, timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_w, self._from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture(scope="module")
def browser_binary() -> str:
    binary = find_browser()
    if binary is None:
        pytest.skip("no Chromium/Chrome found (install Debian's `chromium`, or set XPROF_BROWSER)")
    return binary


@pytest.fixture
def chromium(browser_binary: str, tmp_path: Path) -> Iterator[Chromium]:
    c = Chromium(browser_binary, tmp_path / "profile")
    try:
        yield c
    finally:
        c.close()


def _xprof(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("xprof")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "xprof"]
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


PAGE_FACTS = """(() => {
  const charts = [...document.querySelectorAll('div.chart, div[id^="chart-"]')];
  const visible = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  return {
    plotly: typeof window.Plotly !== 'undefined',
    charts: charts.length,
    charts_with_svg: charts.filter(d => d.querySelector('svg.main-svg')).length,
    chart_ids: charts.filter(d => !d.querySelector('svg.main-svg')).map(d => d.id),
    traces: charts.reduce((n, d) => n + d.querySelectorAll('g.trace').length, 0),
    findings: [...document.querySelectorAll('#findings article.card')].filter(visible).length,
    advice: [...document.querySelectorAll('#findings .advice')].filter(visible)
              .map(a => a.innerText.trim()),
    text: document.body.innerText,
    external: [...document.querySelectorAll('script[src], link[href]')].map(e => e.src || e.href),
  };
})()"""


def _settle(chromium: Chromium) -> dict[str, Any]:
    """Page facts once plotly has drawn (it draws synchronously after load; allow a little)."""
    facts: dict[str, Any] = {}
    for _ in range(20):
        facts = chromium.evaluate(PAGE_FACTS)
        if facts["charts"] and facts["charts_with_svg"] == facts["charts"]:
            break
        time.sleep(0.25)
    return facts


@pytest.mark.xla
@pytest.mark.slow
def test_demo_report_renders_in_chromium(chromium: Chromium, tmp_path: Path) -> None:
    pytest.importorskip("torch_xla")
    html = tmp_path / "demo.html"
    proc = _xprof("demo", "-o", str(html), "--steps", "20")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert html.exists()
    chromium.open(html.resolve().as_uri())
    facts = _settle(chromium)
    chromium.screenshot(REPORTS / "browser-demo.png")
    assert chromium.console_errors() == []
    assert facts["plotly"], "plotly.js did not load from the inlined script"
    assert facts["external"] == [], "the report must not load anything from outside the file"
    assert facts["charts"] >= 1
    assert facts["charts_with_svg"] == facts["charts"], f"plots not rendered: {facts['chart_ids']}"
    assert facts["traces"] >= 1
    assert facts["findings"] >= 1, "no finding visible in the demo report"
    assert facts["advice"] and all(a.startswith("What to change:") and len(a) > 20 for a in facts["advice"])
    assert "Findings" in facts["text"] and "Step timeline" in facts["text"]
    assert (REPORTS / "browser-demo.png").stat().st_size > 10_000


def _has_compare_output() -> bool:
    proc = _xprof("compare", "--help", timeout=60)
    return proc.returncode == 0 and ("--output" in proc.stdout or "-o" in proc.stdout)


def test_compare_report_renders_in_chromium(chromium: Chromium, tmp_path: Path) -> None:
    base = ROOT / "sample_runs" / "padded_fixed.json"
    new = ROOT / "sample_runs" / "padded_longest.json"
    if not (base.exists() and new.exists()):
        pytest.skip("sample_runs/padded_fixed.json and padded_longest.json are not there")
    if not _has_compare_output():
        pytest.skip("`xprof compare -o` is not built yet")
    html = tmp_path / "compare.html"
    proc = _xprof("compare", str(base), str(new), "-o", str(html), timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: a regression, which this pair is
    assert html.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    chromium.open(html.resolve().as_uri())
    facts = _settle(chromium)
    chromium.screenshot(REPORTS / "browser-compare.png")
    assert chromium.console_errors() == []
    assert facts["plotly"] and facts["external"] == [], "the report must be self-contained"
    assert facts["charts"] >= 1
    assert facts["charts_with_svg"] == facts["charts"], f"plots not rendered: {facts['chart_ids']}"
    assert "padded_longest" in facts["text"] and "padded_fixed" in facts["text"]
    assert (REPORTS / "browser-compare.png").stat().st_size > 10_000
    assert_plots_inside_their_cards(chromium)
    chromium.open(html.resolve().as_uri(), width=390, mobile=True)
    _settle(chromium)
    chromium.screenshot(REPORTS / "browser-compare-phone.png")
    assert_plots_inside_their_cards(chromium)
    page = chromium.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert page[0] <= page[1], f"the page is {page[0]} px wide at a {page[1]} px phone width"


PLOT_BOXES = """[...document.querySelectorAll('div.chart, div[id^="chart-"]')].map(d => {
  const card = d.closest('.card') || d.parentElement, cs = getComputedStyle(card);
  const c = card.getBoundingClientRect(), s = d.querySelector('svg.main-svg').getBoundingClientRect();
  return {id: d.id, left: c.left + parseFloat(cs.paddingLeft) + parseFloat(cs.borderLeftWidth),
          right: c.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth),
          svg_left: s.left, svg_right: s.right, viewport: window.innerWidth};
})"""


def assert_plots_inside_their_cards(chromium: Chromium) -> None:
    """Every plot drawn inside its card's padding (none cut off by it) and inside the window."""
    boxes = chromium.evaluate(PLOT_BOXES)
    assert boxes, "no plot on the page"
    for b in boxes:
        assert b["left"] - 0.5 <= b["svg_left"] and b["svg_right"] <= b["right"] + 0.5, b
        assert b["svg_right"] <= b["viewport"], b


def test_sample_report_renders_in_chromium(chromium: Chromium, tmp_path: Path) -> None:
    """``xprof report`` of a committed sample run (no torch needed): the same checks, fast."""
    run = ROOT / "sample_runs" / "padded_longest.json"
    if not run.exists():
        pytest.skip("sample_runs/padded_longest.json is not there")
    html = tmp_path / "padded_longest.html"
    proc = _xprof("report", str(run), "-o", str(html), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    chromium.open(html.resolve().as_uri())
    facts = _settle(chromium)
    chromium.screenshot(REPORTS / "browser-report.png")
    chromium.screenshot(REPORTS / "report-first-screen.png", first_screen=True)  # the README's picture
    assert chromium.console_errors() == []
    assert facts["plotly"] and facts["external"] == []
    assert facts["charts"] >= 1 and facts["charts_with_svg"] == facts["charts"], facts["chart_ids"]
    assert facts["findings"] >= 1
    assert any("pad" in a.lower() for a in facts["advice"]), facts["advice"]


def test_a_graph_diff_and_a_what_if_fit_a_phone(chromium: Chromium, tmp_path: Path) -> None:
    """A finding with --explain's table of graph changes and a what-if table (a Trainer
    padding per batch, recorded with the mode on): both on the page, and at a phone's width
    the page is no wider than the screen (the tables scroll or wrap inside their cards)."""
    html = tmp_path / "trainer.html"
    proc = _xprof("report", str(ROOT / "tests" / "corpus" / "runs" / "trainer_padded_eval.json"), "-o", str(html),
                  timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for width, mobile in ((1280, False), (390, True)):
        chromium.open(html.resolve().as_uri(), width=width, mobile=mobile)
        _settle(chromium)
        tables = chromium.evaluate("[document.querySelectorAll('table.graphdiff').length, "
                                   "document.querySelectorAll('table.whatif').length]")
        assert tables[0] >= 1 and tables[1] >= 2, tables
        page = chromium.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert page[0] <= page[1], f"the page is {page[0]} px wide at a {page[1]} px width"
        for t in chromium.evaluate(TABLE_BOXES):
            # inside the card, or in a box that scrolls sideways (never cut off by the card)
            assert t["right"] <= t["card_right"] + 0.5 or t["scrolls"], t
            assert not t["graphdiff"] or t["right"] <= t["card_right"] + 0.5, t  # its cells wrap
    chromium.screenshot(REPORTS / "browser-report-phone.png")


TABLE_BOXES = """[...document.querySelectorAll('table.whatif')].map(t => {
  const card = t.closest('.card'), c = card.getBoundingClientRect(), cs = getComputedStyle(card);
  const box = t.parentElement;
  return {right: t.getBoundingClientRect().right, graphdiff: t.classList.contains('graphdiff'),
          card_right: c.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth),
          scrolls: getComputedStyle(box).overflowX === 'auto' && box.getBoundingClientRect().right <= c.right};
})"""


def test_harness_sees_console_errors_and_exceptions(chromium: Chromium, tmp_path: Path) -> None:
    """The checks above mean something only if the harness catches a broken page."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><div class='chart' id='c'></div><script>console.error('boom');"
                    "undefinedFunction();</script></body></html>")
    chromium.open(page.resolve().as_uri())
    facts = chromium.evaluate(PAGE_FACTS)
    errors = chromium.console_errors()
    assert any("boom" in e for e in errors), errors
    assert any("undefinedFunction" in e for e in errors), errors
    assert facts["charts"] == 1 and facts["charts_with_svg"] == 0
