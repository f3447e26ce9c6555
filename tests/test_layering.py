"""The layering of docs/architecture.md, read from the source: which package may import
which, no import circle inside any package of the engine nor inside the notebook
extension, the executor (`runtime.plan`) never importing the live object
(`runtime.live`), and the engine never importing IPython.

Every import counts, also one inside a function or under ``TYPE_CHECKING``: a circle
broken by a function-level import is still a circle. Every folder below the engine's and
the extension's roots is read.
"""
from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from functools import cache

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "fluid_interactive")
EXTENSION = os.path.join(ROOT, "extension", "fluid")

# package -> the packages of ours it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "util": set(),
    "errors": set(),
    "ir": {"util", "errors"},
    "backend": {"errors"},
    "kernels": {"backend", "errors", "util"},
    "io": {"errors", "util"},
    "ops": {"ir", "io", "backend", "kernels", "errors", "util"},
    "passes": {"ir", "ops", "errors", "util"},
    "runtime": {"ir", "ops", "passes", "backend", "kernels", "errors", "util"},
    "render": {"ir", "errors", "util"},
    "distributed": {"runtime", "passes", "ops", "ir", "backend", "errors", "util", "io"},
    "frontend": {"ir", "ops", "passes", "runtime", "distributed", "backend", "io", "errors",
                 "util"},
    "onnx": {"frontend", "runtime", "ops", "ir", "passes", "backend", "errors", "util"},
}
# the package root re-exports the public API and may import every layer
ROOT_MODULES = {"__init__"}


@cache
def _modules(package: str = PACKAGE) -> dict[str, str]:
    """Dotted module name (below ``package``: a folder) -> file path."""
    found = {}
    for folder, _dirs, files in os.walk(package):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, package)[:-3].replace(os.sep, ".")
            found[rel[:-9] if rel.endswith(".__init__") else rel] = path
    return found


def _package_of(module: str) -> str:
    return module.split(".")[0]


def _imports(module: str, path: str, root: str = "fluid_interactive"
             ) -> Iterator[tuple[str, int]]:
    """(dotted module of ours or an outside top-level name, line) for every import, at
    any depth of the file (in a function, a method, an ``if TYPE_CHECKING`` block);
    ``root``: the name of the package ``module`` is in."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    is_pkg = path.endswith("__init__.py")
    here = [] if module == "__init__" else module.split(".") if is_pkg else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
                yield base, node.lineno
                if base == "fluid_interactive" or base.startswith("fluid_interactive."):
                    for alias in node.names:
                        yield f"{base}.{alias.name}", node.lineno
                continue
            parts = here[:len(here) - node.level + 1] if node.level > 1 else here
            base = ".".join([root, *parts] + ([node.module] if node.module else []))
            if node.module:
                yield base, node.lineno
            for alias in node.names:   # `from . import checkpoint` imports a module
                yield f"{base}.{alias.name}", node.lineno


def _ours(name: str, modules: dict[str, str], root: str = "fluid_interactive") -> str | None:
    """The module of ``root`` that ``name`` refers to (a module, or a package's
    __init__)."""
    if name != root and not name.startswith(root + "."):
        return None
    rel = name[len(root) + 1:] if name != root else ""
    while rel and rel not in modules:   # `from pkg.mod import name`: name is no module
        rel = rel.rpartition(".")[0]
    return rel or None


@cache
def _graph(package: str = PACKAGE, root: str = "fluid_interactive"
           ) -> dict[str, dict[str, int]]:
    """module -> {module of the same package it imports: the line of the first import}."""
    modules = _modules(package)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for name, line in _imports(module, path, root):
            target = _ours(name, modules, root)
            if target is not None and target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for module, edges in _graph().items():
        package = _package_of(module)
        if module in ROOT_MODULES:
            continue
        allowed = ALLOWED.get(package)
        assert allowed is not None, f"{module}: its package {package!r} has no layer; add it " \
                                    f"to ALLOWED and to docs/architecture.md"
        for target, line in edges.items():
            other = _package_of(target)
            if other != package and other not in allowed and target not in ROOT_MODULES:
                wrong.append(f"fluid_interactive/{module.replace('.', '/')}.py:{line} imports "
                             f"{target} ({package} may import {sorted(allowed) or 'nothing'})")
            if target in ROOT_MODULES:
                wrong.append(f"{module}:{line} imports the package root")
    assert not wrong, "\n".join(wrong)


def test_the_executor_never_imports_the_live_object():
    graph = _graph()
    wrong = [f"{m}:{line} imports {t}" for m, edges in graph.items()
             if m.startswith("runtime.plan") for t, line in edges.items()
             if t.startswith("runtime.") and not t.startswith("runtime.plan")]
    assert not wrong, "\n".join(wrong)


def _cycle(graph: dict[str, dict[str, int]], within: str) -> list[str] | None:
    nodes = {m: {t for t in e if t.startswith(within)} for m, e in graph.items()
             if m.startswith(within)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(nodes.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(nodes):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


#: every package of ours
PACKAGES = ["util", "ir", "backend", "kernels", "io", "ops", "passes", "runtime", "render",
            "distributed", "onnx", "frontend"]


def test_every_package_is_checked_for_circles():
    found = {m.split(".")[0] for m in _modules()} - set(ROOT_MODULES) - {"errors"}
    assert found == set(PACKAGES), found ^ set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package):
    found = _cycle(_graph(), package)
    assert found is None, "import circle: " + " -> ".join(found or [])


def test_no_import_circle_in_the_extension():
    found = _cycle(_graph(EXTENSION, "fluid"), "")
    assert found is None, "import circle: " + " -> ".join(found or [])


def test_an_import_inside_a_function_is_an_edge(tmp_path):
    """A circle broken by importing in a function body is still a circle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    if True:\n        from .a import g\n")
    graph = _graph(str(pkg), "pkg")
    assert graph["b"] == {"a": 3}
    assert _cycle(graph, "") in (["a", "b", "a"], ["b", "a", "b"])


def test_the_engine_never_imports_ipython():
    wrong = []
    for module, path in _modules().items():
        for name, line in _imports(module, path):
            top = name.split(".")[0]
            if top in ("IPython", "ipywidgets", "ipykernel", "fluid"):
                wrong.append(f"{module}:{line} imports {name}")
    assert not wrong, "\n".join(wrong)
