"""Importer for TritonBench-G files: kernel code, a separator line of '#', then `test_*`.

Rules (docs/problem-format.md): the editable region is everything above the separator; the
first top-level `test_*` function below it is the test; each key of the dict it returns is a
case (any other return value is one case named "result"). Held out: the keys a module-level
`HELD_OUT = [...]` names, otherwise every third key (the 3rd, 6th, ...) once there are three
keys or more. Top-level statements below the separator that call `test_*` are skipped.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelband.problem import selfcheck
from kernelband.problem.cases import check_unique, parse_tolerances
from kernelband.problem.cuda_guard import guarded_launches
from kernelband.problem.devices import device_scope
from kernelband.problem.editable import extract_region, separator_line
from kernelband.problem.fair import fair_scope, zero_free_cuda_memory
from kernelband.problem.model import Case, KernelProblem, ProblemLoadError
from kernelband.problem.native import parse_source, region_kernels
from kernelband.problem.usercode import call_user, import_module_file


def test_function_name(source: str) -> str:
    """Name of the first top-level `test_*` function below the separator."""
    sep = separator_line(source)
    tree = parse_source(source)
    below = [n for n in tree.body if sep is not None and n.lineno > sep + 1]
    for node in below:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            return node.name
    raise ProblemLoadError(
        "no test function: below the '#' separator define a top-level function named test_* "
        "that builds inputs, calls the kernels and returns a dict of results"
    )


def _calls_test(node: ast.stmt) -> bool:
    return any(
        isinstance(sub, ast.Call)
        and isinstance(sub.func, ast.Name)
        and sub.func.id.startswith("test_")
        for sub in ast.walk(node)
    )


def runnable_source(source: str) -> str:
    """`source` with top-level test calls below the separator blanked (line numbers kept)."""
    sep = separator_line(source)
    lines = source.splitlines()
    for node in parse_source(source).body:
        skip = not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom)
        if skip and sep is not None and node.lineno > sep + 1 and _calls_test(node):
            end = node.end_lineno or node.lineno
            for i in range(node.lineno - 1, end):
                lines[i] = ""
    return "\n".join(lines) + "\n"


def run_test(module: ModuleType, test_name: str, seed: int, device: str) -> dict[str, Any]:
    """Run the test function in a fair scope seeded with `seed`, free GPU memory zeroed first;
    results keyed by case name."""
    zero_free_cuda_memory()
    with device_scope(device), fair_scope(seed):
        result = call_user(getattr(module, test_name), f"running {test_name}()", module)
    if isinstance(result, dict):
        return {str(key): value for key, value in result.items()}
    return {"result": result}


def _dtype_of(value: Any) -> str:
    import torch

    if isinstance(value, list | tuple) and value:
        return _dtype_of(value[0])
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).removeprefix("torch.")
        return name if name in ("float32", "float16", "bfloat16", "float64") else "float32"
    return "float32"


def _held_out_names(module: ModuleType, names: list[str]) -> set[str]:
    declared = getattr(module, "HELD_OUT", None)
    if declared is None:
        return {name for i, name in enumerate(names) if i % 3 == 2}
    if not isinstance(declared, list | tuple) or not {str(d) for d in declared} <= set(names):
        raise ProblemLoadError(
            f"HELD_OUT must list keys the test returns; the test returned {names}"
        )
    held = {str(d) for d in declared}
    if held == set(names):
        raise ProblemLoadError("HELD_OUT holds every case; leave at least one public case")
    return held


def _entry_name(
    source: str, test_name: str, kernels: tuple[str, ...], region_names: list[str]
) -> str:
    """The first region function the test calls (the launcher around the kernels)."""
    candidates = [n for n in region_names if n not in kernels]
    test_node = next(
        n
        for n in parse_source(source).body
        if isinstance(n, ast.FunctionDef) and n.name == test_name
    )
    for sub in ast.walk(test_node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id in candidates
        ):
            return sub.func.id
    if not candidates:
        raise ProblemLoadError(
            "no entry function: above the separator define a Python function that launches the "
            "Triton kernels, and call it from the test"
        )
    return candidates[0]


def load_tritonbench(source: str, name: str, workdir: Path, device: str) -> KernelProblem:
    """Load a TritonBench-G file (imports it and runs its test `selfcheck.SELF_RUNS` times:
    sandbox child only)."""
    parse_source(source)
    region = extract_region(source, "tritonbench")
    kernels, region_names = region_kernels(region, "above the '#' separator line")
    test_name = test_function_name(source)
    module = import_module_file(runnable_source(source), "original", workdir, device)
    with guarded_launches():  # as the checks run it (kernelband.problem.cuda_guard)
        results = run_test(module, test_name, seed=0, device=device)
    if not results:
        raise ProblemLoadError(f"no cases: {test_name}() returned an empty dict; return results")
    names = list(results)
    held = _held_out_names(module, names)
    cases = tuple(
        Case(name=n, params={"key": n}, dtype=_dtype_of(results[n]), held_out=n in held)
        for n in names
    )
    check_unique(cases)
    note = "" if held else " No held-out cases: the test returns fewer than three results."
    declared = parse_tolerances(getattr(module, "TOLERANCES", None))
    with guarded_launches():
        again = [run_test(module, test_name, 0, device) for _ in range(selfcheck.SELF_RUNS - 1)]
    spreads = selfcheck.measure_spread(results, *again)
    by_dtype = selfcheck.spread_by_dtype(results, *again) if spreads else {}
    derived = selfcheck.derived_tolerances(by_dtype, {d: d for d in by_dtype}, declared)
    if spreads:
        note += selfcheck.describe(spreads, derived)
    return KernelProblem(
        name=name,
        format="tritonbench",
        source=source,
        editable=region,
        entry=_entry_name(source, test_name, kernels, region_names),
        kernel_names=kernels,
        cases=tuple(c for c in cases if not c.held_out),
        held_out_cases=tuple(c for c in cases if c.held_out),
        tolerances={**derived, **declared},
        allow_nondeterminism=bool(getattr(module, "ALLOW_NONDETERMINISM", False) or spreads),
        description=f"TritonBench-G problem; test function {test_name}().{note}",
        self_spread={n: (v if math.isfinite(v) else None) for n, v in spreads.items()},
    )
