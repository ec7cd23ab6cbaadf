"""An original that disagrees with itself only during the checks (after the load-time
self-check found nothing) is not held against a candidate; a wrong candidate still fails.

On a GPU this is a kernel reading memory it never wrote: the load's runs find the same
leftovers, a check's runs do not. Here the original drifts only in runs seeded otherwise than
the load's self-check (seed 0): the checks' seeds are drawn at random from 1 up. (A marker file
created after the load no longer works: sandbox children have a private /tmp.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelband.evaluate import evaluate_candidate
from kernelband.evaluate.references import STORE, problem_key
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

LIMITS = SandboxLimits(wall_s=60.0, cpu_s=120, interpret=True)
REGION = '''import torch
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
    return drift(out)
'''
HARNESS = '''
########################################
_calls = [0]


def drift(out):
    if torch.initial_seed() != 0:  # every other run of the checks moves, as stale memory would
        out[0] += 1e-3 * (_calls[0] % 2)
    return out

def test_add():
    _calls[0] += 1
    x = torch.randn(1024, device="cuda")
    return {"a": add(x, x), "b": add(x, x * 2)}
'''


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield load_problem_sandboxed(REGION + HARNESS, "tritonbench", "rerun", LIMITS)
    shutdown_pool()


def test_the_load_time_self_check_saw_no_spread(problem: KernelProblem) -> None:
    assert problem.self_spread == {} and not problem.allow_nondeterminism


def test_the_original_is_accepted_and_the_verdict_says_it_is_nondeterministic(
    problem: KernelProblem,
) -> None:
    verdict = evaluate_candidate(problem, None, seeds=1, limits=LIMITS, device="cpu")
    assert verdict.correct, verdict.message
    assert "nondeterminism_allowed" in verdict.flags
    assert "disagreed with itself" in verdict.message


def test_a_candidate_off_by_far_more_than_the_originals_drift_is_still_wrong(
    problem: KernelProblem,
) -> None:
    region = problem.editable.replace("tl.load(y + offs, mask=m), mask=m)",
                                      "tl.load(y + offs, mask=m) + 0.5, mask=m)")
    assert region != problem.editable
    verdict = evaluate_candidate(problem, region, seeds=1, limits=LIMITS, device="cpu")
    assert not verdict.correct and verdict.reason == "wrong_result", verdict.message


# The same kernel moving only in the candidate's determinism re-run (the third run of the
# original's check): a race or a read of memory it never wrote can move in any run. Checking the
# original against itself, every run is the original's code, so that move is its own spread; taken
# from the reference's re-run alone (which did not move) it was refused against itself.
THIRD_RUN_HARNESS = '''
########################################
import sys


def drift(out):
    if torch.initial_seed() != 0 and sys.kb_runs == 3:  # not at load (seed 0)
        out[0] += 1e-3
    return out

def test_add():
    # one count for every import of this file in the process (reference and candidate)
    sys.kb_runs = getattr(sys, "kb_runs", 0) + 1
    x = torch.randn(1024, device="cuda")
    return {"a": add(x, x), "b": add(x, x * 2)}
'''


@pytest.fixture(scope="module")
def third_run() -> Iterator[KernelProblem]:
    yield load_problem_sandboxed(REGION + THIRD_RUN_HARNESS, "tritonbench", "third_run", LIMITS)
    shutdown_pool()


def test_an_original_moving_only_in_its_candidates_rerun_is_accepted_as_nondeterministic(
        third_run: KernelProblem) -> None:
    assert third_run.self_spread == {}  # the load saw three identical runs
    verdict = evaluate_candidate(third_run, None, seeds=1, limits=LIMITS, device="cpu")
    assert verdict.correct, verdict.message
    assert "nondeterminism_allowed" in verdict.flags and "disagreed with itself" in verdict.message
    # the spread kept for the problem's later candidates is the move this check saw
    assert STORE.spread(problem_key(third_run, "cpu"), "a") == pytest.approx(1e-3, rel=1e-3)
    far = third_run.editable.replace("tl.load(y + offs, mask=m), mask=m)",
                                     "tl.load(y + offs, mask=m) + 1.0, mask=m)")
    verdict = evaluate_candidate(third_run, far, seeds=1, limits=LIMITS, device="cpu")
    assert not verdict.correct and verdict.reason == "wrong_result", verdict.message
