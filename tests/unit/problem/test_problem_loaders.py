"""load_problem for the three formats, including every load error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.problem import ProblemLoadError, load_problem
from kernelband.problem.editable import BEGIN_MARKER, END_MARKER

KERNEL = """@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""

ENTRY = """

def entry(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
    return out
"""

CASES = """
def make_inputs(case, device, seed):
    return [torch.randn(case.params["n"], device=device)]


CASES = [{"name": "n100", "params": {"n": 100}}]
HELD_OUT_CASES = [{"name": "n37", "params": {"n": 37}, "dtype": "float16"}]
TOLERANCES = {"float16": (1e-3, 1e-3)}
INPLACE_OUTPUTS = (0,)
"""


def native(kernel: str = KERNEL, entry: str = ENTRY, tail: str = CASES) -> str:
    return (
        '"""Copies a vector."""\nimport torch\nimport triton\nimport triton.language as tl\n'
        f"{BEGIN_MARKER}\n{kernel}{entry}{END_MARKER}\n{tail}"
    )


def load(source: str, workdir: Path, format: str = "native") -> object:
    return load_problem(source, format, "p", workdir=workdir, device="cpu")


def load_error(source: str, workdir: Path, format: str = "native") -> ProblemLoadError:
    with pytest.raises(ProblemLoadError) as err:
        load(source, workdir, format)
    return err.value


def test_native_problem_loads_with_all_options(workdir: Path) -> None:
    problem = load_problem(native(), "native", "copy", workdir=workdir, device="cpu")
    assert problem.entry == "entry" and problem.kernel_names == ("copy_kernel",)
    assert [c.name for c in problem.cases] == ["n100"]
    assert [(c.name, c.dtype, c.held_out) for c in problem.held_out_cases] == [
        ("n37", "float16", True)
    ]
    assert problem.tolerance("float16") == (1e-3, 1e-3)
    assert problem.inplace_outputs == (0,)
    assert problem.description == "Copies a vector."
    assert problem.editable.startswith("@triton.jit")


def test_native_problem_survives_dict_round_trip(workdir: Path) -> None:
    from kernelband.problem.model import KernelProblem

    problem = load_problem(native(), "native", "copy", workdir=workdir, device="cpu")
    assert KernelProblem.from_dict(problem.to_dict()) == problem


def test_custom_entry_name(workdir: Path) -> None:
    source = native(
        entry=ENTRY.replace("def entry", "def launch"), tail=CASES + 'ENTRY = "launch"\n'
    )
    assert load_problem(source, "native", "p", workdir=workdir, device="cpu").entry == "launch"


def test_syntax_error_names_its_line(workdir: Path) -> None:
    error = load_error(native(entry="\n\ndef entry(x:\n    return x\n"), workdir)
    assert "syntax error" in error.reason and error.line == 12


def test_import_error_names_its_line(workdir: Path) -> None:
    error = load_error("import torch\nimport no_such_module_xyz\n" + native(), workdir)
    assert "ModuleNotFoundError" in error.reason and error.line == 2


def test_runtime_error_at_import_names_its_line(workdir: Path) -> None:
    error = load_error(native(tail=CASES + "x = 1 / 0\n"), workdir)
    assert "ZeroDivisionError" in error.reason and error.line == native().count("\n") + 1


def test_missing_entry(workdir: Path) -> None:
    error = load_error(native(entry="\n\ndef launch(x):\n    return x\n"), workdir)
    assert "entry function 'entry' is not defined" in error.reason


def test_entry_outside_region_is_refused(workdir: Path) -> None:
    error = load_error(native(entry="\n", tail=ENTRY + CASES), workdir)
    assert "not defined in the editable region" in error.reason


def test_no_cases(workdir: Path) -> None:
    tail = CASES.replace('CASES = [{"name": "n100", "params": {"n": 100}}]', "CASES = []")
    assert "no cases" in load_error(native(tail=tail), workdir).reason


def test_missing_make_inputs(workdir: Path) -> None:
    tail = 'CASES = [{"name": "a", "params": {}}]\n'
    assert "make_inputs" in load_error(native(tail=tail), workdir).reason


def test_no_triton_kernel_in_region(workdir: Path) -> None:
    error = load_error(native(kernel="def copy_kernel():\n    pass\n"), workdir)
    assert "no Triton kernel" in error.reason


@pytest.mark.parametrize(
    ("cases", "message"),
    [
        ('["n100"]', "must be a dict"),
        ('[{"params": {}}]', "non-empty string 'name'"),
        ('[{"name": "a", "params": 3}]', "'params' must be a dict"),
        ('[{"name": "a", "dtype": "int7"}]', "dtype 'int7'"),
        ('[{"name": "a", "shape": [1]}]', "unknown keys"),
        ('[{"name": "a", "params": {"t": object()}}]', "plain JSON"),
        ('[{"name": "n37"}]', "used twice"),
        ('{"name": "a"}', "must be a list"),
    ],
)
def test_bad_case_entries(workdir: Path, cases: str, message: str) -> None:
    tail = CASES.replace('[{"name": "n100", "params": {"n": 100}}]', cases)
    assert message in load_error(native(tail=tail), workdir).reason


def test_bad_tolerances(workdir: Path) -> None:
    tail = CASES.replace("(1e-3, 1e-3)", "0.1")
    assert "TOLERANCES" in load_error(native(tail=tail), workdir).reason


