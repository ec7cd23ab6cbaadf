"""Autotuned kernels in paired timing: picked once in a tuning runner, taken by both timed runners.

On the CPU interpreter the fixture's autotuner keeps one config per key without timing (see the
fixture), so the whole path runs here in real runners: the tuning runner, the fresh original's
runner and the candidate's, and the notes that say what each ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem import load_problem
from kernelband.problem.model import KernelProblem
from kernelband.profile.paired_autotune import PICKS, differing_picks
from kernelband.profile.paired_result import measure_speedup
from kernelband.profile.paired_runners import ORIGINALS, OriginalRunnerError, PairedConfig

FIXTURES = Path(__file__).parent / "fixtures"
CONFIG = PairedConfig(rounds=4, min_rounds=3, batch_ms=20.0, seed=3, clock="cpu")
PICK = {"kernel": {"fingerprint": "f", "picks": [["(1,)", 2]], "configs": ["num_warps: 8"]}}


@pytest.fixture(scope="module")
def autotuned() -> Iterator[KernelProblem]:
    yield load_problem((FIXTURES / "autotuned_problem.py").read_text(), "native", "autotuned_double")
    ORIGINALS.close_all()


def _notes(problem: KernelProblem, editable: str | None) -> list[str]:
    measured = measure_speedup(problem, editable, "cpu", target="cpu", device_name="host", config=CONFIG)
    return list(measured.checks.get("notes") or [])


def test_both_timed_runners_run_the_picks_of_a_separate_tuning_runner(autotuned: KernelProblem) -> None:
    notes = _notes(autotuned, autotuned.editable)
    assert any("separate tuning runner" in n and "in both runners: double_kernel" in n for n in notes), notes
    assert not any("differ" in n for n in notes), notes
    picked = PICKS.get(ORIGINALS.key(autotuned, "cpu", CONFIG))
    assert picked is not None and picked["double_kernel"]["picks"]


def test_a_kernel_the_candidate_changed_autotunes_on_its_own(autotuned: KernelProblem) -> None:
    changed = autotuned.editable.replace("    mask = offsets < n\n", "    mask = offsets < n  # changed\n")
    assert changed != autotuned.editable
    notes = _notes(autotuned, changed)
    assert any("changed by the candidate, autotuned in its runner: double_kernel" in n for n in notes), notes


def test_a_problem_whose_source_never_names_autotune_is_not_tuned_apart() -> None:
    plain = load_problem((FIXTURES / "paired_problem.py").read_text(), "native", "plain_double_tuning")
    try:
        notes = _notes(plain, plain.editable)
        assert PICKS.get(ORIGINALS.key(plain, "cpu", CONFIG)) == {}
        assert not any("autotune" in n for n in notes), notes
    finally:
        ORIGINALS.close_all()


class Runners:
    """Replies per role and command, as `RunnerPair.ask` gives them."""

    def __init__(self, replies: dict[tuple[str, str], Any]) -> None:
        self.replies = replies

    def ask(self, role: str, command: dict[str, Any]) -> tuple[dict[str, Any], float]:
        reply = self.replies[(role, command["cmd"])]
        if isinstance(reply, Exception):
            raise reply
        return reply, 1.0


def test_picks_that_differ_for_the_same_kernel_are_noted_and_others_are_not() -> None:
    other = {"kernel": {**PICK["kernel"], "picks": [["(1,)", 0]], "configs": ["num_warps: 1"]},
             "changed": {"fingerprint": "g", "picks": [["(1,)", 0]]}}
    runners = Runners({("original", "autotune_picks"): {"picks": {**PICK, "changed": {"fingerprint": "h"}}},
                       ("candidate", "autotune_picks"): {"picks": other}})
    notes = differing_picks(runners.ask)
    assert len(notes) == 1 and "kernel differ" in notes[0] and "num_warps: 1" in notes[0]
    same = Runners({("original", "autotune_picks"): {"picks": PICK}, ("candidate", "autotune_picks"): {"picks": PICK}})
    assert differing_picks(same.ask) == []


def test_a_runner_that_will_not_say_gives_no_note() -> None:
    refused = Runners({("original", "autotune_picks"): OriginalRunnerError("original_runner_error", "no"),
                       ("candidate", "autotune_picks"): TimingRejected("runner_error", "no")})
    assert differing_picks(refused.ask) == []


def test_the_tuning_pass_and_the_timing_are_the_exclusive_turns_counted_as_held_alone() -> None:
    problem = load_problem((FIXTURES / "autotuned_problem.py").read_text(), "native", "autotuned_held_alone")
    try:
        first, again = (measure_speedup(problem, problem.editable, "cpu", target="cpu", device_name="host",
                                        config=CONFIG).checks["parts_s"] for _ in range(2))
    finally:
        ORIGINALS.close_all()
    assert first["tune"] > 0.0  # the first measurement of a problem picks its configs
    assert first["held_alone"] >= first["tune"] + first["timed_rounds"]
    assert first["load_original"] >= first["tune"]
    assert "tune" not in again and again["held_alone"] >= again["timed_rounds"]


def test_with_compile_before_tuning_the_configs_compile_in_a_shared_turn_and_are_timed_alone() -> None:
    from dataclasses import replace

    from kernelband.profile import paired_autotune
    from tests.unit.profile.paired_examples import TurnRecorder

    problem = load_problem((FIXTURES / "autotuned_problem.py").read_text(), "native", "autotuned_compile_first")
    turn = TurnRecorder()
    asked: list[str] = []
    ask = paired_autotune._ask

    def spy(runner: Any, role: str, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        asked.append(f"{command['cmd']}{'+' if command.get('on') else ''}:{turn.now}")
        return ask(runner, role, command, timeout_s)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(paired_autotune, "gpu_turn", turn)
            patch.setattr(paired_autotune, "_ask", spy)
            measured = measure_speedup(problem, problem.editable, "cpu", target="cpu", device_name="host",
                                       config=replace(CONFIG, compile_before_tuning=True))
    finally:
        ORIGINALS.close_all()
    tuning = asked[:asked.index("autotune_picks:exclusive") + 1]
    assert tuning == ["autotune_compile_only+:shared", "prepare:shared", "autotune_compile_only:shared",
                      "prepare:exclusive", "autotune_picks:exclusive"]
    parts = measured.checks["parts_s"]
    assert parts["tune_compile"] > 0.0 and parts["tune"] > 0.0
    notes = measured.checks.get("notes") or []
    assert any("in both runners: double_kernel" in n for n in notes), (notes, asked)
