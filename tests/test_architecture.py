"""The architecture's rules, read from the source with ``ast`` (no import of xprof, no torch):

- no import circle among xprof's modules (``TYPE_CHECKING`` and function-level imports count);
- no module over 600 lines, no function over 80;
- no private name (``_x``) imported from another module, nor reached through one;
- a name is taken from the module that defines it, or from a package's ``__init__``: no other
  module re-exports what it imports (no shims);
- the layers point one way (docs/architecture.md): each package imports only the packages
  below it, and the recorder, which runs inside the training process, never reaches pandas,
  plotly, jinja2, duckdb or typer, statically or at run time.

The lists of known exceptions below name each one and the branch fixing it: they may only
shrink (an exception that no longer applies fails too, so that it is taken out).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "xprof"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

KNOWN_LONG: dict[str, str] = {
    # "path:function" (or "path" for a module) -> the branch that brings it under the limit.
}

KNOWN_PRIVATE_IMPORTS: dict[str, str] = {
    # An importing module -> the branch that makes what it shares public (or keeps it in one
    # module).
}

KNOWN_SHIMS: dict[str, str] = {
    # A module (not a package's __init__) that re-exports names it imports (``x as x``, or
    # in its __all__) -> the branch that moves their users to the owner and drops it.
}

KNOWN_NOT_FROM_THE_OWNER: dict[str, str] = {
    # A module that takes a name from a module that only imported it -> the branch fixing it.
}

SHARED = {"xprof._version", "xprof.words", "xprof.untrusted", "xprof.openxla"}
"""Small modules every layer may import; they import nothing of xprof."""

LAYERS: dict[str, set[str]] = {
    # package (or top-level module) -> the packages it may import, besides itself and SHARED
    "xprof.runfile": set(),
    "xprof.hlo": set(),
    "xprof.runcolumns": {"xprof.runfile"},
    "xprof.diagnosis": {"xprof.runfile"},
    "xprof.recorder": {"xprof.runfile", "xprof.diagnosis", "xprof.hlo"},
    "xprof.analysis": {"xprof.runfile", "xprof.runcolumns", "xprof.diagnosis"},
    "xprof.comparison": {"xprof.runfile", "xprof.runcolumns", "xprof.diagnosis", "xprof.analysis"},
    "xprof.report": {"xprof.runfile", "xprof.runcolumns", "xprof.diagnosis", "xprof.analysis", "xprof.comparison"},
    "xprof.integrations": {"xprof.recorder"},
    "xprof.testing": {"xprof.runfile", "xprof.diagnosis", "xprof.recorder", "xprof.analysis"},
    "xprof": {"xprof.runfile", "xprof.recorder", "xprof.analysis", "xprof.comparison", "xprof.notebook"},
    "xprof.notebook": {"xprof.runfile", "xprof.recorder", "xprof.analysis", "xprof.report"},
    "xprof.demo": {"xprof"},
    "xprof.cli": {"xprof", "xprof.runfile", "xprof.runcolumns", "xprof.recorder", "xprof.analysis",
                  "xprof.comparison", "xprof.report", "xprof.demo"},
    "xprof.__main__": {"xprof.cli"},
}

NOT_IN_THE_RECORDER = ("pandas", "plotly", "jinja2", "duckdb", "typer")
"""Third-party packages the recorder must never import: it runs inside the training process."""


@dataclass(frozen=True)
class Import:
    target: str
    """The xprof module imported (a name imported from a package is its package)."""
    line: int
    name: str | None = None
    """The name taken from the module (``from target import name``), if any."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@cache
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(encoding="utf-8"))


def _rel(name: str) -> str:
    return modules()[name].relative_to(ROOT).as_posix()


def _resolve(name: str) -> str:
    """The module that ``import name`` loads last (the longest prefix that is a module)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name


@cache
def imports(name: str) -> tuple[Import, ...]:
    """Every import of an xprof module in module ``name``, wherever it is (top level, under
    ``TYPE_CHECKING``, inside a function)."""
    out = []
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            out += [Import(_resolve(a.name), node.lineno) for a in node.names if a.name.split(".")[0] == "xprof"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xprof":
            assert node.level == 0, f"{_rel(name)}:{node.lineno}: a relative import"
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.append(Import(sub, node.lineno) if sub in modules()
                           else Import(_resolve(node.module), node.lineno, a.name))
    return tuple(out)


def _third_party(name: str) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            yield from ((a.name.split(".")[0], node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module.split(".")[0], node.lineno


def _package(name: str) -> str:
    """A module's layer: its package under xprof (or itself, for a top-level module)."""
    return ".".join(name.split(".")[:2])


