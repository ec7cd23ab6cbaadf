"""Import a user's module from a file and inspect its source (sandbox child only)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from kernelband.problem.devices import device_scope
from kernelband.problem.model import ProblemLoadError

T = TypeVar("T")


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def kernel_names(tree: ast.Module) -> tuple[str, ...]:
    """Top-level functions decorated with `@triton.jit` (or `@jit`), in file order."""
    return tuple(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(_decorator_name(d) == "jit" for d in node.decorator_list)
    )


def defined_functions(tree: ast.Module) -> list[str]:
    """Names of top-level functions and classes, in file order."""
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]


def _user_line(exc: BaseException, filename: str) -> int | None:
    """The deepest line of the user's file in the traceback of `exc`."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename:
            line = frame.lineno
    return line


@contextmanager
def user_errors(what: str, filename: str) -> Iterator[None]:
    """Turn any exception raised by user code into a ProblemLoadError naming the line."""
    try:
        yield
    except ProblemLoadError:
        raise
    except Exception as exc:
        raise ProblemLoadError(
            f"{what} failed: {type(exc).__name__}: {exc}; fix the problem file",
            line=_user_line(exc, filename),
        ) from exc


def import_module_file(source: str, role: str, workdir: Path, device: str) -> ModuleType:
    """Write `source` to `workdir` and import it as a fresh, uniquely named module."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    name = f"kernelband_user_{role}_{digest}"
    path = (workdir / f"{name}.py").resolve()
    path.write_text(source)
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise ProblemLoadError(
            f"syntax error in the {role} module: {exc.msg}; fix the code", line=exc.lineno
        ) from exc
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton and dataclasses look modules up by name
    with user_errors(f"importing the {role} module", str(path)), device_scope(device):
        exec(code, module.__dict__)
    return module


def call_user(fn: Callable[..., T], what: str, module: ModuleType, *args: Any) -> T:
    """Call a user function, reporting its failures as ProblemLoadError with the line."""
    with user_errors(what, str(getattr(module, "__file__", ""))):
        return fn(*args)
