"""Normalised source: the syntax tree without comments, docstrings and formatting.

Two candidates with the same normalised source are the same program, so the second is recorded
as a duplicate of the first instead of being compiled and measured again.
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any

from kernelband.parse import parse

_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# The fields that hold statement lists (a docstring's owner is always a statement, or the
# module): If/For/While/With/Try bodies, their else and finally blocks, except handlers, cases.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _drop_docstrings(tree: ast.AST) -> None:
    """Remove the docstring of the module and of every function and class in it.

    Walks statements only: a function or class is never inside an expression, and visiting
    every expression node (ast.walk) took as long as parsing."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, _DOCUMENTED) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                node.body = node.body[1:] or [ast.Pass()]
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if isinstance(block, list):
                todo.extend(block)


def _dump(node: Any) -> str:
    """`ast.dump(node, annotate_fields=False, include_attributes=False)`, the same text, without
    its indentation bookkeeping (a third of the time; `_SAME_AS_AST_DUMP` checks the text)."""
    if isinstance(node, ast.AST):
        cls = type(node)
        args = []
        keywords = False  # once a field is left out, the ones after it are named
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                keywords = True
                continue
            if value is None and getattr(cls, name, ...) is None:
                keywords = True
                continue
            text = _dump(value)
            args.append(f"{name}={text}" if keywords else text)
        return f"{cls.__name__}({', '.join(args)})"
    if isinstance(node, list):
        return f"[{', '.join(map(_dump, node))}]"
    return repr(node)


def _ast_dump(tree: ast.AST) -> str:
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


_PROBE = parse('"""doc"""\nimport a as b\nasync def f(x: int = 1, *a, k=None, **kw) -> None:\n'
               '    """doc"""\n    global g\n    try:\n        y = [i async for i in x if i]\n'
               '    except (E, F) as e:\n        raise\n    finally:\n        return {1: ...}\n'
               'class C(B, metaclass=M):\n    match p:\n        case [1, *r] if r: pass\n'
               '        case {"k": v, **rest}: pass\n        case P(x=1) | None: pass\n'
               'lambda: (yield)\nprint(f"{x!r:>{w}}", sep=b"")\n')
# The text is what stored hashes were made from: if this Python's ast.dump writes a tree
# otherwise (its format changed across versions), ast.dump is used.
_SAME_AS_AST_DUMP = _dump(_PROBE) == _ast_dump(_PROBE)


def normalized_source(code: str) -> str:
    """The code's syntax tree as text (no comments, docstrings, whitespace or quote style).

    Code that does not parse normalises to its stripped lines, so it still compares equal to
    a copy that differs only in trailing whitespace.
    """
    try:
        tree = parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return "\n".join(line.rstrip() for line in code.strip().splitlines())
    _drop_docstrings(tree)
    return _dump(tree) if _SAME_AS_AST_DUMP else _ast_dump(tree)


def source_hash(code: str) -> str:
    """sha256 (hex) of the normalised source."""
    return hashlib.sha256(normalized_source(code).encode("utf-8")).hexdigest()
