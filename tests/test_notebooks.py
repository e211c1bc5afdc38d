"""The notebooks under ``tests/notebooks/``, run in a real Jupyter kernel on torch_xla's CPU backend.

``nbclient`` starts the ``python3`` kernel (ipykernel's own kernelspec, installed into the
virtual environment with the ``dev`` extra: jupyter_client launches it with this interpreter)
and runs every cell; the assertions read the executed notebook's outputs as a notebook shows
them: the streams written while a cell ran, the rich outputs (``text/html``) and the errors.
Each notebook is run once (one kernel start) and its outputs shared by the tests of this file.
The browser test opens the padding notebook exported to HTML (nbconvert's JupyterLab page)
in headless Chromium and opens its full report; its screenshot is the README's.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.xla, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "tests" / "notebooks"
REPORTS = ROOT / "reports"
PLOTLY_BANNER = "* plotly.js v"
"""The first line of plotly.js's bundle: counts the copies in a notebook."""


def _execute(name: str, cwd: Path, allow_errors: bool = False) -> Any:
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install 'xprof-lazy[dev]')")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install 'xprof-lazy[dev]')")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install 'xprof-lazy[dev]')")
    pytest.importorskip("torch_xla")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300, allow_errors=allow_errors,
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()
    (cwd / f"{name}.executed.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
    return nb


@pytest.fixture(scope="module")
def padding(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    cwd = tmp_path_factory.mktemp("padding")
    return _execute("padding", cwd), cwd


def _code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


def _html(outputs: list[Any]) -> list[str]:
    return [html.unescape(o["data"]["text/html"]) for o in outputs
            if o["output_type"] in ("display_data", "execute_result") and "text/html" in o.get("data", {})]


def _all_text(nb: Any) -> str:
    """Every output of every cell as one string (streams, plain and HTML data, errors)."""
    parts: list[str] = []
    for cell in _code_cells(nb):
        for o in cell.outputs:
            parts.append(o.get("text", ""))
            parts.extend(str(v) for v in o.get("data", {}).values())
            parts.extend(o.get("traceback", []))
    return "\n".join(parts)


def _no_xprof_trouble(nb: Any) -> None:
    text = _all_text(nb)
    assert "Traceback" not in text or "ValueError" in text, text[-3000:]
    assert not re.search(r"xprof/(recorder|notebook|report|analysis)/?\w*\.py", text), \
        "an xprof frame or warning reached the cell"
    assert "xprof: no summary" not in text and "not shown (" not in text and "not set up (" not in text


def _first_finding(path: Path) -> Any:
    from xprof.analysis import analyze
    from xprof.report import prose
    from xprof.runfile import load_run

    costly = prose.costly(analyze(load_run(path)))
    assert costly, f"{path} has no costly finding"
    return costly[0]


def test_padding_notebook_shows_live_notices_then_the_summary(padding: tuple[Any, Path]) -> None:
    nb, cwd = padding
    _, loop, value, loaded, shown = _code_cells(nb)
    outs = loop.outputs
    streams = [(o["name"], o["text"]) for o in outs if o["output_type"] == "stream"]
    notice = next((i for i, (name, text) in enumerate(streams)
                   if name == "stderr" and re.search(r"xprof: step \d+ recompiled: x took shape", text)), None)
    finished = next((i for i, (name, text) in enumerate(streams) if "loop finished" in text), None)
    assert notice is not None, f"no live notice in the cell's output: {streams}"
    assert finished is not None and notice < finished, \
        "the live notice reached the cell only after the loop's last line (not while the cell ran)"
    # The exit summary: HTML, with the headline, the first thing to change and the finding's words.
    first = _first_finding(cwd / "padding.json")
    summaries = _html(outs)
    assert len(summaries) == 1 and 'class="xprof-nb"' in summaries[0]
    assert f"Change this first: {first.title.rstrip('.')}." in summaries[0]
    assert first.advice in summaries[0]
    assert "Full report" in summaries[0] and "data-doc=" in summaries[0]
    plain = next(o["data"]["text/plain"] for o in outs if o["output_type"] == "display_data")
    assert f"first thing to change: {first.title.rstrip('.')}" in plain
    # A finished watch and a loaded run show their summary as the cell's value.
    for cell in (value, loaded):
        got = _html(cell.outputs)
        assert len(got) == 1 and first.title.rstrip(".") in got[0]
    # xprof.show(): the full report in a frame, with no second plotly.js.
    report = _html(shown.outputs)
    assert len(report) == 1 and report[0].startswith("<iframe") and "srcdoc=" in report[0]
    assert "Findings" in html.unescape(report[0].split('srcdoc="', 1)[1])
    assert _all_text(nb).count(PLOTLY_BANNER) == 1, "plotly.js must reach the notebook once"
    _no_xprof_trouble(nb)


def test_the_kernel_runs_this_interpreter() -> None:
    """The ``python3`` kernel the notebooks name resolves to the environment the tests run in
    (ipykernel's kernelspec in ``.venv/share/jupyter`` says ``python``; jupyter_client launches it
    as this interpreter), not a system Python."""
    manager = pytest.importorskip("jupyter_client.manager", reason="jupyter_client is not installed")
    cmd = manager.KernelManager(kernel_name="python3").format_kernel_cmd()
    assert Path(cmd[0]).resolve() == Path(sys.executable).resolve(), (cmd, sys.executable)
    assert cmd[1:3] == ["-m", "ipykernel_launcher"]


def test_spawned_processes_write_their_files_and_the_pod_shows(tmp_path: Path) -> None:
    nb = _execute("spawn", tmp_path)
    _, inside, around = _code_cells(nb)
    for rank in (0, 1):
        from xprof.runfile import load_run

        run = load_run(tmp_path / "pod" / f"run.rank{rank}.json")
        assert run.complete and run.end is not None and run.end.status == "ok"
        assert run.meta["rank"] == rank and run.meta["world_size"] == 2
    texts = [o.get("text", "") for o in inside.outputs if o["output_type"] == "stream"]
    assert any("spawn returned" in t for t in texts)
    pods = _html(inside.outputs)
    assert len(pods) == 1, "the kernel shows the forked ranks once, as one run"
    pod = pods[0]
    assert "2 of 2 ranks" in pod and 'class="xnb-ranks"' in pod
    first = _first_finding(tmp_path / "pod" / "run.rank1.json")
    assert first.title.rstrip(".") in pod, "the straggler's finding is not in the cell"
    # A watch() around the spawn: the process records its rank (on the CPU the ranks are threads of
    # one process: the first thread's), the kernel shows it, and the notebook's own file is closed.
    run = load_run(tmp_path / "around.json")
    assert run.complete and run.end is not None and run.end.status == "ok"
    ranks = sorted((tmp_path).glob("around.rank*.json"))
    assert len(ranks) == 1, ranks
    rank_run = load_run(ranks[0])
    assert rank_run.complete and rank_run.end is not None and rank_run.end.status == "ok"
    from xprof.analysis import analyze

    assert analyze(rank_run).totals.steps == 3
    said = _html(around.outputs)
    assert len(said) == 1 and ranks[0].name in said[0] and "This run trained 3 steps" in said[0]
    assert any("spawn inside watch returned" in o.get("text", "") for o in around.outputs)
    _no_xprof_trouble(nb)


def test_an_error_in_the_cell_is_the_users_and_the_file_is_closed(tmp_path: Path) -> None:
    nb = _execute("raises", tmp_path, allow_errors=True)
    _, loop, after = _code_cells(nb)
    errors = [o for o in loop.outputs if o["output_type"] == "error"]
    assert len(errors) == 1
    assert errors[0]["ename"] == "ValueError" and errors[0]["evalue"] == "batch 2 has no labels"
    frames = "\n".join(errors[0]["traceback"])
    assert "xprof" not in re.sub(r"xprof\.watch\(|raises\.json", "", frames), "xprof's frames in the user's traceback"
    summary = _html(loop.outputs)
    assert len(summary) == 1 and "error: ValueError: batch 2 has no labels" in summary[0]
    from xprof.runfile import load_run

    run = load_run(tmp_path / "raises.json")
    assert run.complete and run.end is not None and run.end.status == "error"
    assert "batch 2 has no labels" in (run.end.exception or "")
    assert any("after the error" in o.get("text", "") for o in after.outputs), "the kernel did not go on"
    _no_xprof_trouble(nb)


CELL_FACTS = """(() => {
  const summaries = [...document.querySelectorAll('.xprof-nb')];
  const frames = [...document.querySelectorAll('iframe[title^="xprof report"]')];
  const drawn = f => { try { const d = f.contentDocument;
      return d ? [...d.querySelectorAll('div[id$="-chart"], #timeline')].map(c => !!c.querySelector('svg.main-svg'))
               : []; } catch (e) { return ['blocked']; } };
  return {
    summaries: summaries.length,
    text: summaries.map(s => s.innerText).join('\\n'),
    frames: frames.length,
    loaded: frames.map(f => !!(f.contentDocument && f.contentDocument.querySelector('#findings'))),
    charts: frames.map(drawn),
    plotly: typeof window.Plotly !== 'undefined',
    plotly_copies: [...document.querySelectorAll('script')].filter(s => s.textContent.includes('* plotly.js v')).length,
  };
})()"""


@pytest.mark.browser
def test_the_executed_notebook_renders_in_chromium(padding: tuple[Any, Path], tmp_path: Path) -> None:
    """The padding notebook as nbconvert exports it (JupyterLab's page): the summary shows, its
    "Full report" opens, and both reports' charts draw with the page's one plotly.js."""
    import time

    from test_browser import Chromium, find_browser

    binary = find_browser()
    if binary is None:
        pytest.skip("no Chromium/Chrome found (install Debian's `chromium`, or set XPROF_BROWSER)")
    exporter = pytest.importorskip("nbconvert", reason="nbconvert is not installed").HTMLExporter(
        template_name="lab", mathjax_url="", require_js_url="")
    nb, _ = padding
    body, _ = exporter.from_notebook_node(nb)
    body = re.sub(r'<script[^>]*\bsrc=""[^>]*>\s*</script>', "", body)  # (no CDN: the page is offline)
    page = tmp_path / "padding.html"
    page.write_text(body, encoding="utf-8")
    chromium = Chromium(binary, tmp_path / "profile")
    try:
        chromium.open(page.resolve().as_uri())
        facts = chromium.evaluate(CELL_FACTS)
        assert facts["summaries"] == 3, facts  # the watch's exit, `w` and xprof.load()
        assert "Change this first" in facts["text"] and "Full report" in facts["text"]
        assert facts["plotly"] and facts["plotly_copies"] == 1
        chromium.evaluate("document.querySelector('.xprof-nb details').open = true")
        for _ in range(40):
            facts = chromium.evaluate(CELL_FACTS)
            if sum(facts["loaded"]) >= 2 and all(c and all(x is True for x in c) for c, ok
                                                 in zip(facts["charts"], facts["loaded"]) if ok):
                break
            time.sleep(0.25)
        assert sum(facts["loaded"]) >= 2, facts  # the opened fold's and xprof.show()'s
        drawn = [c for c, ok in zip(facts["charts"], facts["loaded"]) if ok]
        assert all(c and all(x is True for x in c) for c in drawn), f"charts not drawn in the frames: {drawn}"
        assert chromium.console_errors() == []
        chromium.evaluate("document.querySelector('.xprof-nb details').open = false")
        box = chromium.evaluate(  # the loop cell's outputs: the live notice, the loop's line, the summary
            "(() => { const area = document.querySelector('.xprof-nb').closest('.jp-OutputArea');"
            " area.scrollIntoView(); const top = area.firstElementChild.getBoundingClientRect(),"
            " r = area.getBoundingClientRect();"
            " return [r.x, top.y + window.scrollY, r.width, r.bottom - top.y + 8]; })()")
        shot = chromium.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": False,
            "clip": {"x": box[0], "y": box[1], "width": box[2], "height": min(box[3], 1400), "scale": 1}})
        REPORTS.mkdir(parents=True, exist_ok=True)
        import base64

        (REPORTS / "notebook-cell.png").write_bytes(base64.b64decode(shot["data"]))
        assert (REPORTS / "notebook-cell.png").stat().st_size > 10_000
        chromium.open(page.resolve().as_uri(), width=420, mobile=True)  # a phone: the summary fits its cell
        wide = chromium.evaluate("[...document.querySelectorAll('.xprof-nb')].map(s => s.scrollWidth - s.clientWidth)")
        assert wide and max(wide) <= 1, f"the summary is wider than its cell at 420 px: {wide}"
    finally:
        chromium.close()


def test_no_kernel_outside_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    """A script that imports ipykernel, and a terminal IPython (a shell without a kernel), are not
    notebooks: watch() prints its lines there."""
    pytest.importorskip("ipykernel")
    import ipykernel  # noqa: F401  (loaded, as a library may load it, with no kernel running)
    import IPython

    from xprof import notebook

    assert notebook.kernel() is None and not notebook.forked_from_kernel()
    assert notebook.after_watch("run.json", "run.json", speak=True) is False

    class TerminalShell:  # IPython's TerminalInteractiveShell has no ``kernel``
        pass

    monkeypatch.setattr(IPython, "get_ipython", lambda: TerminalShell())
    assert notebook.kernel() is None
    kernel_shell = TerminalShell()
    kernel_shell.kernel = object()  # type: ignore[attr-defined]
    monkeypatch.setattr(IPython, "get_ipython", lambda: kernel_shell)
    assert notebook.kernel() is kernel_shell
