"""Reference outputs come from a runner of the original once per problem and seed, then are kept."""

from __future__ import annotations

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
