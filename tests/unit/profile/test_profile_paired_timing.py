"""Paired timing in two runners on the CPU interpreter: the judge's clock decides every number.

The host is shared (wall time there measures its load), so these runs use the CPU time the OS
charges to each runner, read by the judge from /proc: a clock outside the runner, like the
judge's wall clock on a GPU. The tests assert what must hold: an A/A interval contains 1.0, a
candidate doing the work twice is significantly slower, and nothing a candidate does inside its
own process (its timers, its replies, threads meant to slow the original) buys it a speedup.
The runners themselves (paused, pinned, kept warm, stopped): test_profile_paired_timing_runners.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem import load_problem
from kernelband.problem.model import KernelProblem
from kernelband.profile.paired_result import measure_speedup, measurement_of
from kernelband.profile.paired_runners import ORIGINALS, OriginalRunnerError, PairedConfig, Runner
from kernelband.profile.paired_timing import measure_paired_runners, prepare_first
from tests.unit.profile.paired_examples import (
    CONFIG,
    FIXTURE,
    LAUNCH,
    SLOWER,
    TurnRecorder,
    measure,
    paired_problem,
    with_prelude,
)


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield from paired_problem()


@pytest.mark.alone  # asserts on times: run with nothing beside it
def test_original_against_itself_gives_an_interval_containing_one(problem: KernelProblem) -> None:
    # A 95% interval misses the truth in about 1 run of 20 by construction: one repeat allowed.
    results = []
    for seed in (7, 8):
        measured = measure(problem, None, replace(CONFIG, seed=seed))
        assert measured.speedup is not None
        results.append(measured.speedup)
        if measured.speedup.contains_one:
            break
    speedup = results[-1]
    assert speedup.contains_one, [s.describe() for s in results]
    assert speedup.describe().endswith("no significant speedup")
    assert CONFIG.min_rounds <= speedup.rounds <= CONFIG.rounds and speedup.baseline == "original"
    assert measured.label == "measured" and "not kernel timings" in measured.method
    assert measured.time_ms == pytest.approx(
        measured.checks["baseline_ms"] / speedup.point)
    assert measured.checks["verified_rounds"] >= 1


@pytest.mark.alone  # asserts on times: run with nothing beside it
def test_a_candidate_doing_the_work_twice_is_significantly_slower(problem: KernelProblem) -> None:
    twice = problem.editable.replace(LAUNCH, LAUNCH + LAUNCH)
    assert twice != problem.editable
    measured = measure(problem, twice)
    assert measured.speedup is not None
    assert measured.speedup.high < 1.0, measured.speedup.describe()
    assert 0.25 < measured.speedup.point < 0.8
    assert measured.time_ms > measured.checks["baseline_ms"]


FORGER = '''
import json as _json
import time as _time
import torch as _torch

_real = _time.perf_counter
_time.perf_counter = lambda: _real() / 5.0  # every clock of this process runs 5x slow
_torch.cuda.Event = type("Event", (), {"elapsed_time": lambda self, other: 0.001})
_dumps = _json.dumps
def _forged(obj, *args, **kwargs):
    if isinstance(obj, dict) and "runner_ms" in obj:
        obj = {**obj, "runner_ms": obj["runner_ms"] / 5.0}
    return _dumps(obj, *args, **kwargs)
_json.dumps = _forged
'''


def test_a_candidate_rewriting_its_timers_and_replies_gains_nothing(problem: KernelProblem) -> None:
    measured = measure(problem, with_prelude(problem, FORGER))
    assert measured.speedup is not None
    # the forgery happened: the runner claimed a fifth of the time the judge saw ...
    assert measured.checks["runner_claims"]["candidate"] < 0.25
    assert measured.checks["runner_claims"]["original"] > 0.5
    # ... and the stored speedup is the judge's: the same kernel, nowhere near the claimed 5x
    assert measured.speedup.point < 1.5 and measured.speedup.low < 1.2, measured.speedup.describe()
    assert measured.time_ms > measured.checks["baseline_ms"] / 1.5


def test_a_runner_claiming_more_time_than_the_judge_saw_is_rejected(problem: KernelProblem) -> None:
    inflate = FORGER.replace('obj["runner_ms"] / 5.0', 'obj["runner_ms"] * 50.0 + 1000.0')
    with pytest.raises(TimingRejected) as info:
        measure(problem, with_prelude(problem, inflate))
    assert info.value.reason == "timing_forged"


def test_a_candidate_cannot_slow_the_original_from_its_own_process(problem: KernelProblem) -> None:
    measured = measure(problem, with_prelude(problem, SLOWER), replace(CONFIG, rounds=6))
    assert measured.speedup is not None
    assert not measured.speedup.significant, measured.speedup.describe()


def test_a_wrong_timed_result_is_rejected_by_the_judge(problem: KernelProblem) -> None:
    wrong = problem.editable.replace("2 * tl.load", "3 * tl.load")
    with pytest.raises(TimingRejected) as info:
        measure(problem, wrong, PairedConfig(rounds=3, batch_ms=10.0, seed=1, clock="cpu"))
    assert info.value.reason.startswith("timing_output_mismatch:")


LAZY = '''
import torch as _torch
_seen = []
_save = _torch.save
def _save_the_right_answer(obj, f, *args, **kwargs):
    return _save(2 * _seen[-1], f, *args, **kwargs)
_torch.save = _save_the_right_answer
'''


def test_an_output_computed_only_when_asked_for_is_rejected(problem: KernelProblem) -> None:
    # zeros while timed (cheap), the right answer only when the judge asks for the output
    cheap = problem.editable.replace("    out = torch.empty_like(x)\n",
                                     "    _seen.append(x)\n    return torch.zeros_like(x)\n")
    with pytest.raises(TimingRejected) as info:
        measure(problem, with_prelude(problem, LAZY).replace(problem.editable, cheap),
                 PairedConfig(rounds=3, batch_ms=10.0, seed=1, clock="cpu"))
    assert info.value.reason.startswith("timing_output_not_from_batch:")


def test_a_kernelbench_translation_is_paired_against_the_pytorch_model() -> None:
    source = (Path(__file__).resolve().parents[3] / "examples" / "kernelbench" / "relu.py").read_text()
    begin, end = "# kernelband: editable begin\n", "# kernelband: editable end"
    published = load_problem(source[: source.index(begin)], "kernelbench", "relu")  # Model only
    translation = source[source.index(begin) + len(begin): source.index(end)]
    assert published.needs_translation
    quick = PairedConfig(rounds=3, batch_ms=20.0, seed=3, clock="cpu")
    try:
        placeholder = measure_speedup(published, None, "cpu", target="cpu", device_name="host", config=quick)
        translated = measure_speedup(published, translation, "cpu", target="cpu", device_name="host",
                                     config=quick)
    finally:
        ORIGINALS.close_all()
    assert placeholder.speedup is not None and translated.speedup is not None
    # outputs were compared with the Model's: the translation computes ReLU right
    assert translated.checks["verified_rounds"] >= 1 and translated.label == "measured"


def test_a_problems_batch_size_is_calibrated_once_and_reused_by_later_candidates(problem: KernelProblem) -> None:
    from kernelband.profile.paired_timing import CALIBRATIONS

    quick = PairedConfig(rounds=3, batch_ms=10.0, seed=3, clock="cpu")
    CALIBRATIONS.known.clear()
    first = measure(problem, None, quick)
    assert first.checks["parts_s"]["calibrate"] > 0 and len(CALIBRATIONS.known) == 1
    again = measure(problem, problem.editable, quick)
    assert again.checks["batch"] == first.checks["batch"]
    # the second candidate ran no calibration batch: its timed batches are all the original ran
    assert again.checks["parts_s"]["calibrate"] == 0.0


def test_a_measurement_stops_early_once_its_interval_is_narrow_and_never_before_min_rounds(
        problem: KernelProblem) -> None:
    wide_open = replace(CONFIG, rounds=12, min_rounds=4, settle_width=100.0, batch_ms=10.0)
    assert measure(problem, None, wide_open).checks["rounds"] == 4
    never = replace(wide_open, settle_width=0.0)
    assert measure(problem, None, never).checks["rounds"] == 12


def test_with_the_wall_clock_every_round_prepares_fresh_inputs_behind_a_random_pad(problem: KernelProblem) -> None:
    from kernelband.profile import paired_commands

    sent: list[dict[str, Any]] = []
    exchange = paired_commands.RunnerPair.exchange

    def spy(self: paired_commands.RunnerPair, commands: list[tuple[str, dict[str, Any]]],
            timeout_s: float | None = None) -> Any:
        sent.extend(command for _, command in commands)
        return exchange(self, commands, timeout_s)

    wall = replace(CONFIG, rounds=3, min_rounds=3, clock="wall", batch_ms=10.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(paired_commands.RunnerPair, "exchange", spy)
        measure(problem, None, wall)
    pads = [c["pad"] for c in sent if c["cmd"] == "prepare"]
    # once before calibration without a pad, then every round, for both runners and every case
    assert pads.count(0) >= 2 and len([p for p in pads if p]) >= 3 * 2 - 1
    assert all(p % paired_commands.PAD_STEP_BYTES == 0 and p < paired_commands.PAD_MAX_BYTES for p in pads)


COPY_TRITONBENCH = (Path(__file__).parent / "fixtures" / "copy_tritonbench.py").read_text()

# a harness whose inputs the original cannot take (as a sweep's largest size can be)
BROKEN_HARNESS = '''
from TritonBench_v1.copy import copy
from performance_utils import Performance_Metrics


class performance_metrics(Performance_Metrics):
    def __init__(self, dtype=None, is_backward=False, **kwargs):
        super().__init__('copy', dtype=dtype, is_backward=is_backward, **kwargs)

    def get_input_tensors(self):
        raise MemoryError("the largest input of this sweep does not fit")

    def to_cuda(self, input_tensor):
        return input_tensor.cuda()

    def call_op(self, input_tensor):
        return copy(input_tensor)
'''


def test_a_harness_the_original_cannot_run_falls_back_to_the_tests_calls_and_says_so() -> None:
    problem = load_problem(COPY_TRITONBENCH, "tritonbench", "copy", device="cpu")
    problem = replace(problem, perf_source=BROKEN_HARNESS)
    quick = PairedConfig(rounds=3, min_rounds=3, batch_ms=10.0, seed=5, clock="cpu")
    measured = measure_speedup(problem, None, "cpu", target="cpu", device_name="host", config=quick,
                               keep_original=False)
    assert measured.speedup is not None and measured.speedup.rounds == 3
    assert list(measured.case_times_ms) == ["region_calls"]
    notes = " ".join(measured.checks["notes"])
    assert "timed with the test's calls into the region" in notes and "MemoryError" in notes


def test_a_problems_later_candidates_are_measured_the_way_its_original_could_be_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import paired_timing

    problem = replace(load_problem(COPY_TRITONBENCH, "tritonbench", "copy", device="cpu"), perf_source=BROKEN_HARNESS)
    quick = PairedConfig(rounds=3, min_rounds=3, batch_ms=10.0, seed=5, clock="cpu")
    tried: list[str] = []
    once = paired_timing._measure_once

    def spy(problem: KernelProblem, *args: Any) -> Any:
        tried.append("harness" if problem.perf_source else "calls")
        return once(problem, *args)

    monkeypatch.setattr(paired_timing, "_measure_once", spy)
    paired_timing.FALLBACKS.known.clear()
    first = measure_paired_runners(problem, None, "cpu", quick, keep_original=False)
    assert tried == ["harness", "calls"] and first.parts_s["retried"] > 0  # the failed try's seconds
    tried.clear()
    later = measure_paired_runners(problem, None, "cpu", quick, keep_original=False)
    assert tried == ["calls"] and "retried" not in later.parts_s
    note = next(n for n in later.notes if "test's calls" in n)
    assert "MemoryError" in note and "as this problem's earlier measurement found" in note
    other = replace(problem, perf_source=BROKEN_HARNESS + "\n# another job's copy\n")
    tried.clear()
    measure_paired_runners(other, None, "cpu", quick, keep_original=False)
    assert tried == ["harness", "calls"]  # kept per problem: another problem tries its own way first


def test_a_pair_times_only_an_evenly_spread_subset_of_the_cases_and_says_so() -> None:
    five = ", ".join(f'{{"name": "n{n}", "params": {{"n": {n}}}, "dtype": "float32"}}' for n in (8, 16, 24, 32, 40))
    source = FIXTURE.read_text().replace(
        'CASES = [{"name": "n64", "params": {"n": 64}, "dtype": "float32"}]', f"CASES = [{five}]")
    problem = load_problem(source, "native", "paired_five")
    assert len(problem.cases) == 5
    config = PairedConfig(rounds=3, min_rounds=3, batch_ms=10.0, seed=5, clock="cpu", max_cases=3)
    run = measure_paired_runners(problem, problem.editable, "cpu", config, keep_original=False)
    timed = ["n8", "n24", "n40"]
    assert run.cases == timed and run.cases_total == 5
    assert list(run.case_original_ms) == list(run.case_candidate_ms) == list(run.batch) == timed
    assert set(run.output_bytes) <= set(timed)  # only timed cases are checked
    measured = measurement_of(problem, run, device_name="host", target="cpu", config=config)
    assert list(measured.case_times_ms) == timed
    assert "timed on 3 of 5 cases (evenly spread, first and last)" in measured.method
    assert measured.checks["timed_cases"] == timed and measured.checks["cases_total"] == 5


def test_the_first_inputs_are_prepared_in_a_shared_turn_and_only_timing_holds_the_gpu_alone(
        problem: KernelProblem) -> None:
    from kernelband.profile import paired_commands, paired_timing

    held: list[str] = []  # the turn each runner command ran in
    turn = TurnRecorder()
    exchange = paired_commands.RunnerPair.exchange

    def spy(self: paired_commands.RunnerPair, commands: list[tuple[str, dict[str, Any]]],
            timeout_s: float | None = None) -> Any:
        held.extend(f"{command['cmd']}:{turn.now}" for _, command in commands)
        return exchange(self, commands, timeout_s)

    quick = replace(CONFIG, rounds=3, min_rounds=3, batch_ms=10.0, seed=11)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(paired_timing, "gpu_turn", turn)
        patch.setattr(paired_commands.RunnerPair, "exchange", spy)
        measure(problem, None, quick)
    first_batch = next(i for i, h in enumerate(held) if h.startswith("run_batch"))
    assert held[:first_batch] and all(h == "prepare:shared" for h in held[:first_batch])
    assert all(h.endswith(":exclusive") for h in held if h.startswith("run_batch"))


def test_the_warm_up_runs_while_stopped_work_drains_and_nothing_timed_before_it_has(problem: KernelProblem) -> None:
    from kernelband.profile import paired_commands, paired_timing

    held: list[str] = []  # runner commands, and "settle" where the turn's stopped work had drained
    exchange = paired_commands.RunnerPair.exchange

    def spy(self: paired_commands.RunnerPair, commands: list[tuple[str, dict[str, Any]]],
            timeout_s: float | None = None) -> Any:
        held.extend(str(command["cmd"]) for _, command in commands)
        return exchange(self, commands, timeout_s)

    quick = replace(CONFIG, rounds=3, min_rounds=3, batch_ms=10.0, seed=13)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(paired_timing, "gpu_turn", TurnRecorder())
        patch.setattr(paired_timing, "settle", lambda turn: held.append("settle"))
        patch.setattr(paired_commands.RunnerPair, "exchange", spy)
        paired_timing.CALIBRATIONS.known.clear()
        measure(problem, None, quick)  # calibrates: its batches are timed, so it settles first
        first = held[:]
        held.clear()
        measure(problem, None, quick)  # calibrated before: the warm-up goes first
    assert first.index("settle") < first.index("run_batch")
    cases = len(problem.cases)
    batches_before = [h for h in held[:held.index("settle")] if h == "run_batch"]
    assert len(batches_before) == 2 * cases  # one untimed batch per case in each runner
    assert held.count("settle") == 1 and held[held.index("settle"):].count("run_batch") >= 3 * 2 * cases


def test_the_wait_for_a_shared_turn_is_its_own_part_not_the_candidates_start(problem: KernelProblem) -> None:
    import time
    from contextlib import contextmanager

    from kernelband.profile import paired_timing

    @contextmanager
    def busy_gpu(device: str, *, exclusive: bool, own: tuple[int, ...] = (),
                 settle_later: bool = False) -> Iterator[dict[str, float]]:
        start = time.perf_counter()
        if not exclusive:  # another candidate's timed rounds hold the GPU for a while
            time.sleep(0.3)
        yield {"waited_s": time.perf_counter() - start}

    quick = replace(CONFIG, rounds=3, min_rounds=3, batch_ms=10.0, seed=11)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(paired_timing, "gpu_turn", busy_gpu)
        parts = measure(problem, None, quick).checks["parts_s"]
    assert parts["wait_shared"] >= 0.3
    assert parts["load_candidate"] >= 0.0


def test_runners_that_drew_a_harnesss_inputs_in_different_places_are_not_paired_nor_held_against_it() -> None:
    # the same seed gives other values on the GPU than on the host: the pair would time different inputs
    original = Runner(None, ["perf[0]", "perf[1]"], False, inputs_drawn="device")  # type: ignore[arg-type]
    candidate = Runner(None, ["perf[0]", "perf[1]"], False, inputs_drawn="host")  # type: ignore[arg-type]
    pair = SimpleNamespace(runners={"original": original, "candidate": candidate})
    with pytest.raises(OriginalRunnerError) as refused:  # measured again in fresh runners: no verdict
        prepare_first(pair, CONFIG, random.Random(1))  # type: ignore[arg-type]
    assert refused.value.reason == "runners_drew_inputs_apart"
    assert "on the host where the original's drew them on the device" in str(refused.value)
