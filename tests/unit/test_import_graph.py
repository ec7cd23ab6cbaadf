"""The module import graph of kernelband/, services/ and bench/: no circle, few imports inside
functions (each with its reason), and the rooms of the judge and the runner kept apart.

Built from the source with ast: for circles, imports at module top, inside functions and under
TYPE_CHECKING all count. `from a.b import c` is an edge to the module a.b.c when that is a
module, else to a.b; a package is its `__init__` module.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
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


@functools.cache
def _parse_text(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def parse(path: Path) -> ast.Module:
    """The file's syntax tree (parsed once per text: the tests below walk every file often)."""
    return _parse_text(path.read_text(encoding="utf-8"), str(path))


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


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def import_nodes(tree: ast.AST, loaded_only: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement; with `loaded_only`, those that run when the module is imported
    (not inside functions, not under TYPE_CHECKING)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif loaded_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        elif loaded_only and isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph(modules: dict[str, Path], loaded_only: bool = False) -> Graph:
    graph: Graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        is_package = path.name == "__init__.py"
        for node in import_nodes(parse(path), loaded_only):
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


# Imports of `kernelband` inside functions: each is a deliberate lazy load (a heavy library kept
# out of a light process, a module that may load only inside the sandbox child) and says so.
MAX_FUNCTION_IMPORTS = 20


@dataclass(frozen=True)
class FunctionImport:
    path: Path
    line: int
    text: str
    reason: str  # the comment on its line or above its block of imports ("" when none)


def _reason(lines: list[str], node: ast.Import | ast.ImportFrom, spans: list[range]) -> str:
    """The comment on the import's lines, else the comment just above its run of imports."""
    for text in lines[node.lineno - 1:node.end_lineno]:
        if "#" in text:
            return text.split("#", 1)[1].strip()
    above = node.lineno - 1
    while any(above in span for span in spans):  # an import of the same block
        above -= 1
    comment: list[str] = []
    while above >= 1 and lines[above - 1].strip().startswith("#"):  # a comment of several lines
        comment.insert(0, lines[above - 1].strip()[1:].strip())
        above -= 1
    return " ".join(comment)


def function_imports(root: Path, packages: tuple[str, ...], prefix: str = "kernelband") -> list[FunctionImport]:
    """Every import of a `prefix` module inside a function (nested functions counted once)."""
    found: dict[tuple[Path, int], FunctionImport] = {}
    for path in module_files(root, packages).values():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for function in ast.walk(parse(path)):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            nodes = [n for n in ast.walk(function) if isinstance(n, ast.Import | ast.ImportFrom)]
            spans = [range(n.lineno, (n.end_lineno or n.lineno) + 1) for n in nodes]
            for node in nodes:
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(name == prefix or name.startswith(prefix + ".") for name in names):
                    found[(path, node.lineno)] = FunctionImport(
                        path.relative_to(root), node.lineno, ast.unparse(node), _reason(lines, node, spans))
    return sorted(found.values(), key=lambda f: (str(f.path), f.line))


def test_imports_inside_functions_are_few_and_each_says_why() -> None:
    found = function_imports(ROOT, ("kernelband", "services"))
    listing = "\n".join(f"{f.path}:{f.line}: {f.text}  # {f.reason or 'NO REASON'}" for f in found)
    assert len(found) <= MAX_FUNCTION_IMPORTS, (
        f"{len(found)} imports of kernelband inside functions (at most {MAX_FUNCTION_IMPORTS}): move "
        f"them to the module top, or break the circle that keeps them there\n{listing}")
    assert all(f.reason for f in found), (
        "an import inside a function says why on its line or the line above:\n"
        + "\n".join(f"{f.path}:{f.line}: {f.text}" for f in found if not f.reason))


def test_a_function_import_and_its_reason_are_found(tmp_path: Path) -> None:
    package = tmp_path / "kernelband"
    package.mkdir()
    (package / "__init__.py").write_text("import kernelband.a\n")
    (package / "a.py").write_text(
        "def f():\n"
        "    # torch stays out of light processes\n"
        "    import torch\n"
        "    from kernelband import b\n"
        "\n"
        "    def g():\n"
        "        from kernelband.b import (\n"
        "            c,  # the child only\n"
        "        )\n"
        "    from kernelband.b import d\n"
        "    from os import path\n")
    found = function_imports(tmp_path, ("kernelband",))
    assert [(f.line, f.reason) for f in found] == [
        (4, "torch stays out of light processes"), (7, "the child only"), (10, "")]


# The judge (kernelband.evaluate) decides verdicts and never loads what runs untrusted work; the
# runner side (kernelband.runner and the problem modules that import a problem or a candidate)
# runs in sandbox children, which hold no database credentials and never write to it.
JUDGE = ("kernelband.evaluate",)
RUNNER_SIDE = ("kernelband.runner", "kernelband.problem.runtime", "kernelband.problem.usercode",
               "kernelband.problem.formats", "kernelband.problem.native", "kernelband.problem.tritonbench",
               "kernelband.problem.kernelbench")
DATABASE = ("kernelband.db", "services", "sqlalchemy", "psycopg2", "alembic")


def _in(module: str, rooms: tuple[str, ...]) -> bool:
    return any(module == room or module.startswith(room + ".") for room in rooms)


def _reached(graph: Graph, start: str) -> dict[str, str]:
    """Every module `start` loads, each with the module that imports it first."""
    parent = {start: ""}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child not in parent:
                parent[child] = node
                queue.append(child)
    return parent


def _chain(parent: dict[str, str], end: str) -> str:
    chain = [end]
    while parent[chain[-1]]:
        chain.append(parent[chain[-1]])
    return " -> ".join(reversed(chain))


def _external(path: Path, loaded_only: bool) -> set[str]:
    """The top-level names of what a file imports."""
    tree = parse(path)
    return {name.split(".")[0] for node in import_nodes(tree, loaded_only) if not getattr(node, "level", 0)
            for name in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])}


