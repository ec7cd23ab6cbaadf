"""Test doubles for the API tests (a uniquely named module, importable from this directory)."""

from __future__ import annotations

import ast

from kernelband.parse import parse
from kernelband.problem.model import Case, KernelProblem, ProblemLoadError


def parsing_loader(source: str, format: str, name: str) -> KernelProblem:
    """Test double of the sandboxed loader: parses (never executes) and names the problem."""
    try:
        tree = parse(source)
    except SyntaxError as exc:
        raise ProblemLoadError(f"syntax error: {exc.msg}", exc.lineno) from exc
    funcs = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    if "entry" not in funcs:
        raise ProblemLoadError("no entry function 'entry' found; define def entry(...)")
    return KernelProblem(
        name=name, format="native", source=source, editable=source, entry="entry",
        kernel_names=tuple(f for f in funcs if f != "entry"),
        cases=(Case("small", {"n": 1024}),), held_out_cases=(Case("odd", {"n": 1001}, held_out=True),),
    )
