"""Importer for KernelBench files: `Model`, `get_inputs()`, `get_init_inputs()`.

The reference is `Model`. The original kernel is a starting `ModelNew` that launches Triton
kernels, shipped in the same file between the editable markers; a candidate is a new
`ModelNew` region. A file as published (Model only, no markers) gets a placeholder region
and is translated first (kernelband/problem/translate.py). A case's params override module constants (e.g. `batch_size`) before
`get_inputs()` / `get_init_inputs()` run. Public cases: `CASES` if declared, else one
"default" case (the file's own constants). Held out: `HELD_OUT_CASES` if declared, else, when
the module defines an int `batch_size` = b, one case with batch_size = b + b // 2 + 1; else none.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from kernelband.problem.cases import check_unique, parse_cases, parse_tolerances
from kernelband.problem.devices import device_scope
from kernelband.problem.editable import BEGIN_MARKER, END_MARKER, extract_region
from kernelband.problem.model import Case, KernelProblem, ProblemLoadError
from kernelband.problem.native import parse_source, region_kernels
from kernelband.problem.translate import is_published_kernelbench, with_placeholder
from kernelband.problem.usercode import call_user, import_module_file

ENTRY = "ModelNew"


def _region(source: str) -> str:
    try:
        return extract_region(source, "kernelbench")
    except ProblemLoadError as exc:
        raise ProblemLoadError(
            f"{exc.reason}. A KernelBench problem either ships a starting `class ModelNew` that "
            f"launches Triton kernels between '{BEGIN_MARKER}' and '{END_MARKER}', or is a "
            "file as published (a PyTorch `Model` only, no markers, no ModelNew), which a "
            "translate step turns into Triton"
        ) from exc


def _check_api(module: ModuleType) -> None:
    if not isinstance(getattr(module, "Model", None), type):
        raise ProblemLoadError("no `class Model(nn.Module)`: define the PyTorch reference model")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn, None)):
            raise ProblemLoadError(f"missing {fn}(): define it to return a list of arguments")


def call_factory(module: ModuleType, fn: str, device: str) -> list[Any]:
    """get_inputs() / get_init_inputs() as a list, validated."""
    with device_scope(device):
        value = call_user(getattr(module, fn), f"calling {fn}()", module)
    if not isinstance(value, list | tuple):
        raise ProblemLoadError(f"{fn}() must return a list, got {type(value).__name__}")
    return list(value)


def _first_float_dtype(values: list[Any]) -> str:
    import torch

    for value in values:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return str(value.dtype).removeprefix("torch.")
    return "float32"


def _default_held_out(module: ModuleType, dtype: str) -> tuple[Case, ...]:
    batch = getattr(module, "batch_size", None)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        return ()
    params = {"batch_size": batch + batch // 2 + 1}
    return (Case(name="held_out_batch", params=params, dtype=dtype, held_out=True),)


def _check_params(module: ModuleType, cases: tuple[Case, ...]) -> None:
    for case in cases:
        unknown = [k for k in case.params if not hasattr(module, k)]
        if unknown:
            raise ProblemLoadError(
                f"case {case.name!r} sets {unknown}, which the module does not define; case "
                "params override module constants such as batch_size"
            )


def load_kernelbench(source: str, name: str, workdir: Path, device: str) -> KernelProblem:
    """Load a KernelBench file (imports it: sandbox child only)."""
    parse_source(source)
    translate = is_published_kernelbench(source, "kernelbench")
    kernels: tuple[str, ...]
    if translate:
        source, region = with_placeholder(source)
        kernels, region_names = (), [ENTRY]
    else:
        region = _region(source)
        kernels, region_names = region_kernels(region)
    if ENTRY not in region_names:
        raise ProblemLoadError(
            "the editable region must define `class ModelNew` (the Triton model)"
        )
    module = import_module_file(source, "original", workdir, device)
    _check_api(module)
    call_factory(module, "get_init_inputs", device)
    dtype = _first_float_dtype(call_factory(module, "get_inputs", device))
    default = [{"name": "default", "params": {}, "dtype": dtype}]
    cases = parse_cases(getattr(module, "CASES", default), "CASES", held_out=False)
    if not cases:
        raise ProblemLoadError("CASES is empty; remove it (one default case) or list cases")
    declared = getattr(module, "HELD_OUT_CASES", None)
    held = (
        parse_cases(declared, "HELD_OUT_CASES", held_out=True)
        if declared is not None
        else _default_held_out(module, dtype)
    )
    check_unique(cases + held)
    _check_params(module, cases + held)
    note = "" if held else " No held-out cases: the module defines no int batch_size."
    if translate:
        note += (" Published file (PyTorch only): each track first translates Model into a "
                 "Triton ModelNew; speedups are against the PyTorch Model.")
    return KernelProblem(
        name=name,
        format="kernelbench",
        source=source,
        editable=region,
        entry=ENTRY,
        kernel_names=kernels,
        cases=cases,
        held_out_cases=held,
        tolerances=parse_tolerances(getattr(module, "TOLERANCES", None)),
        allow_nondeterminism=bool(getattr(module, "ALLOW_NONDETERMINISM", False)),
        description=((module.__doc__ or "").strip() + f"\nKernelBench problem.{note}").strip(),
        needs_translation=translate,
    )
