"""A package written into a ``site-packages`` folder and imported from there: its frames are a
library's to the recorder (``classify_path``), as an installed package's are."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any


def installed(tmp_path: Path, name: str, source: str) -> Any:
    """Import ``source`` as package ``name`` from ``tmp_path/site-packages`` (left out of
    ``sys.path`` and ``sys.modules`` again: its module object stays usable)."""
    root = tmp_path / "site-packages"
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(name, None)
