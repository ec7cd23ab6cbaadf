"""The module import graph of kernelband/, services/ and bench/ has no circle.

Built from the source with ast: imports at module top, inside functions and under
TYPE_CHECKING all count. `from a.b import c` is an edge to the module a.b.c when that is a
module, else to a.b; a package is its `__init__` module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kernelband", "services", "bench")

Graph = dict[str, dict[str, int]]  # module -> imported module -> first line


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the packages."""
    files: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest project module that `name` starts with (None outside the project)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> Graph:
    graph: Graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _imported_names(node, module, is_package)
            # `from a import b`: the submodule a.b when it exists, else the module a
            if isinstance(node, ast.ImportFrom):
                submodules = [n for n in names[:-1] if n in modules]
                names = submodules or names[-1:]
            for name in names:
                target = _resolve(name, modules)
                if target is not None and target != module:
                    edges.setdefault(target, node.lineno)
    return graph


def circles(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def describe(graph: Graph, circle: frozenset[str], files: dict[str, Path], root: Path) -> str:
    """One cycle through the circle's first module, each arrow with the importing line."""
    first = min(circle)
    paths = {first: [first]}
    queue = [first]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child == first:
                cycle = [*paths[node], first]
                return " -> ".join(f"{a} ({files[a].relative_to(root)}:{graph[a][b]})"
                                   for a, b in pairwise(cycle)) + f" -> {first}"
            if child in circle and child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    return ", ".join(sorted(circle))


def test_the_import_graph_has_no_circle() -> None:
    files = module_files(ROOT, PACKAGES)
    graph = import_graph(files)
    found = [describe(graph, c, files, ROOT) for c in circles(graph)]
    assert not found, (
        "import circles (move what both sides need into a module that imports neither):\n"
        + "\n".join(found))


def test_a_planted_circle_is_found_and_named(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def late():\n    from ..c import x\n")
    (package / "c.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\n")
    files = module_files(tmp_path, ("pkg",))
    graph = import_graph(files)
    assert circles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]
    assert graph["pkg.d"] == {"pkg.a": 1}
    assert describe(graph, circles(graph)[0], files, tmp_path) == (
        "pkg.a (pkg/a.py:1) -> pkg.sub.b (pkg/sub/b.py:2) -> pkg.c (pkg/c.py:3) -> pkg.a")
