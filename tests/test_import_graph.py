"""The package's import graph points one way: no module reaches, directly or
through others, back to itself, whether the import runs when the module loads
or only inside a function (a lazy import is a cycle deferred, not removed).

The graph is read from the source with :mod:`ast`, so it sees every import
statement wherever it sits; ``if TYPE_CHECKING:`` blocks are skipped, since
they never run. And the platform's services stay HTTP-free: importing them
must not load FastAPI or Starlette (the CLI and the live view's worker use
them without a web server).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import clinieval

PACKAGE_ROOT = Path(clinieval.__file__).parent


def module_names(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their __init__)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST):
    """Every import statement of a module, skipping TYPE_CHECKING blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: str, path: Path, node, known: dict[str, Path]) -> set[str]:
    """The package's modules one import statement loads (the deepest known
    name: ``from a.b import c`` loads ``a.b.c`` when c is a module)."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        parent = _resolve(module, path.name == "__init__.py", node)
        wanted = [f"{parent}.{alias.name}" for alias in node.names] + [parent]
    found = set()
    for name in wanted:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    known = module_names(root)
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        edges = set()
        for node in _statements(tree):
            edges |= _targets(module, path, node, known)
        # A module importing its own package's __init__ (or itself) is no cycle
        # of interest: the package is already loading.
        graph[module] = {t for t in edges if t != module and not module.startswith(t + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a list of modules, or None (iterative DFS)."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [], [(start, iter(sorted(graph[start])))]
        state[start] = 1
        path.append(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def test_the_finder_sees_cycles_and_lazy_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}  # a package's __init__ runs first
    assert graph["pkg.sub.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set()
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_the_import_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_platform_services_load_without_the_web_framework():
    services = sorted(n for n in module_names() if n.startswith("clinieval.platform"))
    assert services, "no clinieval.platform package"
    code = ("import sys\n" + "".join(f"import {name}\n" for name in services)
            + "web = sorted(m for m in sys.modules\n"
            "             if m.split('.')[0] in ('fastapi', 'starlette'))\n"
            "assert not web, web\n")
    subprocess.run([sys.executable, "-c", code], check=True)
