"""load_runtime: fresh seeded inputs, separate original and candidate modules, all formats."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from problem_testkit import EXAMPLES, results_close

from kernelband.problem import load_problem
from kernelband.problem.model import CaseInputs, KernelProblem, ProblemLoadError
from kernelband.problem.runtime import KernelBenchRuntime, load_runtime


def _load(rel: str, format: str, workdir: Path) -> KernelProblem:
    path = EXAMPLES / rel
    return load_problem(path.read_text(), format, path.stem, workdir=workdir, device="cpu")


def test_native_inputs_are_fresh_and_seeded(workdir: Path) -> None:
    problem = _load("vector_add.py", "native", workdir)
    runtime = load_runtime(problem, None, "cpu", workdir=workdir)
    case = problem.cases[0]
    first, again, other = runtime.inputs(case, 1), runtime.inputs(case, 1), runtime.inputs(case, 2)
    assert torch.equal(first[0], again[0]) and first[0] is not again[0]
    assert not torch.equal(first[0], other[0])
    assert isinstance(first, CaseInputs) and first.case == case and first.seed == 1


def test_candidate_region_runs_in_its_own_module(workdir: Path) -> None:
    problem = _load("vector_add.py", "native", workdir)
    faster = problem.editable.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 256")
    wrong = problem.editable.replace("x + y, mask=mask", "x - y, mask=mask")
    good = load_runtime(problem, faster, "cpu", workdir=workdir)
    bad = load_runtime(problem, wrong, "cpu", workdir=workdir)
    assert good.candidate_module is not good.original_module
    case = problem.held_out_cases[0]
    args = good.inputs(case, 3)
    assert results_close(good.candidate(args), good.reference(args), (1e-5, 1e-5))
    args = bad.inputs(case, 3)
    assert not results_close(bad.candidate(args), bad.reference(args), (1e-5, 1e-5))
    # the original module is untouched by the broken candidate
    assert results_close(bad.original_module.entry(*args), bad.reference(args), (1e-5, 1e-5))


def test_tritonbench_results_are_picked_by_case(workdir: Path) -> None:
    problem = _load("tritonbench/relu.py", "tritonbench", workdir)
    runtime = load_runtime(problem, None, "cpu", workdir=workdir)
    case = problem.cases[1]
    args = runtime.inputs(case, 5)
    assert args == []
    out = runtime.candidate(args)
    assert out.shape == (33, 65) and torch.equal(out, runtime.reference(list(args)))
    assert not torch.equal(out, runtime.candidate(runtime.inputs(case, 6)))


def test_tritonbench_wrong_candidate_is_visible(workdir: Path) -> None:
    problem = _load("tritonbench/relu.py", "tritonbench", workdir)
    wrong = problem.editable.replace("tl.where(x > 0, x, 0.0)", "x")
    runtime = load_runtime(problem, wrong, "cpu", workdir=workdir)
    args = runtime.inputs(problem.cases[0], 0)
    assert not torch.equal(runtime.candidate(args), runtime.reference(args))


def test_kernelbench_held_out_case_changes_sizes_and_shares_weights(workdir: Path) -> None:
    problem = _load("kernelbench/linear.py", "kernelbench", workdir)
    runtime = load_runtime(problem, None, "cpu", workdir=workdir)
    public = runtime.inputs(problem.cases[0], 0)
    held = runtime.inputs(problem.held_out_cases[0], 0)
    assert public[0].shape == (8, 48) and held[0].shape == (13, 48)
    assert isinstance(runtime, KernelBenchRuntime)
    ref_model, new_model = runtime.models(problem.held_out_cases[0])
    assert torch.equal(
        ref_model.state_dict()["linear.weight"], new_model.state_dict()["linear.weight"]
    )


def test_candidate_syntax_error_line_is_counted_in_the_region(workdir: Path) -> None:
    problem = _load("vector_add.py", "native", workdir)
    broken = problem.editable.replace("def entry(x", "def entry((x")
    expected_line = (
        problem.editable.splitlines().index(
            next(line for line in problem.editable.splitlines() if line.startswith("def entry"))
        )
        + 1
    )
    with pytest.raises(ProblemLoadError, match="candidate: syntax error") as err:
        load_runtime(problem, broken, "cpu", workdir=workdir)
    assert err.value.line == expected_line


def test_case_inputs_survive_deepcopy(workdir: Path) -> None:
    problem = _load("tritonbench/relu.py", "tritonbench", workdir)
    runtime = load_runtime(problem, None, "cpu", workdir=workdir)
    args = runtime.inputs(problem.cases[0], 4)
    runtime.inputs(problem.cases[1], 9)  # a later call must not change what `args` stands for
    copied = copy.deepcopy(args)
    assert isinstance(copied, CaseInputs) and copied.case == problem.cases[0] and copied.seed == 4
    assert runtime.reference(copied).shape == (1000,)
