"""A candidate's correctness check run in its own timing runner: the judge's verdict is the one
a child of its own gives, the check comes before the runner's first prepare, a refused candidate
is never prepared or timed, held-out cases never reach the runner, and the runner is stopped
while the judge reads what it wrote. On the CPU interpreter, with the paired-timing fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kernelband.evaluate import evaluate_candidate
from kernelband.problem.model import KernelProblem
from kernelband.profile.measurement import CandidateRefused
from kernelband.profile.paired_runners import ORIGINALS, PairedConfig, start_runner
from kernelband.profile.paired_timing import measure_paired_runners
from kernelband.profile.runner_check import RunnerCheck, in_session
from kernelband.sandbox.limits import SandboxResult
from kernelband.sandbox.session import RunnerSession
from tests.unit.profile.paired_examples import paired_problem

QUICK = PairedConfig(rounds=3, min_rounds=3, batch_ms=10.0, seed=5, clock="cpu")


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield from paired_problem()


def wrong(problem: KernelProblem) -> str:
    return problem.editable.replace("2 * tl.load", "3 * tl.load")


@pytest.fixture()
def commands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every command sent to a runner session, in order."""
    seen: list[str] = []
    request = RunnerSession.request

    def spy(self: RunnerSession, command: dict[str, Any], timeout_s: float) -> Any:
        seen.append(str(command.get("cmd")))
        return request(self, command, timeout_s)

    monkeypatch.setattr(RunnerSession, "request", spy)
    return seen


@pytest.mark.parametrize("kind", ["right", "wrong"])
def test_the_verdict_in_the_runner_is_the_verdict_of_a_child_of_its_own(problem: KernelProblem, kind: str) -> None:
    editable = problem.editable if kind == "right" else wrong(problem)
    alone = evaluate_candidate(problem, editable, seeds=2, device="cpu")
    runner = start_runner(problem, editable, "cpu", QUICK, None)
    try:
        ran = evaluate_candidate(problem, editable, seeds=2, device="cpu",
                                 in_runner=in_session(runner.session, 120.0))
        assert runner.session.paused  # stopped while the judge read its files
    finally:
        runner.close()
    assert (ran.correct, ran.reason) == (alone.correct, alone.reason)
    assert ran.correct is (kind == "right")
    assert ran.details["runner_reported"]["load_s"] == 0.0  # nothing loaded again


def test_held_out_cases_and_references_never_run_in_a_candidates_runner(problem: KernelProblem) -> None:
    given: list[dict[str, Any]] = []
    runner = start_runner(problem, problem.editable, "cpu", QUICK, None)
    session_run = in_session(runner.session, 120.0)

    def spy(payload: dict[str, Any], names: list[str]) -> SandboxResult:
        given.append(payload)
        return session_run(payload, names)

    try:
        verdict = evaluate_candidate(problem, problem.editable, held_out=True, seeds=1, device="cpu", in_runner=spy)
    finally:
        runner.close()
    assert verdict.correct
    assert len(given) == 1  # the public cases; the held-out ones ran in a child of their own
    assert given[0]["problem"]["held_out_cases"] == []
    assert all("reference" not in step["files"] for step in given[0]["steps"])  # candidate calls only
    assert not given[0].get("again")


def test_the_check_runs_in_the_candidates_runner_before_its_first_prepare(
        problem: KernelProblem, commands: list[str]) -> None:
    gate = RunnerCheck(lambda in_runner: evaluate_candidate(problem, problem.editable, seeds=1, device="cpu",
                                                            in_runner=in_runner))
    run = measure_paired_runners(problem, problem.editable, "cpu", QUICK, until_checked=gate)
    assert gate.in_runner and gate.verdict is not None and gate.verdict.correct
    assert commands.count("check") == 1
    assert commands.index("check") > commands.index("load")
    assert "prepare" not in commands[commands.index("load"):commands.index("check")]
    assert "check_in_runner" in run.parts_s
    assert len(run.original_ms) == 3


def test_a_candidate_refused_in_its_runner_is_never_prepared_and_the_original_stays_warm(
        problem: KernelProblem, commands: list[str]) -> None:
    measure_paired_runners(problem, None, "cpu", QUICK)  # a warm original to keep
    key = ORIGINALS.key(problem, "cpu", QUICK)
    warm = ORIGINALS.idle[key].session.pid
    commands.clear()
    editable = wrong(problem)
    gate = RunnerCheck(lambda in_runner: evaluate_candidate(problem, editable, seeds=1, device="cpu",
                                                            in_runner=in_runner))
    with pytest.raises(CandidateRefused, match="wrong"):
        measure_paired_runners(problem, editable, "cpu", QUICK, until_checked=gate)
    assert gate.in_runner and gate.verdict is not None and not gate.verdict.correct
    after = commands[commands.index("check"):]
    assert "prepare" not in after and "run_batch" not in after
    assert ORIGINALS.idle[key].session.pid == warm


def test_without_a_runner_the_gate_checks_in_a_child_of_its_own() -> None:
    from kernelband.evaluate.verdict import Verdict

    given: list[object] = []

    def check(in_runner: object) -> Verdict:
        given.append(in_runner)
        return Verdict.reject("wrong_result", "differs")

    gate = RunnerCheck(check)
    with pytest.raises(CandidateRefused):
        gate()  # a path that never started a runner calls it before timing
    assert given == [None] and not gate.in_runner
    assert gate.alone().reason == "wrong_result" and given == [None]  # decided once


def test_references_missing_at_the_check_run_inside_the_turn_its_runner_started_in(
        problem: KernelProblem, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check runs in the shared GPU turn that starts the candidate's runner; a reference run
    it needs (a worker that kept none yet) must not ask for a second turn, which never nests."""
    from kernelband.evaluate import evaluator
    from kernelband.evaluate.references import STORE

    def no_turn(device: str, *, exclusive: bool, own: tuple[int, ...] = ()) -> Any:
        raise RuntimeError("a GPU turn was asked for while this thread holds one: turns never nest")

    STORE.clear()
    runner = start_runner(problem, problem.editable, "cpu", QUICK, None)
    monkeypatch.setattr(evaluator, "gpu_turn", no_turn)
    try:
        verdict = evaluate_candidate(problem, problem.editable, seeds=1, device="cpu",
                                     in_runner=in_session(runner.session, 120.0))
    finally:
        runner.close()
    assert verdict.correct and verdict.details["reference"] == "ran"


def test_an_original_checked_against_itself_in_its_runner_keeps_the_references_a_candidate_uses(
        problem: KernelProblem) -> None:
    from kernelband.evaluate.references import STORE

    alone = evaluate_candidate(problem, None, seeds=2, device="cpu")
    STORE.clear()
    runner = start_runner(problem, None, "cpu", QUICK, None)
    try:
        ran = evaluate_candidate(problem, None, seeds=2, device="cpu", in_runner=in_session(runner.session, 120.0))
    finally:
        runner.close()
    assert (ran.correct, ran.reason) == (alone.correct, alone.reason) == (True, "ok")
    after = evaluate_candidate(problem, problem.editable, seeds=2, device="cpu")
    assert after.correct and after.details["reference"] == "kept"  # no runner of the original needed
    with pytest.raises(ValueError, match="public cases only"):
        evaluate_candidate(problem, None, held_out=True, device="cpu", in_runner=in_session(runner.session, 1.0))
