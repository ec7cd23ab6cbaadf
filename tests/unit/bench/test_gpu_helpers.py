"""CPU-side tests of bench/gpu helpers: scaled examples, timing logic on a fake device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernelband.problem import load_problem
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


def test_scaled_source_rewrites_only_the_case_lists(tmp_path: Path) -> None:
    from bench.gpu.scaled import scaled_source, write_scaled_examples

    original = Path("examples/softmax.py").read_text()
    text, public, held = scaled_source(original)
    assert text.split("CASES =")[0] == original.split("CASES =")[0]  # kernels untouched
    assert [c["params"] for c in public] == [{"rows": 4096, "cols": 4096},
                                             {"rows": 2048, "cols": 6000}]
    assert {c["dtype"] for c in public} == {"float32", "float16"}
    assert not {c["name"] for c in public} & {c["name"] for c in held}  # held-out shapes differ
    assert any(c["params"]["cols"] % 2 for c in held)  # a non-power-of-2 size is held out
    [(path, cases)] = write_scaled_examples([Path("examples/vector_add.py")], tmp_path)
    problem = load_problem(path.read_text(), "native", path.stem)
    assert [c.params["n"] for c in problem.cases] == [1 << 24, 10_000_003]
    assert [c.name for c in problem.held_out_cases] == [c["name"] for c in cases["held_out"]]
    assert Path("examples/vector_add.py").read_text().count("n1000") > 0  # examples/ unchanged


def test_scaled_cases_refuse_unknown_parameters() -> None:
    from bench.gpu.scaled import scaled_cases

    with pytest.raises(ValueError, match="cannot scale"):
        scaled_cases([{"name": "x", "params": {"width": 3}}], [])

