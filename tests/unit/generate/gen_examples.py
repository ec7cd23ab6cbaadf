"""Bundled example problems, loaded once per test run through the sandboxed loader."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kernelband.problem.model import KernelProblem
from kernelband.sandbox import load_problem_sandboxed

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NAMES = ("vector_add", "softmax", "rmsnorm", "row_sum", "matmul", "swiglu", "cross_entropy")


@cache
def example_problem(name: str) -> KernelProblem:
    """The problem of examples/<name>.py."""
    return load_problem_sandboxed((EXAMPLES / f"{name}.py").read_text(), "native", name)
