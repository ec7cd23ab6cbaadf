"""PairedSpeedup: geometric-mean point, seeded 95% bootstrap interval, text and dict round trips."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from kernelband.profile.measurement import Measurement
from kernelband.profile.paired import PairedSpeedup, PairedStatsError, paired_speedup


def _noisy(n: int, scale: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [scale * math.exp(rng.gauss(0.0, 0.05)) for _ in range(n)]


def test_point_is_the_geometric_mean_of_round_ratios() -> None:
    result = paired_speedup([2.0, 4.0, 2.0, 4.0], [1.0, 1.0, 1.0, 1.0], method="judge clock")
    assert result.point == pytest.approx(math.sqrt(8.0))
    assert result.rounds == 4 and result.baseline == "original"
    assert result.low <= result.point <= result.high
    assert result.method.startswith("judge clock; 95% ")


def test_identical_timings_give_an_interval_around_one() -> None:
    original = _noisy(20, 1.0, 1)
    candidate = _noisy(20, 1.0, 2)
    result = paired_speedup(original, candidate, method="m")
    assert result.contains_one and not result.significant
    assert result.describe().endswith("no significant speedup")


def test_a_twice_as_fast_candidate_is_significant() -> None:
    result = paired_speedup(_noisy(20, 2.0, 3), _noisy(20, 1.0, 4), method="m")
    assert result.significant and 1.8 < result.low < result.point < result.high < 2.2
    assert result.describe() == f"{result.point:.2f}x [{result.low:.2f}, {result.high:.2f}]"


def test_the_interval_is_repeatable() -> None:
    args = (_noisy(12, 1.1, 5), _noisy(12, 1.0, 6))
    assert paired_speedup(*args, method="m") == paired_speedup(*args, method="m")


def test_describe_formats_two_decimals() -> None:
    assert PairedSpeedup(1.18, 1.12, 1.24, 10, "m", "original").describe() == "1.18x [1.12, 1.24]"
    text = PairedSpeedup(1.01, 0.97, 1.05, 10, "m", "original").describe()
    assert text == "1.01x [0.97, 1.05], no significant speedup"


def test_dict_has_exactly_the_stored_keys_and_round_trips() -> None:
    speedup = PairedSpeedup(1.5, 1.4, 1.6, 16, "judge clock", "original")
    assert set(speedup.to_dict()) == {"point", "low", "high", "rounds", "method", "baseline"}
    assert PairedSpeedup.from_dict(speedup.to_dict()) == speedup
    measured = Measurement("measured", "judge clock", "H200", "h200", 0.5, speedup=speedup)
    assert measured.to_dict()["speedup"] == speedup.to_dict()
    assert Measurement.from_dict(measured.to_dict()) == measured


def test_unusable_rounds_are_refused_with_the_reason() -> None:
    with pytest.raises(PairedStatsError, match="every round must time both"):
        paired_speedup([1.0, 1.0, 1.0], [1.0, 1.0], method="m")
    with pytest.raises(PairedStatsError, match="at least"):
        paired_speedup([1.0], [1.0], method="m")
    with pytest.raises(PairedStatsError, match="positive and finite"):
        paired_speedup([1.0, 0.0, 1.0], [1.0, 1.0, 1.0], method="m")


def test_a_measurement_reads_with_its_interval() -> None:
    speedup = PairedSpeedup(1.18, 1.12, 1.24, 20, "judge clock", "original")
    text = Measurement("measured", "judge clock", "H200", "h200", 0.5, speedup=speedup).describe()
    assert text.startswith("measured:") and "1.18x [1.12, 1.24] against the original" in text


def test_a_between_runner_term_widens_each_side_in_quadrature() -> None:
    original, candidate = _noisy(12, 1.01, 7), _noisy(12, 1.0, 8)
    rounds_only = paired_speedup(original, candidate, method="m")
    widened = paired_speedup(original, candidate, method="m", runner_sd=0.0075)
    center, extra = math.log(rounds_only.point), 1.959964 * 0.0075
    assert widened.point == rounds_only.point
    assert math.log(widened.high) - center == pytest.approx(math.hypot(math.log(rounds_only.high) - center, extra))
    assert center - math.log(widened.low) == pytest.approx(math.hypot(center - math.log(rounds_only.low), extra))
    assert "between-runner sd of 0.75%" in widened.method


def test_a_steady_offset_between_two_runners_is_covered_by_the_term() -> None:
    # rounds that agree closely on a 1.1% offset (as two processes of identical code can)
    original, candidate = [1.011 * (1 + 0.001 * (i % 3)) for i in range(8)], [1.0] * 8
    assert not paired_speedup(original, candidate, method="m").contains_one
    assert paired_speedup(original, candidate, method="m", runner_sd=0.0075).contains_one


def test_the_term_grows_with_the_scatter_of_the_rounds() -> None:
    original, candidate = _noisy(12, 1.01, 7), _noisy(12, 1.0, 8)
    logs = [math.log(o / c) for o, c in zip(original, candidate, strict=True)]
    share = paired_speedup(original, candidate, method="m", runner_sd=0.005, runner_share=0.6)
    between = math.hypot(0.005, 0.6 * statistics.stdev(logs))
    assert f"between-runner sd of {between:.2%}" in share.method
    floor_only = paired_speedup(original, candidate, method="m", runner_sd=0.005)
    assert share.low < floor_only.low and share.high > floor_only.high


def test_identical_rounds_still_get_the_between_runner_term() -> None:
    widened = paired_speedup([1.0] * 4, [1.0] * 4, method="m", runner_sd=0.01)
    assert widened.low < 1.0 < widened.high and "degenerate" in widened.method
