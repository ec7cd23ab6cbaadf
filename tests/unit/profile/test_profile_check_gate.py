"""A measurement whose candidate is being checked beside it: nothing is timed before the check's
answer, a refused candidate is never timed, and the problem's warm original is kept for the next
candidate (a refusal is the candidate's fault, not the original's)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelband.problem import load_problem
from kernelband.problem.model import KernelProblem
from kernelband.profile import paired_commands
from kernelband.profile.measurement import CandidateRefused
from kernelband.profile.paired_runners import ORIGINALS, PairedConfig
from kernelband.profile.paired_timing import measure_paired_runners

FIXTURE = Path(__file__).parent / "fixtures" / "paired_problem.py"
QUICK = PairedConfig(rounds=3, min_rounds=3, batch_ms=10.0, seed=5, clock="cpu")


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield load_problem(FIXTURE.read_text(), "native", "paired_double")
    ORIGINALS.close_all()


@pytest.fixture()
def commands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every runner command and every call of the gate, in the order they happened."""
    seen: list[str] = []
    exchange = paired_commands.RunnerPair.exchange

    def spy(self: paired_commands.RunnerPair, commands: list[tuple[str, dict[str, Any]]],
            timeout_s: float | None = None) -> Any:
        seen.extend(f"{role}:{command['cmd']}" for role, command in commands)
        return exchange(self, commands, timeout_s)

    monkeypatch.setattr(paired_commands.RunnerPair, "exchange", spy)
    return seen


def test_nothing_is_timed_before_the_check_answers(problem: KernelProblem, commands: list[str]) -> None:
    def until_checked() -> None:
        time.sleep(0.2)  # the check still running when the runners are ready
        commands.append("checked")

    run = measure_paired_runners(problem, problem.editable, "cpu", QUICK, until_checked=until_checked)
    assert commands.count("checked") == 1
    gate = commands.index("checked")
    assert any(c.endswith(":prepare") for c in commands[:gate])  # both runners ready before it
    assert not any(c.endswith(":run_batch") for c in commands[:gate])
    assert any(c.endswith(":run_batch") for c in commands[gate:])
    assert len(run.original_ms) == 3


def test_a_refused_candidate_is_never_timed_and_the_original_stays_warm(
        problem: KernelProblem, commands: list[str]) -> None:
    key = ORIGINALS.key(problem, "cpu", QUICK)
    measure_paired_runners(problem, None, "cpu", QUICK)  # a warm original to keep
    warm = ORIGINALS.idle[key].session.pid
    commands.clear()

    def refuse() -> None:
        raise CandidateRefused("its correctness check refused it (wrong_result)")

    with pytest.raises(CandidateRefused):
        measure_paired_runners(problem, problem.editable, "cpu", QUICK, until_checked=refuse)
    assert any(c == "candidate:prepare" for c in commands)
    assert not any(c.endswith(":run_batch") for c in commands)
    assert ORIGINALS.idle[key].session.pid == warm


def test_a_warm_original_is_taken_without_waiting_for_a_gpu_turn(
        problem: KernelProblem, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a new runner uses the GPU; a shared turn waits behind every queued timed round."""
    from contextlib import contextmanager

    from kernelband.profile import paired_autotune

    turns: list[bool] = []

    @contextmanager
    def recording_turn(device: str, *, exclusive: bool, own: tuple[int, ...] = ()) -> Iterator[dict[str, float]]:
        turns.append(exclusive)
        yield {"waited_s": 0.0}

    monkeypatch.setattr(paired_autotune, "gpu_turn", recording_turn)
    ORIGINALS.close_all()
    first, _ = paired_autotune.tuned_original(problem, "cpu", QUICK, None, keep=True)
    assert turns == [False]  # a new runner: started in a shared turn
    ORIGINALS.give_back(problem, "cpu", QUICK, first)
    again, _ = paired_autotune.tuned_original(problem, "cpu", QUICK, None, keep=True)
    assert again.session.pid == first.session.pid and turns == [False]
    ORIGINALS.give_back(problem, "cpu", QUICK, again)
