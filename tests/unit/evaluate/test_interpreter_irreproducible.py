"""An original whose NaN positions move between runs in the CPU interpreter is refused as the
interpreter's failure, naming a GPU target; a candidate doing the same is simply wrong."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelband.evaluate import evaluate_candidate
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool
from kernelband.sandbox.device import GPU_TARGETS

LIMITS = SandboxLimits(wall_s=60.0, cpu_s=120, interpret=True)
SOURCE = '''import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


def copy(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out

########################################

import sys


def test_copy():
    # a count shared by every import of this file in the process (reference and candidate)
    sys.moving_nan_runs = getattr(sys, "moving_nan_runs", 0) + 1
    out = copy(torch.randn(64, device="cuda"))
    out[sys.moving_nan_runs % 8] = float("nan")  # the NaN lands somewhere else in every run
    return {"a": out, "b": copy(torch.ones(8, device="cuda"))}
'''


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield load_problem_sandboxed(SOURCE, "tritonbench", "moving_nan", LIMITS)
    shutdown_pool()


def test_the_original_is_refused_as_the_interpreters_failure(problem: KernelProblem) -> None:
    assert problem.self_spread.get("a", 0.0) is None  # the load saw the NaN move
    verdict = evaluate_candidate(problem, None, seeds=1, limits=LIMITS, device="cpu")
    assert not verdict.correct
    assert verdict.reason == "interpreter_irreproducible", verdict.message
    assert "CPU Triton interpreter" in verdict.message and GPU_TARGETS in verdict.message


def test_a_candidate_with_the_same_behaviour_is_wrong_not_the_interpreter(problem: KernelProblem) -> None:
    verdict = evaluate_candidate(problem, problem.editable, seeds=1, limits=LIMITS, device="cpu")
    assert not verdict.correct and verdict.reason in ("wrong_result", "nan_mismatch"), verdict.message
