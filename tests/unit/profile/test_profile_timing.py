"""The CUDA timing backend driven by a fake device: statistics, budget, flushes, pairing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kernelband.profile.timing import (
    Event,
    TimingConfig,
    measure,
    measure_paired,
    repetitions,
    summarize,
)


class FakeEvent:
    def __init__(self, device: FakeDevice) -> None:
        self.device, self.at = device, 0.0

    def record(self) -> None:
        self.at = self.device.clock_ms

    def elapsed_ms(self, end: Event) -> float:
        assert isinstance(end, FakeEvent)
        return end.at - self.at


class FakeDevice:
    """A device whose clock advances only when a fake kernel runs; counts flushes and syncs."""

    name = "fake"

    def __init__(self) -> None:
        self.clock_ms = 0.0
        self.flushes = 0
        self.syncs = 0
        self.log: list[str] = []

    def event(self) -> Event:
        return FakeEvent(self)

    def synchronize(self) -> None:
        self.syncs += 1

    def flush_l2(self) -> None:
        self.flushes += 1
        self.log.append("flush")

    def kernel(self, name: str, duration: Callable[[], float]) -> Callable[[], Callable[[], Any]]:
        """A `prepare` factory whose runs advance the clock by `duration()` ms."""

        def run() -> None:
            self.log.append(name)
            self.clock_ms += duration()

        return lambda: run


def test_summary_statistics() -> None:
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0], noisy_cv=0.1)
    assert stats.median_ms == 3.0 and stats.q1_ms == 2.0 and stats.q3_ms == 4.0
    assert stats.iqr_ms == 2.0 and stats.noisy
    steady = summarize([2.0] * 10, noisy_cv=0.1)
    assert steady.cv == 0.0 and not steady.noisy
    with pytest.raises(ValueError, match="no timing samples"):
        summarize([], 0.1)


def test_repetitions_fit_the_budget_within_bounds() -> None:
    config = TimingConfig(min_reps=5, max_reps=50, budget_ms=100.0)
    assert repetitions(10.0, config) == 10
    assert repetitions(1000.0, config) == 5
    assert repetitions(0.01, config) == 50


def test_measure_warms_up_flushes_before_every_run_and_takes_the_median() -> None:
    device = FakeDevice()
    durations = iter([9.0, 9.0, 9.0] + [2.0] * 20)  # slow warm-ups must not count
    config = TimingConfig(warmup=3, min_reps=4, max_reps=20, budget_ms=20.0)
    stats = measure(device, device.kernel("k", lambda: next(durations)), config)
    assert stats.reps == 4 and stats.median_ms == 2.0 and not stats.noisy
    assert device.flushes == 3 + 4
    assert all(device.log[i] == "flush" for i in range(0, len(device.log), 2))


def test_high_variation_is_marked_noisy() -> None:
    device = FakeDevice()
    values = iter([1.0, 1.0, 1.0] + [1.0, 3.0] * 10)
    stats = measure(device, device.kernel("k", lambda: next(values)), TimingConfig(min_reps=10, max_reps=10))
    assert stats.noisy and stats.cv > 0.1


def test_paired_runs_interleave_and_cancel_clock_drift() -> None:
    device = FakeDevice()
    drift = {"factor": 1.0}

    def slower() -> float:
        drift["factor"] *= 1.05  # the GPU clock sags a little more with every run
        return drift["factor"]

    parent = device.kernel("A", lambda: 2.0 * slower())
    child = device.kernel("B", lambda: 1.0 * slower())
    config = TimingConfig(warmup=1, min_reps=20, max_reps=20, flush_l2=False)
    paired = measure_paired(device, parent, child, config)
    timed = device.log[2:]  # after one warm-up of each
    assert timed[:6] == ["A", "B", "A", "B", "A", "B"]
    # Each child run is 1.05x later than its parent: the pair ratio is 0.5 * 1.05 everywhere,
    # while the unpaired medians drift far apart.
    assert paired.ratio == pytest.approx(0.525, rel=1e-9)
    assert paired.ratio_cv == pytest.approx(0.0, abs=1e-12) and not paired.noisy
    assert paired.child.cv > 0.2


def test_fresh_inputs_are_built_outside_the_timed_region() -> None:
    device = FakeDevice()
    built: list[float] = []

    def prepare() -> Callable[[], None]:
        built.append(device.clock_ms)
        device.clock_ms += 50.0  # expensive input cloning
        return lambda: setattr(device, "clock_ms", device.clock_ms + 1.0)

    stats = measure(device, prepare, TimingConfig(warmup=1, min_reps=5, max_reps=5))
    assert len(built) == 6 and stats.median_ms == 1.0


def test_kernelbench_timing_is_warm_up_plus_100_synchronized_trials() -> None:
    from kernelband.profile.timing import KERNELBENCH_TIMING

    device = FakeDevice()
    times = iter([9.0] * 4 + [1.0] * 99 + [101.0])  # warm-up runs, then the 100 trials
    stats = measure(device, device.kernel("k", lambda: next(times)), KERNELBENCH_TIMING)
    assert stats.reps == 100 and device.flushes == 104  # L2 flushed before every run
    assert device.syncs >= 2 * 104  # before and after every run (KernelBench's trial loop)
    assert stats.mean_ms == pytest.approx(2.0) and stats.median_ms == pytest.approx(1.0)