def room_violations(files: dict[str, Path], source: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    """Imports from modules of `source` of anything in `forbidden`: written anywhere in those
    modules, or loaded with them (module-top imports, followed through every module they load)."""
    everywhere, loaded = import_graph(files), import_graph(files, loaded_only=True)
    found = []
    for module in sorted(m for m in files if _in(m, source)):
        found += [f"{module} imports {target} ({files[module].name}:{line})"
                  for target, line in everywhere[module].items() if _in(target, forbidden)]
        found += [f"{module} imports {name} ({files[module].name})"
                  for name in _external(files[module], False) if _in(name, forbidden)]
        parent = _reached(loaded, module)
        found += [_chain(parent, other) for other in parent if other != module and _in(other, forbidden)]
        found += [f"{_chain(parent, other)} -> {name}" for other in parent if other != module
                  for name in _external(files[other], True) if _in(name, forbidden)]
    return found


def test_the_judge_never_imports_the_runner_side() -> None:
    files = module_files(ROOT, ("kernelband", "services"))
    found = room_violations(files, JUDGE, RUNNER_SIDE)
    assert not found, ("the judge must not import what runs untrusted work (move the shared piece "
                       "to a module both may import):\n" + "\n".join(found))


def test_the_runner_side_never_reaches_the_database() -> None:
    files = module_files(ROOT, ("kernelband", "services"))
    found = room_violations(files, RUNNER_SIDE, DATABASE)
    assert not found, ("code that runs untrusted work must not import the database or the "
                       "services:\n" + "\n".join(found))


def test_a_room_violation_is_found_through_the_modules_it_loads(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "judge.py").write_text("from pkg import shared\n")
    (package / "shared.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    import pkg.runner\n"
                                       "def late():\n    import pkg.runner\n")
    (package / "runner.py").write_text("import sqlalchemy\n")
    files = module_files(tmp_path, ("pkg",))
    assert room_violations(files, ("pkg.judge",), ("pkg.runner",)) == []  # not loaded with it
    (package / "shared.py").write_text("import pkg.runner\n")
    assert room_violations(files, ("pkg.judge",), ("pkg.runner",)) == [
        "pkg.judge -> pkg.shared -> pkg.runner"]
    assert room_violations(files, ("pkg.judge",), ("sqlalchemy",)) == [
        "pkg.judge -> pkg.shared -> pkg.runner -> sqlalchemy"]


MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    # a module past a screenful of screenfuls is two modules that have not been split yet
    long = {name: n for name, path in module_files(ROOT, PACKAGES).items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by what they own): {long}"
