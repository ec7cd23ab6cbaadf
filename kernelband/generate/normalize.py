"""Normalised source: the syntax tree without comments, docstrings and formatting.

Two candidates with the same normalised source are the same program, so the second is recorded
as a duplicate of the first instead of being compiled and measured again.
"""

from __future__ import annotations

import ast
import hashlib

_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _drop_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if not isinstance(node, _DOCUMENTED) or not node.body:
            continue
        first = node.body[0]
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            node.body = node.body[1:] or [ast.Pass()]


def normalized_source(code: str) -> str:
    """The code's syntax tree as text (no comments, docstrings, whitespace or quote style).

    Code that does not parse normalises to its stripped lines, so it still compares equal to
    a copy that differs only in trailing whitespace.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return "\n".join(line.rstrip() for line in code.strip().splitlines())
    _drop_docstrings(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def source_hash(code: str) -> str:
    """sha256 (hex) of the normalised source."""
    return hashlib.sha256(normalized_source(code).encode("utf-8")).hexdigest()
