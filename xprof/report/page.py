"""What every HTML page xprof writes shares: one jinja environment, one inlined plotly.js,
one atomic writer.

Pages extend ``templates/base.html.j2`` (head, the inlined plotly.js, the chart data as a
JSON script block and the one loop that draws them). Templates autoescape every value;
chart data goes in through ``|tojson`` (which escapes ``<``, ``>`` and ``&``), so a run
named ``</script>...`` stays text.
"""

from __future__ import annotations

import errno
import functools
import os
from importlib import resources
from pathlib import Path

import jinja2

from xprof.report import fmt


@functools.lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle shipped inside the installed ``plotly`` package, safe to inline
    in a ``<script>`` element (a ``</script`` inside it would end the element early)."""
    text = (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    return text.replace("</script", "<\\/script")


@functools.lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    """The one template environment: autoescaping, strict undefined names, shared filters."""
    e = jinja2.Environment(
        loader=jinja2.PackageLoader("xprof.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    e.filters["seconds"] = fmt.seconds
    e.filters["ms"] = fmt.ms
    e.filters["percent"] = fmt.percent
    e.filters["shape"] = fmt.shape
    e.filters["basename"] = lambda p: os.path.basename(str(p))
    return e


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` (folders created) through a temporary file and a rename, so
    a failed write never leaves half a page where the last good one was; returns the path.

    A symlink is written through (the link stays, its target is replaced); a path that is
    not a plain file (a FIFO, a device) is refused with an ``OSError``, never replaced.
    A lone surrogate (a file name that was not UTF-8) is written as its ``\\udcXX`` escape.
    """
    out = Path(os.path.realpath(path))
    if out.exists() and not out.is_file():
        raise OSError(errno.EINVAL, "not a plain file", str(path))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out
