"""A candidate, and separately a problem module, that try to change the outcome from inside
their own process: the verdict the judge returns is unchanged by every forgery.

Each forgery reaches its target through attribute chains of allowed modules
(`getattr(torch, "sy" + "s").modules`, `getattr(torch, "o" + "s")`); most pass the static checks
as they are, and the static checks are switched off elsewhere to test what the runtime does. The stored figures (`max_abs_err`) are
checked against the judge's own reference outputs, not just the reason.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernelband.evaluate import Verdict, check_source, evaluate_candidate
from kernelband.evaluate.references import STORE, problem_key
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

ROOT = Path(__file__).resolve().parents[3]
FORGERY = Path(__file__).parent / "adversarial" / "forgery"
LIMITS = SandboxLimits(wall_s=20.0, cpu_s=120, memory_bytes=2 * 1024**3, max_procs=30)
FORGED_ERR = 1e-09
CANDIDATE_MARK = Path("/tmp/kb_judge_unpickled_a_payload")
PROBLEM_MARK = Path("/tmp/kb_judge_unpickled_a_problem_payload")


@pytest.fixture(scope="module")
def vector_add() -> Iterator[KernelProblem]:
    source = (ROOT / "examples" / "vector_add.py").read_text()
    yield load_problem_sandboxed(source, "native", "vector_add", LIMITS)
    shutdown_pool()


def _zeros(region: str) -> str:
    wrong = region.replace("tl.store(out_ptr + offsets, x + y, mask=mask)",
                           "tl.store(out_ptr + offsets, x * 0.0, mask=mask)")
    assert wrong != region
    return wrong


def _evaluate(problem: KernelProblem, editable: str | None, held_out: bool = True) -> Verdict:
    return evaluate_candidate(problem, editable, held_out=held_out, seeds=3, limits=LIMITS,
                              device="cpu", static_checks=False)


def _true_error_of_zeros(problem: KernelProblem, verdict: Verdict, case: str = "n1000") -> float:
    """max |reference| on the first failing check: what a zeros output is really off by."""
    reference = STORE.output(problem_key(problem, "cpu"), case, int(verdict.details["base_seed"]))
    assert isinstance(reference, torch.Tensor)
    return float(reference.double().abs().max())


def _assert_wrong_with_the_judges_error(problem: KernelProblem, verdict: Verdict) -> None:
    assert not verdict.correct
    assert verdict.reason == "wrong_result", verdict.message
    assert verdict.message.startswith("wrong_result: case n1000, seed 0")
    error = _true_error_of_zeros(problem, verdict)
    assert error > 1.0
    assert verdict.details["max_abs_err"] == error  # computed by the judge, not the forged 1e-09
    assert f"max_abs_err {error:.3g}" in verdict.message


@pytest.mark.parametrize("name", ["forge_json_serializer", "forge_verdict_class",
                                  "forge_compare_functions", "forge_outputs_index"])
def test_a_candidates_forgery_in_its_own_process_changes_nothing(vector_add: KernelProblem,
                                                                  name: str) -> None:
    verdict = _evaluate(vector_add, (FORGERY / f"{name}.py").read_text())
    _assert_wrong_with_the_judges_error(vector_add, verdict)


@pytest.mark.parametrize("name", ["forge_json_serializer", "forge_verdict_class", "forge_compare_functions"])
def test_forgeries_the_static_checks_let_through_are_refused_on_the_service_path(
    vector_add: KernelProblem, name: str,
) -> None:
    text = (FORGERY / f"{name}.py").read_text()
    assert check_source(text) is None  # attribute chains: no denied name, import or call
    verdict = evaluate_candidate(vector_add, text, held_out=True, seeds=3, limits=LIMITS, device="cpu")
    _assert_wrong_with_the_judges_error(vector_add, verdict)


def test_output_files_the_judge_cannot_load_as_plain_tensors_are_refused_and_run_nothing(
    vector_add: KernelProblem,
) -> None:
    CANDIDATE_MARK.unlink(missing_ok=True)
    verdict = _evaluate(vector_add, (FORGERY / "forge_pickle_payload.py").read_text())
    assert verdict.reason == "output_not_plain_tensor", verdict.message
    assert "weights" in verdict.message or "plain tensors" in verdict.message
    assert not CANDIDATE_MARK.exists()  # nothing was unpickled in the judge's process


def test_runner_words_about_a_held_out_case_are_not_shown(vector_add: KernelProblem) -> None:
    text = (FORGERY / "heldout_leaks_shape.py").read_text()
    assert _evaluate(vector_add, text, held_out=False).correct
    verdict = _evaluate(vector_add, text)
    assert verdict.reason == "candidate_error", verdict.message
    assert "held-out case #1" in verdict.message
    assert "3001" not in verdict.message and "777" not in verdict.message


@pytest.mark.parametrize(("name", "reason"), [("heldout_reads_the_payload", "load_error"),
                                              ("heldout_forges_a_report", "candidate_error")])
def test_held_out_cases_reach_only_a_runner_whose_words_are_not_shown(vector_add: KernelProblem, name: str,
                                                                       reason: str) -> None:
    text = (FORGERY / f"{name}.py").read_text()
    public = _evaluate(vector_add, text, held_out=False)
    assert public.correct, public.message  # the public cases' runner never held the held-out ones
    verdict = _evaluate(vector_add, text)
    assert verdict.reason == reason, verdict.message
    assert "n3001" not in verdict.message and "n777" not in verdict.message
    assert "held-out" in verdict.message
    assert "stderr_tail" not in verdict.details or "n3001" not in verdict.details["stderr_tail"]


@pytest.fixture(scope="module")
def forging_problem() -> KernelProblem:
    source = (FORGERY / "problem_forges_its_runners.py").read_text()
    return load_problem_sandboxed(source, "native", "vector_add_forging", LIMITS)


def test_a_problem_module_forging_its_runners_cannot_pass_a_wrong_candidate(
    forging_problem: KernelProblem,
) -> None:
    verdict = _evaluate(forging_problem, _zeros(forging_problem.editable))
    _assert_wrong_with_the_judges_error(forging_problem, verdict)


def test_a_problem_module_forging_its_runners_gets_the_judges_figures(
    forging_problem: KernelProblem,
) -> None:
    original = _evaluate(forging_problem, None)
    assert original.correct, original.message
    assert original.details["max_abs_err"] == 0.0  # the judge's own, not the forged 1e-09
    candidate = _evaluate(forging_problem, forging_problem.editable)
    assert candidate.correct and candidate.details["max_abs_err"] == 0.0, candidate.message


def test_a_problem_module_whose_outputs_are_pickle_payloads_is_refused_and_runs_nothing() -> None:
    PROBLEM_MARK.unlink(missing_ok=True)
    source = (FORGERY / "problem_pickles_its_outputs.py").read_text()
    problem = load_problem_sandboxed(source, "native", "vector_add_pickling", LIMITS)
    for editable in (None, problem.editable):
        verdict = _evaluate(problem, editable)
        assert verdict.reason == "reference_output_unreadable", verdict.message
    assert not PROBLEM_MARK.exists()


def test_the_judge_imports_no_runner_and_no_problem_runtime() -> None:
    code = ("import sys, kernelband.evaluate, kernelband.evaluate.judge, kernelband.evaluate.evaluator\n"
            "bad = ('kernelband.runner', 'kernelband.problem.runtime', 'kernelband.problem.usercode',"
            " 'kernelband.problem.tritonbench', 'kernelband.problem.native', 'kernelband.problem.kernelbench')\n"
            "print([m for m in sys.modules if m.startswith(bad)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
