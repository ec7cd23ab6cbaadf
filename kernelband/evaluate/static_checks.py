"""Static checks of a candidate's source (ast only: nothing is imported or executed here)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from kernelband.parse import parse

# Candidates are kernels: these modules (and their submodules) are all they may import.
ALLOWED_IMPORTS = frozenset({
    "torch", "triton", "math", "functools", "typing", "itertools", "operator", "dataclasses",
    "collections", "numpy", "__future__", "enum", "abc", "numbers",
})
# Modules that only report (they cannot reach a timer, a thread or the file system the checks
# guard): a candidate may import them too where the original's own region does, so a rewrite
# that keeps the original's imports is not refused for them.
INHERITED_IMPORTS = frozenset({"warnings", "logging"})
# ... except these submodules, which patch checks, spawn processes or compile native code.
DENIED_IMPORTS = (
    "torch.testing", "triton.testing", "torch.multiprocessing", "torch.utils.cpp_extension",
    "torch.distributed", "torch.hub", "torch.cuda.memory", "triton.runtime.interpreter",
    "torch.overrides", "triton.runtime.jit",
)
DENIED_CALLS = frozenset({
    "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr",
    "breakpoint", "input", "memoryview", "help", "exit", "quit",
})
DENIED_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "builtins", "sys", "os"})
DENIED_ATTRS = frozenset({
    "__dict__", "__globals__", "__code__", "__class__", "__subclasses__", "__bases__", "__mro__",
    "__getattribute__", "__setattr__", "__delattr__", "__builtins__", "__closure__", "__func__",
    "__self__", "__module__", "__import__", "__reduce__", "__reduce_ex__", "__loader__",
    "__defaults__", "__kwdefaults__", "f_globals", "f_locals", "f_back", "gi_frame", "tb_frame",
    "_getframe", "modules",
    # torch internals that switch off the torch function mode counting torch work
    "_C", "DisableTorchFunction", "DisableTorchFunctionSubclass", "_disabled_torch_function_impl",
})


@dataclass(frozen=True)
class StaticRejection:
    """Why a candidate's source is refused before it runs."""

    reason: str
    line: int
    message: str


def _import_problem(module: str, line: int, inherited: frozenset[str] = frozenset()) -> StaticRejection | None:
    root = module.split(".")[0]
    denied = [d for d in DENIED_IMPORTS if module == d or module.startswith(d + ".")]
    if (root not in ALLOWED_IMPORTS and root not in inherited) or denied:
        allowed = ", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))
        return StaticRejection(
            "forbidden_import", line,
            f"line {line} imports {module!r}; a candidate may import only {allowed} "
            f"(not {', '.join(DENIED_IMPORTS)}), and {' or '.join(sorted(INHERITED_IMPORTS))} "
            "where the original imports them",
        )
    return None


@functools.lru_cache(maxsize=64)  # the same original is read for every candidate of its problem
def _inherited(original: str) -> frozenset[str]:
    """The INHERITED_IMPORTS `original` imports (none when it does not parse)."""
    try:
        tree = parse(original)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    return INHERITED_IMPORTS & frozenset(roots)


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Checker(ast.NodeVisitor):
    def __init__(self, inherited: frozenset[str] = frozenset()) -> None:
        self.modules: set[str] = set()  # names bound to imported modules
        self.found: StaticRejection | None = None
        self.inherited = inherited  # INHERITED_IMPORTS the original's region imports

    def _reject(self, reason: str, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        if self.found is None:
            self.found = StaticRejection(reason, line, f"line {line}: {what}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            problem = _import_problem(alias.name, node.lineno, self.inherited)
            if problem and self.found is None:
                self.found = problem
            self.modules.add((alias.asname or alias.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._reject("forbidden_import", node, "relative imports are not allowed in a candidate")
        module = node.module or ""
        for alias in node.names:
            problem = _import_problem(f"{module}.{alias.name}", node.lineno, self.inherited)
            problem = problem or _import_problem(module, node.lineno, self.inherited)
            if problem and self.found is None:
                self.found = problem
            self.modules.add(alias.asname or alias.name)

    def _check_target(self, target: ast.expr, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_target(element, node)
        elif isinstance(target, ast.Attribute | ast.Subscript):
            root = _root_name(target)
            if root in self.modules:
                self._reject("monkey_patching", node, f"assigns to an attribute of module {root!r}; "
                             "a candidate must not patch torch, triton or other libraries")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name in DENIED_CALLS:
            self._reject("forbidden_call", node, f"calls {name}(), which a candidate may not use")
        if name == "open" and not _safe_open(node):
            self._reject("forbidden_call", node, "open() of a path outside the sandbox temp dir "
                         "(only constant relative paths are allowed)")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in DENIED_NAMES and node.id not in self.modules:
            self._reject("forbidden_name", node, f"uses {node.id!r}, which a candidate may not touch")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in DENIED_ATTRS:
            self._reject("forbidden_attribute", node, f"uses attribute {node.attr!r} "
                         "(introspection, storage or monkey-patching hooks are not allowed)")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self._reject("forbidden_statement", node, "uses `global`; keep state out of the candidate "
                     "(results cached between calls are rejected anyway)")


def _safe_open(node: ast.Call) -> bool:
    if not node.args or not isinstance(node.args[0], ast.Constant):
        return False
    path = node.args[0].value
    return isinstance(path, str) and not path.startswith("/") and ".." not in path


def check_source(source: str, original: str | None = None) -> StaticRejection | None:
    """The first reason `source` may not run, or None when it passes. `original`: the problem's
    own region, whose INHERITED_IMPORTS the candidate may import too."""
    try:
        tree = parse(source)
    except SyntaxError as exc:
        return StaticRejection("syntax_error", exc.lineno or 0,
                               f"line {exc.lineno}: {exc.msg}; fix the candidate's Python syntax")
    except (ValueError, RecursionError, MemoryError) as exc:
        return StaticRejection("syntax_error", 0, f"the candidate cannot be parsed: {type(exc).__name__}")
    checker = _Checker(_inherited(original or ""))
    checker.visit(tree)
    return checker.found
