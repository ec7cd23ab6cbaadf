"""Runners started ahead (spares) or kept warm (originals): a spare is taken once, by its own
problem only; neither serves another job than the one whose Triton cache it compiled in.

Runs on the Triton interpreter (real sandboxed runners, the judge's commands); a spare's inputs
must be the ones a runner started for the candidate would have drawn.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kernelband.problem import load_problem
from kernelband.profile import paired_runners
from kernelband.profile.paired_result import measure_speedup
from kernelband.profile.paired_runners import PairedConfig, SpareRunners, start_runner
from kernelband.sandbox.limits import SandboxLimits, job_limits

COPY_TRITONBENCH = (Path(__file__).parent / "fixtures" / "copy_tritonbench.py").read_text()

# a harness drawing unseeded host inputs, as the corpus's do: only the runner's seed makes two
# runners' inputs the same
HARNESS = '''
import torch
from TritonBench_v1.copy import copy
from performance_utils import Performance_Metrics


class performance_metrics(Performance_Metrics):
    def __init__(self, dtype=None, is_backward=False, **kwargs):
        super().__init__('copy', dtype=dtype, is_backward=is_backward, **kwargs)

    def get_input_tensors(self):
        open(__name__ + ".drew", "w").close()  # which load of the harness drew the inputs
        self.input_tensors = [torch.rand(n) for n in (16, 40)]

    def to_cuda(self, input_tensor):
        return input_tensor.cuda()

    def call_op(self, input_tensor):
        return copy(input_tensor)
'''
QUICK = PairedConfig(rounds=3, min_rounds=3, batch_ms=10.0, seed=5, clock="cpu")


@pytest.fixture(scope="module")
def problem():
    loaded = load_problem(COPY_TRITONBENCH, "tritonbench", "copy", device="cpu")
    return replace(loaded, perf_source=HARNESS)


@pytest.fixture
def spares(monkeypatch):
    pool = SpareRunners(size=2, gpu_only=False)
    monkeypatch.setattr(paired_runners, "SPARES", pool)
    yield pool
    pool.close_all()


def _limits() -> SandboxLimits:
    return replace(SandboxLimits.from_settings(), interpret=True, compile_s=0.0, wall_s=600.0)


def _wait_ready(pool: SpareRunners, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while pool.starting and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pool.starting, "the spare did not finish starting"


def _first_output(runner, tmp_name: str):
    runner.session.request({"cmd": "prepare", "case": runner.cases[-1], "seed": 1, "pad": 0}, 120)
    runner.session.request({"cmd": "save_output", "case": runner.cases[-1], "name": tmp_name}, 60)
    return torch.load(runner.session.path(tmp_name), weights_only=True)


def test_a_spare_is_taken_by_the_next_candidate_with_the_same_inputs_a_fresh_runner_draws(problem, spares) -> None:
    limits = _limits()
    fresh = start_runner(problem, None, "cpu", QUICK, limits)  # no spare yet: started here, one is started
    assert not fresh.spare
    _wait_ready(spares)
    assert len(spares.ready) == 1
    taken = start_runner(problem, None, "cpu", QUICK, limits)
    try:
        assert taken.spare and taken.cases == fresh.cases
        assert taken.inputs_drawn == fresh.inputs_drawn == "host"  # the interpreter draws on the host
        drew = sorted(p.name for p in Path(taken.session.workdir).glob("*.drew"))
        assert drew == ["kernelband_perf_preloaded.drew"]  # drawn ahead, not again for the candidate
        assert sorted(p.name for p in Path(fresh.session.workdir).glob("*.drew")) == ["kernelband_perf_candidate.drew"]
        # the copy kernel returns its input: equal outputs are equal harness inputs
        assert torch.equal(_first_output(fresh, "fresh.pt"), _first_output(taken, "taken.pt"))
    finally:
        fresh.close()
        taken.close()
    _wait_ready(spares)  # taking it started the next one
    assert len(spares.ready) == 1


def test_a_spare_serves_only_its_own_problem_and_only_while_young(problem, spares) -> None:
    limits = _limits()
    spares.start_soon(problem, "cpu", QUICK, limits)
    _wait_ready(spares)
    other = replace(problem, name="copy_other")
    assert spares.take(other, "cpu", QUICK, limits) is None  # another problem's key
    assert spares.take(problem, "cpu", replace(QUICK, cores=(0,)), limits) is None  # other measuring cores
    key = spares.key(problem, "cpu", QUICK, limits)
    session, started = spares.ready[key]
    spares.ready[key] = (session, started - paired_runners.SPARE_MAX_AGE_SHARE * limits.wall_s)
    assert spares.take(problem, "cpu", QUICK, limits) is None  # too old to serve a measurement
    assert not spares.ready
    paired_runners.wait_for_closes()
    assert session.closed is not None


def test_a_problem_whose_preload_fails_gets_no_spare_and_its_candidates_are_still_measured(problem, spares) -> None:
    broken = replace(problem, perf_source=HARNESS.replace(
        "self.input_tensors = [torch.rand(n) for n in (16, 40)]", "raise MemoryError('too large')"))
    spares.start_soon(broken, "cpu", QUICK, _limits())
    _wait_ready(spares)
    assert not spares.ready
    measured = measure_speedup(broken, None, "cpu", target="cpu", device_name="host", config=QUICK,
                               keep_original=False)
    # the harness fails in the original's runner too: measured with the test's calls instead,
    # whose candidate may take a spare of its own; the broken harness never left one ready
    assert measured.speedup is not None
    for limits in (_limits(), paired_runners.runner_limits(None, "cpu", QUICK)):
        assert spares.key(broken, "cpu", QUICK, limits) not in spares.ready


def test_a_measurement_says_whether_its_candidate_took_a_spare(problem, spares, monkeypatch) -> None:
    # a new original's runner starts the candidate's beside it: the first measurement takes it too
    first = measure_speedup(problem, None, "cpu", target="cpu", device_name="host", config=QUICK, keep_original=False)
    _wait_ready(spares)
    second = measure_speedup(problem, None, "cpu", target="cpu", device_name="host", config=QUICK, keep_original=False)
    assert first.checks["spare_runner"] and second.checks["spare_runner"]
    assert second.speedup is not None and second.speedup.rounds == 3
    spares.close_all()
    alone = SpareRunners(size=0, gpu_only=False)  # no spares kept: every candidate's runner is its own
    monkeypatch.setattr(paired_runners, "SPARES", alone)
    third = measure_speedup(problem, None, "cpu", target="cpu", device_name="host", config=QUICK, keep_original=False)
    assert not third.checks["spare_runner"] and not alone.starting and not alone.ready


def test_a_candidate_that_comes_while_its_spare_starts_waits_for_it_instead_of_starting_another(
        problem, spares, monkeypatch) -> None:
    slow = replace(problem, perf_source=HARNESS.replace(
        "self.input_tensors =", "import time; time.sleep(3); self.input_tensors ="))
    limits = _limits()
    spares.start_soon(slow, "cpu", QUICK, limits)
    key = spares.key(slow, "cpu", QUICK, limits)
    deadline = time.monotonic() + 60
    while key not in spares.in_turn and time.monotonic() < deadline:
        time.sleep(0.05)
    assert key in spares.in_turn, "the spare never reached its GPU turn"
    # the next spare, started as this one is taken, would enter its turn under the same key
    # while the candidate loads: not started here, so `in_turn` speaks of this spare alone
    monkeypatch.setattr(spares, "start_soon", lambda *args: None)
    taken = start_runner(slow, None, "cpu", QUICK, limits)
    try:
        assert taken.spare and key not in spares.in_turn
        drew = sorted(p.name for p in Path(taken.session.workdir).glob("*.drew"))
        assert drew == ["kernelband_perf_preloaded.drew"]  # the spare's start served it: drawn once
    finally:
        taken.close()


def test_spares_are_started_only_for_a_gpu_by_default(problem) -> None:
    pool = SpareRunners(size=2)
    pool.start_soon(problem, "cpu", QUICK, _limits())
    assert not pool.starting and not pool.ready


def test_a_warm_original_and_a_spare_serve_only_their_own_job(problem, spares) -> None:
    pool = paired_runners.OriginalRunners(size=2)
    try:
        with job_limits(None, "jobA"):
            ours = pool.take(problem, "cpu", QUICK, None)
            assert ours.scope == "jobA"
            pool.give_back(problem, "cpu", QUICK, ours)
            spares.start_soon(problem, "cpu", QUICK, paired_runners.runner_limits(None, "cpu", QUICK))
        _wait_ready(spares)
        with job_limits(None, "jobB"):
            theirs = pool.take(problem, "cpu", QUICK, None)
            assert theirs.session.pid != ours.session.pid and theirs.scope == "jobB"
            assert spares.take(problem, "cpu", QUICK, paired_runners.runner_limits(None, "cpu", QUICK)) is None
            theirs.close()
        with job_limits(None, "jobA"):
            assert pool.take(problem, "cpu", QUICK, None).session.pid == ours.session.pid
            spare = spares.take(problem, "cpu", QUICK, paired_runners.runner_limits(None, "cpu", QUICK))
            assert spare is not None
            spare.close()
    finally:
        ours.close()
        pool.close_all()


def test_a_spare_that_died_while_it_waited_costs_its_candidate_nothing(problem, spares) -> None:
    limits = _limits()
    spares.start_soon(problem, "cpu", QUICK, limits)
    _wait_ready(spares)
    session, _ = next(iter(spares.ready.values()))
    os.killpg(session.pid, signal.SIGKILL)  # as an out-of-memory kill would
    runner = start_runner(problem, None, "cpu", QUICK, limits)  # takes the dead spare first
    try:
        assert not runner.spare and runner.cases and session.closed is not None
    finally:
        runner.close()