# -- (a) no import circle ------------------------------------------------------------------------


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _a_circle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One circle through the component's first module: the shortest path back to it."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def _edge(a: str, b: str) -> str:
    line = next(i.line for i in imports(a) if i.target == b)
    return f"{_rel(a)}:{line} imports {b}"


def test_no_import_circle_among_modules() -> None:
    graph = {m: {i.target for i in imports(m) if i.target != m} for m in modules()}
    circles = [_a_circle(graph, c) for c in _cycles(graph)]
    said = ["\n  ".join(_edge(a, b) for a, b in zip(c, c[1:])) for c in circles]
    assert not circles, "import circles:\n  " + "\n\n  ".join(said)


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _a_circle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


# -- (b) sizes -----------------------------------------------------------------------------------


def _too_long() -> dict[str, int]:
    out = {}
    for name, path in modules().items():
        rel = _rel(name)
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES:
            out[rel] = n
        for node in ast.walk(tree(name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1  # (def to last line)
                if length > MAX_FUNCTION_LINES:
                    out[f"{rel}:{node.name}"] = length
    return out


def test_no_module_over_600_lines_and_no_function_over_80() -> None:
    found = _too_long()
    new = {k: v for k, v in found.items() if k not in KNOWN_LONG}
    assert not new, "over the limit (600 lines a module, 80 a function): " + ", ".join(
        f"{k} ({v} lines)" for k, v in sorted(new.items()))


def test_the_known_long_ones_are_still_long() -> None:
    fixed = sorted(set(KNOWN_LONG) - set(_too_long()))
    assert not fixed, f"now within the limits: take them out of KNOWN_LONG: {fixed}"


# -- (c) private names ---------------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(name: str) -> list[str]:
    """``from other import _x``, and ``other._x`` where ``other`` names another module."""
    out = [f"{_rel(name)}:{i.line}: {i.target}.{i.name}" for i in imports(name)
           if i.name is not None and _private(i.name) and i.target != name]
    bound: dict[str, str] = {}
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xprof":
            for a in node.names:
                if f"{node.module}.{a.name}" in modules():
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "xprof":
                    bound[a.asname or "xprof"] = a.name if a.asname else "xprof"
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            module = bound.get(node.value.id)
            if module is not None and module != name:
                out.append(f"{_rel(name)}:{node.lineno}: {module}.{node.attr}")
    return out


def test_no_private_name_is_imported_from_another_module() -> None:
    found = [p for m in modules() if _rel(m) not in KNOWN_PRIVATE_IMPORTS for p in private_imports(m)]
    assert not found, ("private names used across modules (make what is shared public in the "
                       "module that owns it):\n  " + "\n  ".join(found))


def test_the_known_private_imports_are_still_there() -> None:
    by_path = {_rel(m): m for m in modules()}
    fixed = sorted(p for p in KNOWN_PRIVATE_IMPORTS if p not in by_path or not private_imports(by_path[p]))
    assert not fixed, f"no private import left: take them out of KNOWN_PRIVATE_IMPORTS: {fixed}"


def reexports(name: str) -> list[str]:
    """Names a module that is not a package's ``__init__`` imports only to hand on: imported
    as themselves (``from m import x as x``) or listed in its ``__all__``."""
    if modules()[name].name == "__init__.py":
        return []
    imported: dict[str, int] = {}
    out = []
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xprof":
            for a in node.names:
                imported[a.asname or a.name] = node.lineno
                if a.asname == a.name:
                    out.append(f"{_rel(name)}:{node.lineno}: {a.name} as {a.name}")
    for node in tree(name).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                and isinstance(node.value, (ast.List, ast.Tuple))):
            out += [f"{_rel(name)}:{node.lineno}: __all__ hands on {e.value}" for e in node.value.elts
                    if isinstance(e, ast.Constant) and e.value in imported]
    return out


@cache
def defined_elsewhere(name: str) -> frozenset[str]:
    """The names module ``name`` imports (so defines elsewhere)."""
    out = set()
    for node in ast.walk(tree(name)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(out)


def not_from_the_owner(name: str) -> list[str]:
    """``from m import x`` and ``m.x`` where ``m`` is a module (not a package's ``__init__``)
    that only imported ``x``."""
    def shim(module: str, attr: str) -> bool:
        return (module in modules() and modules()[module].name != "__init__.py"
                and f"{module}.{attr}" not in modules() and attr in defined_elsewhere(module))

    out = [f"{_rel(name)}:{i.line}: {i.name} from {i.target}" for i in imports(name)
           if i.name is not None and shim(i.target, i.name)]
    bound = {}
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "xprof":
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                          if f"{node.module}.{a.name}" in modules()})
        elif isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname and a.name in modules()})
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            if shim(bound[node.value.id], node.attr):
                out.append(f"{_rel(name)}:{node.lineno}: {node.value.id}.{node.attr} through {bound[node.value.id]}")
    return out