def test_unknown_format_and_empty_source(workdir: Path) -> None:
    assert "unknown problem format" in load_error(native(), workdir, format="cuda").reason
    assert "empty" in load_error("  \n", workdir).reason


TB_KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def double(x):
    out = torch.empty_like(x)
    double_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
    return out
"""
SEPARATOR = "#" * 40 + "\n"
TB_TEST = """

def test_double():
    results = {}
    for i in range(KEYS):
        results[f"test_case_{i + 1}"] = double(torch.randn(10 + i, device="cuda"))
    return results

"""


def tritonbench(keys: int = 6, extra: str = "") -> str:
    return TB_KERNEL + SEPARATOR + f"KEYS = {keys}\n" + TB_TEST + extra


def test_tritonbench_holds_out_every_third_key(workdir: Path) -> None:
    problem = load_problem(tritonbench(), "tritonbench", "double", workdir=workdir, device="cpu")
    assert problem.entry == "double" and problem.kernel_names == ("double_kernel",)
    assert [c.name for c in problem.held_out_cases] == ["test_case_3", "test_case_6"]
    assert len(problem.cases) == 4
    assert "test_double" not in problem.editable


def test_tritonbench_declared_held_out(workdir: Path) -> None:
    source = tritonbench(extra='HELD_OUT = ["test_case_1"]\n')
    problem = load_problem(source, "tritonbench", "double", workdir=workdir, device="cpu")
    assert [c.name for c in problem.held_out_cases] == ["test_case_1"]


def test_tritonbench_top_level_test_call_is_skipped(workdir: Path) -> None:
    # the call raises if it runs: loading must not execute it
    source = tritonbench(extra="result_gold = test_double(); raise SystemExit(3)\n")
    source = source.replace("raise SystemExit(3)", "1 / 0")
    problem = load_problem(source, "tritonbench", "double", workdir=workdir, device="cpu")
    assert len(problem.cases) == 4


def test_tritonbench_two_keys_have_no_held_out(workdir: Path) -> None:
    problem = load_problem(tritonbench(keys=2), "tritonbench", "d", workdir=workdir, device="cpu")
    assert problem.held_out_cases == () and "No held-out" in problem.description


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (TB_KERNEL + TB_TEST, "no separator"),
        (TB_KERNEL + SEPARATOR + "x = 1\n", "no test function"),
        (
            TB_KERNEL.replace("@triton.jit", "") + SEPARATOR + "KEYS = 3\n" + TB_TEST,
            "no Triton kernel",
        ),
        (tritonbench(keys=0), "no cases"),
        (tritonbench(extra='HELD_OUT = ["nope"]\n'), "HELD_OUT must list keys"),
        (tritonbench(keys=1, extra='HELD_OUT = ["test_case_1"]\n'), "every case"),
        (
            tritonbench().replace("double(torch.randn", "double(torch.nope"),
            "running test_double() failed",
        ),
    ],
)
def test_tritonbench_load_errors(workdir: Path, source: str, message: str) -> None:
    assert message in load_error(source, workdir, "tritonbench").reason


KB_HEAD = """import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    def forward(self, x):
        return x * 2


batch_size = 8
dim = 10


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""
KB_REGION = f"""{BEGIN_MARKER}
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        double_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
        return out
{END_MARKER}
"""


def test_kernelbench_default_cases(workdir: Path) -> None:
    problem = load_problem(KB_HEAD + KB_REGION, "kernelbench", "kb", workdir=workdir, device="cpu")
    assert problem.entry == "ModelNew" and problem.kernel_names == ("double_kernel",)
    assert [(c.name, c.params) for c in problem.cases] == [("default", {})]
    assert [(c.name, c.params) for c in problem.held_out_cases] == [
        ("held_out_batch", {"batch_size": 13})
    ]


def test_kernelbench_without_batch_size_has_no_held_out(workdir: Path) -> None:
    source = (KB_HEAD + KB_REGION).replace("batch_size", "rows")
    problem = load_problem(source, "kernelbench", "kb", workdir=workdir, device="cpu")
    assert problem.held_out_cases == () and "No held-out" in problem.description


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # a ModelNew without markers (a file as published has neither: it is translated)
        (KB_HEAD + "\nclass ModelNew(Model):\n    pass\n", "starting `class ModelNew`"),
        (
            KB_HEAD + KB_REGION.replace("class ModelNew", "class Other"),
            "must define `class ModelNew`",
        ),
        (KB_HEAD + KB_REGION.replace("@triton.jit", ""), "no Triton kernel"),
        (KB_HEAD.replace("class Model(", "class Base(") + KB_REGION, "no `class Model"),
        (KB_HEAD.replace("def get_inputs", "def inputs") + KB_REGION, "missing get_inputs"),
        (KB_HEAD.replace("return []", "return 5") + KB_REGION, "must return a list"),
        (
            KB_HEAD + KB_REGION + 'CASES = [{"name": "a", "params": {"nope": 1}}]\n',
            "does not define",
        ),
    ],
)
def test_kernelbench_load_errors(workdir: Path, source: str, message: str) -> None:
    assert message in load_error(source, workdir, "kernelbench").reason


def test_published_kernelbench_file_loads_to_be_translated(workdir: Path) -> None:
    source = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
              "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
              "def get_inputs():\n    return [torch.randn(8)]\n\n\n"
              "def get_init_inputs():\n    return []\n")
    problem = load_problem(source, "kernelbench", "relu", workdir=workdir, device="cpu")
    assert problem.needs_translation and "class ModelNew(Model)" in problem.editable
