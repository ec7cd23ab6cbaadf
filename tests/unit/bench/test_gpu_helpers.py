"""CPU-side tests of bench/gpu helpers: timing logic on a fake device."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from kernelband.profile.timing import TimingConfig, measure, measure_paired


class _FakeEvent:
    def __init__(self, clock: list[float]) -> None:
        self.clock, self.at = clock, 0.0

    def record(self) -> None:
        self.at = self.clock[0]

    def elapsed_ms(self, end: Any) -> float:
        return float(end.at - self.at)


class _FakeDevice:
    """Each run advances a fake clock by a fixed time: the paired A/A ratio must be 1."""

    name = "fake"

    def __init__(self) -> None:
        self.clock = [0.0]

    def event(self) -> _FakeEvent:
        return _FakeEvent(self.clock)

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def run(self) -> None:
        self.clock[0] += 0.25


def test_timing_logic_on_the_fake_device() -> None:
    device = _FakeDevice()
    prepare = lambda: device.run  # noqa: E731 - the shape timing.measure expects
    config = TimingConfig(min_reps=5, max_reps=20, budget_ms=2.0)
    stats = measure(device, prepare, config)
    assert stats.median_ms == pytest.approx(0.25) and stats.cv == pytest.approx(0.0)
    assert measure_paired(device, prepare, prepare, config).ratio == pytest.approx(1.0)



def test_an_aa_under_load_runs_a_suite_beside_and_stops_it_after(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from bench.gpu import paired_aa

    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        assert argv[1:4] == ["-m", "bench.gpu.suite_twice", "--target"] and "--problems" in argv
        started.append(real_popen(["sleep", "60"], **kwargs))  # stands in for the suite
        return started[-1]

    monkeypatch.setattr(paired_aa.subprocess, "Popen", popen)
    with paired_aa.suite_beside(0, "h200", tmp_path, 0.0) as how:
        assert how == "" and not started
    with paired_aa.suite_beside(8, "h200", tmp_path, 0.1) as how:
        assert "8-problem suite on the same GPU" in how
        assert started[0].poll() is None
    assert started[0].poll() is not None  # stopped with the A/A