def test_names_are_taken_from_the_module_that_defines_them() -> None:
    found = [r for m in modules() if _rel(m) not in KNOWN_NOT_FROM_THE_OWNER for r in not_from_the_owner(m)]
    assert not found, "names taken through a module that only imported them:\n  " + "\n  ".join(found)


def test_the_known_ones_not_from_the_owner_are_still_there() -> None:
    by_path = {_rel(m): m for m in modules()}
    fixed = sorted(p for p in KNOWN_NOT_FROM_THE_OWNER if p not in by_path or not not_from_the_owner(by_path[p]))
    assert not fixed, f"all from the owner now: take them out of KNOWN_NOT_FROM_THE_OWNER: {fixed}"


def test_only_a_package_init_re_exports() -> None:
    found = [r for m in modules() if _rel(m) not in KNOWN_SHIMS for r in reexports(m)]
    assert not found, ("re-exports outside a package's __init__ (import from the module that "
                       "owns the name):\n  " + "\n  ".join(found))


def test_the_known_shims_are_still_there() -> None:
    by_path = {_rel(m): m for m in modules()}
    fixed = sorted(p for p in KNOWN_SHIMS if p not in by_path or not reexports(by_path[p]))
    assert not fixed, f"no re-export left: take them out of KNOWN_SHIMS: {fixed}"


# -- (d) layers ----------------------------------------------------------------------------------


def test_every_package_has_its_place_in_the_layers() -> None:
    placed = set(LAYERS) | SHARED
    assert not {_package(m) for m in modules()} - placed, "a package docs/architecture.md does not place"


def test_the_layers_point_one_way() -> None:
    wrong = []
    for name in modules():
        layer = _package(name)
        allowed = LAYERS.get(layer, set()) | SHARED | {layer}
        wrong += [f"{_rel(name)}:{i.line}: {layer} imports {i.target}" for i in imports(name)
                  if _package(i.target) not in allowed and i.target not in allowed]
    assert not wrong, "imports against the layers (docs/architecture.md):\n  " + "\n  ".join(wrong)


def _reached_from(layer: str) -> set[str]:
    todo = [m for m in modules() if _package(m) == layer]
    seen = set(todo)
    while todo:
        for i in imports(todo.pop()):
            if i.target not in seen:
                seen.add(i.target)
                todo.append(i.target)
    return seen


def test_the_recorder_reaches_no_pandas_plotly_jinja2_duckdb_or_typer() -> None:
    """Statically: every module the recorder imports, wherever the import is (a function's
    lazy import included)."""
    bad = sorted(f"{_rel(m)}:{line}: {top}" for m in _reached_from("xprof.recorder")
                 for top, line in _third_party(m) if top in NOT_IN_THE_RECORDER)
    assert not bad, bad
    assert not {_package(m) for m in _reached_from("xprof.recorder")} & {
        "xprof.analysis", "xprof.report", "xprof.comparison", "xprof.cli"}


def test_the_recorder_imports_no_pandas_and_no_analysis() -> None:
    """At run time, in a fresh interpreter: what importing the recorder loads."""
    code = ("import sys, xprof, xprof.recorder.watch, xprof.recorder.live, xprof.recorder.verdict\n"
            f"bad = [m for m in sys.modules if m.split('.')[0] in {NOT_IN_THE_RECORDER!r}\n"
            "       or m.startswith(('xprof.analysis', 'xprof.report', 'xprof.comparison', 'xprof.cli'))]\n"
            "print(sorted(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
