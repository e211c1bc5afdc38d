"""The README as a new user reads it: install to a report of their own script in its first
30 lines, short table rows, and sample outputs that are what xprof prints today."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_first_30_lines_go_from_install_to_a_report_of_your_script() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:30]
    text = "\n".join(head)
    assert text.count("make demo") >= 1 and "make test" in text
    install = next(i for i, line in enumerate(head) if line.startswith("pip install 'xprof-lazy"))
    run = next(i for i, line in enumerate(head) if line.startswith("xprof run "))
    report = next(i for i, line in enumerate(head) if line.startswith("xprof report "))
    assert install + 1 == run and run + 1 == report  # the three-line block
    warned = next(i for i, line in enumerate(head) if "OpenXLA" in line)
    assert warned < install, "the README says the name clash before the install line"


def test_table_rows_are_short() -> None:
    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    assert rows
    for row in rows:
        for cell in row.strip("|").split("|"):
            assert len(cell.strip()) <= 120, cell


def test_sample_outputs_are_what_xprof_prints_today() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "readme_samples.py"), "--check"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    text = README.read_text(encoding="utf-8")
    assert len(re.findall(r"<!-- sample: ", text)) >= 2
    assert "$ xprof summary sample_runs/padded_longest.json\nxprof padded_longest" in text


def test_the_screenshot_is_there() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text(encoding="utf-8"))
    assert images and all((ROOT / image).stat().st_size > 10_000 for image in images)
