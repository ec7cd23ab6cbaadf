"""Reference outputs come from a runner of the original once per problem and seed, then are kept;
a held-out acceptance runs its held-out children (the candidate's and the references') beside the
public ones, and the held-out answer counts only once the public cases passed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelband.evaluate import evaluate_candidate
from kernelband.evaluate.references import STORE
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

ROOT = Path(__file__).resolve().parents[3]
LIMITS = SandboxLimits(wall_s=20.0, cpu_s=120, interpret=True)


@pytest.fixture(scope="module")
def vector_add() -> Iterator[KernelProblem]:
    source = (ROOT / "examples" / "vector_add.py").read_text()
    yield load_problem_sandboxed(source, "native", "vector_add", LIMITS)
    shutdown_pool()


def test_a_candidates_references_are_run_once_then_kept(vector_add: KernelProblem) -> None:
    STORE.clear()
    first = evaluate_candidate(vector_add, vector_add.editable, seeds=2, limits=LIMITS, device="cpu")
    second = evaluate_candidate(vector_add, vector_add.editable, seeds=2, limits=LIMITS, device="cpu")
    assert first.correct and second.correct, (first.message, second.message)
    assert first.details["reference"] == "ran" and second.details["reference"] == "kept"
    assert second.details["base_seed"] == first.details["base_seed"]
    # held-out cases were not asked for: their references are run when they are
    held_out = evaluate_candidate(vector_add, vector_add.editable, held_out=True, seeds=2, limits=LIMITS,
                                  device="cpu")
    assert held_out.correct and held_out.details["reference"] == "ran"
    assert held_out.held_out_checked == len(vector_add.held_out_cases)


def test_after_the_originals_own_check_a_candidate_starts_one_runner(vector_add: KernelProblem) -> None:
    STORE.clear()
    original = evaluate_candidate(vector_add, None, held_out=True, seeds=2, limits=LIMITS, device="cpu")
    candidate = evaluate_candidate(vector_add, vector_add.editable, held_out=True, seeds=2, limits=LIMITS,
                                   device="cpu")
    assert original.correct and candidate.correct, (original.message, candidate.message)
    assert candidate.details["reference"] == "kept"


def test_held_out_children_run_beside_the_public_ones(vector_add: KernelProblem) -> None:
    STORE.clear()  # every reference is run: four children, the held-out two beside the public two
    started = time.perf_counter()
    verdict = evaluate_candidate(vector_add, vector_add.editable, held_out=True, seeds=2, limits=LIMITS,
                                 device="cpu")
    elapsed = time.perf_counter() - started
    assert verdict.correct, verdict.message
    assert verdict.held_out_checked == len(vector_add.held_out_cases)
    # the children's own seconds add up to more than the check took: some ran at the same time
    assert verdict.details["sandbox_wall_s"] > 1.1 * elapsed, (verdict.details["sandbox_wall_s"], elapsed)


def test_a_public_refusal_is_the_answer_whatever_the_held_out_part_found(vector_add: KernelProblem) -> None:
    wrong = vector_add.editable.replace("x + y, mask=mask", "x - y, mask=mask")
    assert wrong != vector_add.editable
    verdict = evaluate_candidate(vector_add, wrong, held_out=True, seeds=2, limits=LIMITS, device="cpu")
    assert not verdict.correct
    assert verdict.held_out_checked == 0
    assert "held-out" not in verdict.message, verdict.message
