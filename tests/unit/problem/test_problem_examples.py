"""Every bundled example loads, and its original kernel matches its reference on every case."""

from __future__ import annotations

from pathlib import Path

import pytest
from problem_testkit import EXAMPLES, results_close

from kernelband.problem import load_problem
from kernelband.problem.runtime import load_runtime

NATIVE = sorted(EXAMPLES.glob("*.py"))
TRITONBENCH = sorted((EXAMPLES / "tritonbench").glob("*.py"))
KERNELBENCH = sorted((EXAMPLES / "kernelbench").glob("*.py"))
ALL = (
    [(p, "native") for p in NATIVE]
    + [(p, "tritonbench") for p in TRITONBENCH]
    + [(p, "kernelbench") for p in KERNELBENCH]
)


def test_enough_examples_are_bundled() -> None:
    assert len(NATIVE) >= 6 and len(TRITONBENCH) >= 5 and len(KERNELBENCH) >= 5


@pytest.mark.parametrize(("path", "format"), ALL, ids=[f"{f}:{p.stem}" for p, f in ALL])
def test_example_original_matches_reference(path: Path, format: str, workdir: Path) -> None:
    problem = load_problem(path.read_text(), format, path.stem, workdir=workdir, device="cpu")
    runtime = load_runtime(problem, None, "cpu", workdir=workdir)
    for case in problem.cases + problem.held_out_cases:
        expected = runtime.reference(runtime.inputs(case, seed=7))
        actual = runtime.candidate(runtime.inputs(case, seed=7))
        assert results_close(actual, expected, problem.tolerance(case.dtype)), case.name


@pytest.mark.parametrize("path", NATIVE, ids=[p.stem for p in NATIVE])
def test_native_examples_follow_the_rules(path: Path, workdir: Path) -> None:
    problem = load_problem(path.read_text(), "native", path.stem, workdir=workdir, device="cpu")
    assert 2 <= len(problem.cases) <= 3 and 1 <= len(problem.held_out_cases) <= 2
    public_params = [c.params for c in problem.cases]
    assert all(c.params not in public_params for c in problem.held_out_cases)
    # a non-power-of-two size somewhere, so masking bugs show
    sizes = [v for c in problem.cases + problem.held_out_cases for v in c.params.values()]
    assert any(isinstance(v, int) and v & (v - 1) for v in sizes)
    assert "num_warps=" in problem.editable and "tl.constexpr" in problem.editable


def test_native_examples_cover_float16() -> None:
    assert sum('"float16"' in p.read_text() for p in NATIVE) >= 3
