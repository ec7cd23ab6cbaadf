"""Loader for the native format (see docs/problem-format.md)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

from kernelband.parse import parse
from kernelband.problem.cases import (
    check_unique,
    parse_cases,
    parse_inplace,
    parse_tolerances,
)
from kernelband.problem.editable import extract_region, parse_region
from kernelband.problem.model import KernelProblem, ProblemLoadError
from kernelband.problem.usercode import defined_functions, import_module_file, kernel_names


def region_kernels(
    region: str, where: str = "between the editable markers"
) -> tuple[tuple[str, ...], list[str]]:
    """(Triton kernel names, top-level function/class names) of an editable region."""
    tree = parse_region(region, "the editable region")
    kernels = kernel_names(tree)
    if not kernels:
        raise ProblemLoadError(
            f"no Triton kernel in the editable region: define at least one @triton.jit "
            f"function {where}"
        )
    return kernels, defined_functions(tree)


def parse_source(source: str) -> ast.Module:
    """Parse a whole problem file, reporting a syntax error with its line."""
    try:
        return parse(source)
    except SyntaxError as exc:
        raise ProblemLoadError(
            f"syntax error: {exc.msg}; fix the problem file", line=exc.lineno
        ) from exc


def _entry_name(module: ModuleType, region_names: list[str]) -> str:
    entry = getattr(module, "ENTRY", "entry")
    if not isinstance(entry, str):
        raise ProblemLoadError("ENTRY must be the name (a string) of the entry function")
    if entry not in region_names:
        raise ProblemLoadError(
            f"entry function {entry!r} is not defined in the editable region; define it between "
            "the markers or set ENTRY = '<name>' to the function that launches the kernels"
        )
    if not callable(getattr(module, entry, None)):
        raise ProblemLoadError(f"entry {entry!r} is not callable; it must be a function")
    return entry


def _require_callable(module: ModuleType, name: str, hint: str) -> None:
    value = getattr(module, name, None)
    if value is not None and not callable(value):
        raise ProblemLoadError(f"{name} must be a function; {hint}")
    if value is None and name == "make_inputs":
        raise ProblemLoadError(f"missing make_inputs: {hint}")


def load_native(source: str, name: str, workdir: Path, device: str) -> KernelProblem:
    """Load a native problem (imports the module: sandbox child only)."""
    parse_source(source)
    region = extract_region(source, "native")
    kernels, region_names = region_kernels(region)
    module = import_module_file(source, "original", workdir, device)
    entry = _entry_name(module, region_names)
    _require_callable(module, "make_inputs", "define make_inputs(case, device, seed) -> list")
    _require_callable(module, "reference", "define reference(*args) in PyTorch or leave it out")
    cases = parse_cases(getattr(module, "CASES", None), "CASES", held_out=False)
    if not cases:
        raise ProblemLoadError(
            "no cases: define CASES = [{'name': ..., 'params': {...}, 'dtype': 'float32'}, ...]"
        )
    held_out = parse_cases(getattr(module, "HELD_OUT_CASES", None), "HELD_OUT_CASES", held_out=True)
    check_unique(cases + held_out)
    nondeterminism = getattr(module, "ALLOW_NONDETERMINISM", False)
    if not isinstance(nondeterminism, bool):
        raise ProblemLoadError("ALLOW_NONDETERMINISM must be True or False")
    return KernelProblem(
        name=name,
        format="native",
        source=source,
        editable=region,
        entry=entry,
        kernel_names=kernels,
        cases=cases,
        held_out_cases=held_out,
        tolerances=parse_tolerances(getattr(module, "TOLERANCES", None)),
        inplace_outputs=parse_inplace(getattr(module, "INPLACE_OUTPUTS", None)),
        allow_nondeterminism=nondeterminism,
        description=(module.__doc__ or "").strip(),
    )
