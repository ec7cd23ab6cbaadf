"""The original checked against itself: every run of it measures its own spread.

Reference and candidate are then the same code, so a difference between any two of the check's
runs (the reference, its re-run, the candidate, the candidate's determinism re-run) is the
original's own nondeterminism. On a GPU a kernel with a race or a read of memory it never wrote
can move in the candidate's re-run alone; measuring the spread from the reference's re-run only
saw nothing, and the original was refused as nondeterministic against itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelband.evaluate import evaluate_candidate
from kernelband.evaluate.references import STORE, problem_key
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

LIMITS = SandboxLimits(wall_s=60.0, cpu_s=120, interpret=True)
SOURCE = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    if torch.initial_seed() != 0 and sys.kb_runs == 3:  # the third run of the check: the
        out[0] += 1e-3  # candidate's determinism re-run; the load's self-check (seed 0) never moves
    return out

########################################
import sys  # the region's drift reads the count below


def test_add():
    # one count for every import of this file in the process (reference and candidate)
    sys.kb_runs = getattr(sys, "kb_runs", 0) + 1
    x = torch.randn(1024, device="cuda")
    return {"a": add(x, x), "b": x.sum().item()}
'''


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield load_problem_sandboxed(SOURCE, "tritonbench", "rerun_moves", LIMITS)
    shutdown_pool()


def test_an_original_moving_only_in_its_own_rerun_is_accepted_as_nondeterministic(
        problem: KernelProblem) -> None:
    assert problem.self_spread == {}  # the load saw three identical runs
    verdict = evaluate_candidate(problem, None, seeds=1, limits=LIMITS, device="cpu")
    assert verdict.correct, verdict.message
    assert "nondeterminism_allowed" in verdict.flags
    assert "disagreed with itself" in verdict.message
    # the spread kept for later candidates is the move this check saw
    assert STORE.spread(problem_key(problem, "cpu"), "a") == pytest.approx(1e-3, rel=1e-3)


def test_a_candidate_moving_by_far_more_than_that_is_still_wrong(problem: KernelProblem) -> None:
    steady = "\n".join(line for line in problem.editable.splitlines()
                       if "kb_runs" not in line and "1e-3" not in line)  # no drift, no sys
    far = steady.replace("tl.load(y + offs, mask=m), mask=m)", "tl.load(y + offs, mask=m) + 1.0, mask=m)")
    verdict = evaluate_candidate(problem, far, seeds=1, limits=LIMITS, device="cpu")
    assert not verdict.correct and verdict.reason == "wrong_result", verdict.message
