"""``xprof compare``: regression comparison between real recorded runs.

The run files are the committed samples in ``sample_runs/`` (recorded on torch_xla on
the CPU by ``sample_runs/make_sample_runs.py``); no torch is needed to compare them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import xprof
from xprof.analysis.model import Finding
from xprof.cli import commands  # noqa: F401  (registers the commands)
from xprof.cli.app import app
from xprof.comparison import CompareResult, Gate, Limit, Noise, ThresholdError, parse_count, parse_limit
from xprof.comparison.matching import diff_findings

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_runs"
GATES = ["--max-new-recompiles", "0", "--max-compile-seconds-increase", "10%",
         "--max-step-time-increase", "5%", "--max-new-syncs", "0"]


def sample(name: str) -> str:
    return str(SAMPLES / f"{name}.json")


def cli(*args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(app, ["compare", *args], catch_exceptions=False)
    stderr = result.stderr if result.stderr_bytes is not None else ""
    return result.exit_code, result.stdout, stderr


# -- the samples are what they say ---------------------------------------------------

def test_sample_runs_are_real_recordings() -> None:
    runs = {n: xprof.load(sample(n)) for n in ("padded_fixed", "padded_longest", "item_every_step",
                                               "step_closure", "clean_a", "clean_b")}
    for name, run in runs.items():
        assert run.complete, name
        assert run.meta["torch_xla"], name
        assert 20 <= len(run.steps) <= 30, name
    shapes = {i.shape for sig in runs["padded_longest"].signatures.values()
              for i in sig if i.name == "input_ids"}
    assert len(shapes) > 1
    fixed = {i.shape for sig in runs["padded_fixed"].signatures.values()
             for i in sig if i.name == "input_ids"}
    assert len(fixed) == 1
    assert runs["item_every_step"].syncs and not runs["padded_fixed"].syncs


# -- noise: the same loop twice ------------------------------------------------------

@pytest.mark.parametrize("pair", [("clean_a", "clean_b"), ("clean_b", "clean_a")])
def test_same_loop_twice_is_not_a_regression(pair: tuple[str, str]) -> None:
    code, out, err = cli(sample(pair[0]), sample(pair[1]), *GATES, "--json")
    assert code == 0, err
    doc = json.loads(out)
    comp = doc["comparisons"][0]
    assert comp["regressions"] == []
    assert comp["findings"]["new"] == [] and comp["findings"]["gone"] == []
    assert comp["graphs"] == {"only_base": [], "only_new": []}
    assert comp["shapes"] == {"only_base": [], "only_new": []}
    assert comp["warnings"] == []
    assert doc["gate"]["passed"] is True
    # the whole step's median is shown, never judged (host time: two runs of one loop differ)
    step = [m for m in comp["metrics"] if m["key"] == "step_ms_median"]
    assert len(step) == 1 and step[0]["verdict"] in ("info", "same") and step[0]["new"] is not None


def test_same_loop_terminal_says_no_change() -> None:
    code, out, _ = cli(sample("clean_a"), sample("clean_b"))
    assert code == 0
    assert "no change beyond noise" in out


# -- fixed -> broken -> fixed ----------------------------------------------------------

def test_fixed_to_padded_longest_fails_the_gate_naming_the_cause() -> None:
    code, out, err = cli(sample("padded_fixed"), sample("padded_longest"), "--max-new-recompiles", "0")
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("xprof: regression:")]
    assert len(lines) == 1
    assert "--max-new-recompiles" in lines[0]
    assert "input_shape on input_ids" in lines[0]
    assert "New findings in padded_longest" in out


def test_fixed_to_padded_longest_api() -> None:
    result = xprof.compare(sample("padded_fixed"), sample("padded_longest"))
    assert isinstance(result, CompareResult)
    assert isinstance(result.metrics, pd.DataFrame)
    m = result.metrics
    assert m.loc["recompiles", "base"] == 0 and m.loc["recompiles", "new"] > 0
    assert m.loc["recompiles", "verdict"] == "worse"
    assert m.loc["distinct_graphs", "verdict"] == "worse"
    assert m.loc["compile_seconds", "verdict"] == "worse"  # more compiles: not noise
    new = result.last.new_findings
    assert [(f.cause, f.new.input) for f in new if f.new] == [("input_shape", "input_ids")]
    only_new = {g.inputs for g in result.graphs if g.side == "new"}
    assert any("input_ids[4, 9]" in g for g in only_new)
    assert {s.input for s in result.shapes} == {"input_ids"}
    assert {s.side for s in result.shapes} == {"base", "new"}


def test_broken_to_fixed_shows_improvements() -> None:
    code, out, err = cli(sample("padded_longest"), sample("padded_fixed"), *GATES, "--json")
    assert code == 0, err
    comp = json.loads(out)["comparisons"][0]
    assert "recompiles" in comp["improvements"]
    assert "distinct_graphs" in comp["improvements"]
    assert [f["cause"] for f in comp["findings"]["gone"]] == ["input_shape"]
    assert comp["regressions"] == []


def test_item_every_step_fails_the_sync_gate_naming_the_line() -> None:
    code, _, err = cli(sample("padded_fixed"), sample("item_every_step"), "--max-new-syncs", "0")
    assert code == 1
    line = next(ln for ln in err.splitlines() if "--max-new-syncs" in ln)
    assert "24 more implicit syncs" in line
    assert re.search(r"implicit_sync at make_sample_runs\.py:\d+", line)


def test_step_closure_removes_the_sync() -> None:
    result = xprof.compare(sample("item_every_step"), sample("step_closure"))
    gone = result.last.gone_findings
    assert [f.cause for f in gone] == ["implicit_sync"]
    assert result.metrics.loc["syncs_per_step", "verdict"] == "better"
    assert result.metrics.loc["syncs", "new"] == 0


def test_api_accepts_runs_and_stays_a_function() -> None:
    import xprof.comparison  # importing the package must not shadow xprof.compare

    runs = [xprof.load(sample("clean_a")), xprof.load(sample("clean_b"))]
    result = xprof.compare(*runs)
    assert result.runs[0].name == "clean_a"
    assert xprof.compare(*runs).metrics.loc["steps", "verdict"] == "same"
    assert xprof.comparison.compare is xprof.compare


def test_more_than_two_runs_gives_a_trend() -> None:
    code, out, _ = cli(sample("padded_fixed"), sample("padded_longest"), sample("item_every_step"),
                         "--json", "--max-new-recompiles", "0")
    assert code == 1
    doc = json.loads(out)
    assert [r["name"] for r in doc["runs"]] == ["padded_fixed", "padded_longest", "item_every_step"]
    assert len(doc["comparisons"]) == 2
    assert len(doc["trend"]["recompiles"]) == 3
    # item_every_step recompiles nothing after warm-up (its .item() graph compiles in the
    # first two steps): only the padded run breaks the gate.
    assert {v["run"] for v in doc["gate"]["violations"]} == {"padded_longest"}
    code, out, _ = cli(sample("padded_fixed"), sample("padded_longest"), sample("item_every_step"))
    assert "Trend against padded_fixed" in out


# -- output formats --------------------------------------------------------------------

def test_json_is_the_documented_object() -> None:
    code, out, _ = cli(sample("padded_fixed"), sample("padded_longest"), "--json")
    assert code == 0  # no threshold given: never a failure
    doc = json.loads(out)
    assert doc["schema"] == "xprof-compare" and doc["version"] == 1
    assert "gate" not in doc
    metrics = {m["key"]: m for m in doc["comparisons"][0]["metrics"]}
    assert set(metrics) >= {"steps", "wall_seconds", "compiles", "recompiles", "compile_seconds",
                            "distinct_graphs", "execute_ms_median", "execute_ms_p95", "syncs_per_step",
                            "transfers", "fallback_ops"}
    assert set(metrics["recompiles"]) == {"key", "label", "unit", "base", "new", "delta", "rel",
                                          "verdict", "note", "interval"}
    f = doc["comparisons"][0]["findings"]["new"][0]
    assert f["new"]["input"] == "input_ids" and f["base"] is None


def test_markdown_has_a_table() -> None:
    code, out, _ = cli(sample("padded_fixed"), sample("padded_longest"), "--markdown",
                       "--max-new-recompiles", "0")
    assert code == 1
    lines = out.splitlines()
    header = next(k for k, ln in enumerate(lines) if ln.startswith("| Metric |"))
    assert lines[header + 1].startswith("|---|")
    assert any(ln.startswith("| Recompiles (after warm-up) | 0 | ") for ln in lines)
    assert "**Gate: failed**" in out


def _renamed(tmp_path: Path, name: str) -> str:
    src = Path(sample("clean_b")).read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(src[0])
    header["name"] = name
    out = tmp_path / "evil.json"
    out.write_text(json.dumps(header) + "\n" + "".join(src[1:]), encoding="utf-8")
    return str(out)


def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    evil = _renamed(tmp_path, "<script>alert(1)</script>|x")
    html_path = tmp_path / "reports" / "compare.html"
    code, _, err = cli(sample("clean_a"), evil, "-o", str(html_path))
    assert code == 0, err
    html = html_path.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not re.search(r"<script[^>]+src=", html)
    assert "Plotly.newPlot" in html and len(html) > 1_000_000  # plotly.js inlined
    assert "http://" not in re.sub(r"<script>.*?</script>", "", html, flags=re.S).replace(
        "http://www.w3.org", "")


def test_markdown_puts_names_in_code_spans(tmp_path: Path) -> None:
    evil = _renamed(tmp_path, "<img src=x>|y")
    code, out, _ = cli(sample("clean_a"), evil, "--markdown")
    assert code == 0
    assert "| `<img src=x>\\|y` |" in out  # a table cell: the pipe escaped, the tag a code span
    assert "→ `<img src=x>|y`" in out  # the heading: a code span, no escape needed
    assert out.count("<img") == out.count("`<img")


def test_output_by_suffix(tmp_path: Path) -> None:
    for suffix in (".md", ".json"):
        path = tmp_path / f"c{suffix}"
        code, _, _ = cli(sample("clean_a"), sample("clean_b"), "-o", str(path))
        assert code == 0 and path.stat().st_size > 100
    json.loads((tmp_path / "c.json").read_text())
    code, _, err = cli(sample("clean_a"), sample("clean_b"), "-o", str(tmp_path / "c.txt"))
    assert code == 2 and err.count("\n") == 1


# -- bad input: exit 2, one line ---------------------------------------------------------

def _bad_files(tmp_path: Path) -> dict[str, Path]:
    good = Path(sample("clean_a")).read_text(encoding="utf-8")
    header = json.loads(good.splitlines()[0])
    files = {
        "missing": tmp_path / "nope.json",
        "truncated": tmp_path / "truncated.json",
        "foreign": tmp_path / "foreign.json",
        "newer": tmp_path / "newer.json",
        "empty": tmp_path / "empty.json",
    }
    files["truncated"].write_text(good.splitlines()[0][:40], encoding="utf-8")
    files["foreign"].write_text('{"hello": "world"}\n', encoding="utf-8")
    files["newer"].write_text(json.dumps({**header, "version": 99}) + "\n", encoding="utf-8")
    files["empty"].write_text("", encoding="utf-8")
    return files


@pytest.mark.parametrize("kind", ["missing", "truncated", "foreign", "newer", "empty"])
def test_bad_files_exit_2_with_one_line(tmp_path: Path, kind: str) -> None:
    bad = str(_bad_files(tmp_path)[kind])
    for args in ((sample("clean_a"), bad), (bad, sample("clean_a"))):
        code, out, err = cli(*args)
        assert code == 2
        assert err.startswith("xprof: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err + out
        assert bad in err


@pytest.mark.parametrize("args", [
    ["--max-new-recompiles", "-1"],
    ["--max-new-recompiles", "many"],
    ["--max-compile-seconds-increase", "10"],
    ["--max-step-time-increase", "fast"],
    ["--max-new-syncs", "1.5"],
])
def test_bad_threshold_exit_2_with_one_line(args: list[str]) -> None:
    code, _, err = cli(sample("clean_a"), sample("clean_b"), *args)
    assert code == 2
    assert err.startswith(f"xprof: error: {args[0]}") and err.count("\n") == 1, err


def test_one_run_is_bad_input() -> None:
    code, _, err = cli(sample("clean_a"))
    assert code == 2 and err.count("\n") == 1


def test_real_subprocess() -> None:
    exe = ROOT / ".venv" / "bin" / "xprof"
    if not exe.exists():
        pytest.skip("no .venv/bin/xprof")
    env = {**os.environ, "COLUMNS": "120"}
    proc = subprocess.run([str(exe), "compare", sample("padded_fixed"), sample("padded_longest"),
                           "--max-new-recompiles", "0"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Recompiles (after warm-up)" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1].startswith("xprof: regression: --max-new-recompiles")


def test_compare_imports_no_torch() -> None:
    """Comparing runs works on a machine without torch: it must not import it."""
    code = ("import sys; from xprof.cli.app import run_app; from xprof.cli import commands; "
            f"rc = run_app(['compare', {sample('clean_a')!r}, {sample('clean_b')!r}, '--json', "
            f"'-o', sys.argv[1]]); "
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_xla')]; "
            "print('RC', rc, 'HEAVY', heavy, file=sys.stderr)")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-c", code, os.path.join(tmp, "c.html")],
                              capture_output=True, text=True, timeout=120)
    assert proc.stderr.strip().splitlines()[-1] == "RC 0 HEAVY []", proc.stderr


# -- thresholds ----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "kind", "value"), [
    ("10%", "percent", 10.0), (" 2.5 % ", "percent", 2.5), ("+5%", "percent", 5.0), ("0%", "percent", 0.0),
    ("2s", "seconds", 2.0), ("2 sec", "seconds", 2.0), ("0.5S", "seconds", 0.5), ("300ms", "seconds", 0.3),
    (".5s", "seconds", 0.5),
])
def test_parse_limit(text: str, kind: str, value: float) -> None:
    limit = parse_limit(text, "--x")
    assert limit.kind == kind and limit.value == pytest.approx(value)


@pytest.mark.parametrize("text", ["10", "", "abc", "-5%", "5%%", "2 minutes", "1e3%", "nan%", "s"])
def test_parse_limit_errors(text: str) -> None:
    with pytest.raises(ThresholdError, match=r"^--x: "):
        parse_limit(text, "--x")


def test_parse_count() -> None:
    assert parse_count("0", "--n") == 0 and parse_count(" 3 ", "--n") == 3
    for bad in ("-1", "1.5", "x", ""):
        with pytest.raises(ThresholdError, match=r"^--n: "):
            parse_count(bad, "--n")


def test_limit_allows() -> None:
    assert Limit("percent", 10).allows(base=10.0, delta=1.0)
    assert not Limit("percent", 10).allows(base=10.0, delta=1.01)
    assert Limit("seconds", 2).allows(base=100.0, delta=2.0)
    assert not Limit("seconds", 2).allows(base=100.0, delta=2.5)
    assert str(Limit("seconds", 0.3)) == "300ms" and str(Limit("percent", 5)) == "5%"


def test_gate_describe() -> None:
    gate = Gate.parse(max_new_recompiles="0", max_compile_seconds_increase="2s")
    assert gate.active
    assert gate.describe() == {"--max-new-recompiles": "0", "--max-compile-seconds-increase": "2s"}
    assert not Gate().active


def test_noise_rule() -> None:
    noise = Noise()
    assert not noise.significant("execute_ms_p95", 100.0, 5.0)  # 5%: under 10%
    assert not noise.significant("execute_ms_p95", 0.3, 0.2)  # 66% but 0.2 ms (the median has no floor)
    assert noise.significant("execute_ms_p95", 100.0, 20.0)
    assert not noise.significant("compile_seconds", 0.6, 0.6)  # same compiles: 0.6 s is noise
    assert noise.significant("compile_seconds", 0.6, 0.6, compiles_delta=2)  # 2 more compiles


# -- findings matching (exact data) ---------------------------------------------------------

def _sync(line: int, code: str, func: str = "train", count: int = 24, file: str = "/a/train.py") -> Finding:
    return Finding(id=f"sync:{line}", cause="implicit_sync", kind="item", title=f".item() at {line}",
                   count=count, compiles=1, seconds=0.1, compile_seconds=0.1, execute_seconds=0.0,
                   advice="", file=file, line=line, func=func, code=code)


def test_a_moved_line_matches_by_code_and_function() -> None:
    [c] = diff_findings([_sync(40, "x = loss.item()")], [_sync(52, "x  =  loss.item()")])
    assert c.status == "same" and c.matched_by == "code+function"
    assert c.moved_from == "train.py:40" and c.where == "train.py:52"


def test_an_edited_line_falls_back_to_file_and_line() -> None:
    [c] = diff_findings([_sync(40, "x = loss.item()")], [_sync(40, "y = loss.item()", count=12)])
    assert c.status == "changed" and c.matched_by == "file:line" and c.count_delta == -12


def test_another_checkout_matches_by_file_name() -> None:
    [c] = diff_findings([_sync(40, "a()", file="/ci/1/train.py")],
                        [_sync(40, "b()", file="/ci/2/train.py")])
    assert c.matched_by == "file name:line" and c.moved_from is None


def test_different_function_and_line_are_new_and_gone() -> None:
    changes = diff_findings([_sync(40, "x = loss.item()", func="train")],
                            [_sync(90, "x = loss.item()", func="evaluate")])
    assert sorted(c.status for c in changes) == ["gone", "new"]


def test_shape_findings_match_by_cause_and_input() -> None:
    def shape(inp: str, n: int) -> Finding:
        return Finding(id=f"input:{inp}", cause="input_shape", kind="dynamic_padding", title=inp,
                       count=n, compiles=n, seconds=float(n), compile_seconds=float(n),
                       execute_seconds=0.0, advice="", input=inp, shapes=[[4, 8 + k] for k in range(n)])
    changes = diff_findings([shape("input_ids", 3), shape("labels", 1)],
                            [shape("input_ids", 5), shape("pixel_values", 2)])
    by = {(c.status, c.where) for c in changes}
    assert by == {("changed", "input_ids"), ("new", "pixel_values"), ("gone", "labels")}
    changed = next(c for c in changes if c.status == "changed")
    assert changed.compiles_delta == 2 and changed.matched_by == "cause+input"


def test_runs_with_one_name_are_told_apart(tmp_path: Path) -> None:
    a = tmp_path / "base.json"
    a.write_text(Path(sample("clean_a")).read_text(encoding="utf-8"), encoding="utf-8")
    result = xprof.compare(str(a), sample("clean_a"))  # both runs are named "clean_a"
    assert [r.name for r in result.runs] == ["base", "clean_a"]
    same = xprof.compare(sample("clean_a"), sample("clean_a"))
    assert [r.name for r in same.runs] == ["clean_a (1)", "clean_a (2)"]
    assert list(same.trend.columns) == ["clean_a (1)", "clean_a (2)"]


def test_gate_fails_a_run_with_no_steps(tmp_path: Path) -> None:
    header_only = tmp_path / "nothing.json"
    header_only.write_text(Path(sample("clean_b")).read_text(encoding="utf-8").splitlines()[0] + "\n",
                           encoding="utf-8")
    code, out, err = cli(sample("clean_a"), str(header_only), "--max-new-recompiles", "0")
    assert code == 1
    assert "no training steps recorded" in err
    assert "a run has no training steps" in out
    code, _, _ = cli(sample("clean_a"), str(header_only))  # no threshold: never a failure
    assert code == 0


def test_incomplete_run_is_compared_with_a_warning(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(Path(sample("clean_b")).read_bytes()[:-60])
    result = xprof.compare(sample("clean_a"), str(cut))
    assert any("did not finish cleanly" in w for w in result.warnings)


def test_an_edited_script_keeps_the_finding_by_its_code(tmp_path: Path) -> None:
    """The same ``.item()`` line, moved down by an edit: same finding, reported as moved."""
    lines = Path(sample("item_every_step")).read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        rec = json.loads(line)
        if rec.get("type") == "site":
            rec["line"] += 30
        out.append(json.dumps(rec))
    moved = tmp_path / "moved.json"
    moved.write_text("\n".join(out) + "\n", encoding="utf-8")
    result = xprof.compare(sample("item_every_step"), str(moved))
    [f] = [f for f in result.findings if f.cause == "implicit_sync"]
    assert f.status == "same" and f.matched_by == "code+function"
    assert f.moved_from is not None and f.where != f.moved_from


@pytest.mark.xla
def test_recorded_here_fixed_to_longest(device: object, tmp_path: Path) -> None:
    """The sample loops recorded in this process on torch_xla, then compared.

    Fixed padding (16 tokens) first, then padding to the longest sequence (5-12 tokens):
    no shape of the second was compiled by the first, so the compile cache this process
    shares does not hide a compile.
    """
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_sample_runs", SAMPLES / "make_sample_runs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.train("padded_fixed", tmp_path)
    mod.train("padded_longest", tmp_path)
    code, _, err = cli(str(tmp_path / "padded_fixed.json"), str(tmp_path / "padded_longest.json"),
                       "--max-new-recompiles", "0")
    assert code == 1
    assert "input_shape on input_ids" in err
    code, _, err = cli(str(tmp_path / "padded_longest.json"), str(tmp_path / "padded_fixed.json"),
                       "--max-new-recompiles", "0")
    assert code == 0, err


def test_graphs_only_in_one_run_are_dated_in_training_steps(tmp_path: Path) -> None:
    # A device loader's first barrier runs nothing: barrier 3 is training step 2, as the
    # summary says; compare said "first at step 3".
    from tests.test_analysis_unit import T0, Builder
    from xprof.analysis import analyze
    from xprof.comparison.graphs import diff_graphs
    from xprof.runfile import load_run

    def run(name: str, lengths: list[int]) -> Any:
        b = Builder(tmp_path / f"{name}.json")
        b.w.write({"type": "step", "i": 0, "t0": T0, "tb": T0, "t1": T0 + 0.001, "barrier": "loader",
                   "c": {"MarkStep": 1}})
        b.i, b.t = 1, T0 + 0.002
        seen: set[int] = set()
        for n in lengths:
            b.step({"ids": [8, n]}, compile_ms=0 if n in seen else 300)
            seen.add(n)
        return b.done()

    base = run("base", [32, 32, 40, 32, 32])
    new = run("new", [32] * 5)
    [only_base] = [g for g in diff_graphs(base, new) if g.side == "base"]
    assert "ids[8, 40]" in only_base.inputs and only_base.first_step == 2
    assert any("step 2: ids [8, 32] -> [8, 40]" in e for f in analyze(load_run(tmp_path / "base.json")).findings
               for e in f.evidence)


def test_markdown_leads_with_the_verdict_and_folds_graphs_and_shapes() -> None:
    """A PR comment: gate, verdict and findings first; the graph and shape lists folded."""
    from xprof.comparison import compare as run_compare
    from xprof.report.compare_text import render_markdown
    from xprof.runfile import load_run

    samples = Path(__file__).resolve().parent.parent / "sample_runs"
    result = run_compare(load_run(samples / "padded_fixed.json"), load_run(samples / "padded_longest.json"))
    md = render_markdown(result)
    verdict = md.index("`padded_longest` vs `padded_fixed`: worse")
    assert verdict < md.index("| Metric |") < md.index("**New findings in")
    opened = md.index("<details><summary>Graphs and input shapes only one run has (8)</summary>")
    assert md.index("**New findings in") < opened < md.index("**Graphs compiled only in") < md.index("</details>")
    assert md.index("**Input shapes only in") < md.index("</details>")
    assert "\n\n**Graphs" in md[opened:]  # a blank line after <summary>: GitHub renders the Markdown inside
