"""The cases a paired measurement times: an evenly spread subset the judge picks, in order."""

from __future__ import annotations

import pytest

from kernelband.profile.paired_runners import PairedConfig, spread_cases

PERF = [f"perf[{i}]" for i in range(16)]


def test_every_case_is_timed_when_the_limit_is_off_or_covers_them() -> None:
    assert spread_cases(PERF, 0) == PERF
    assert spread_cases(PERF[:6], 6) == PERF[:6]
    assert spread_cases(PERF[:3], 6) == PERF[:3]
    assert spread_cases([], 6) == []


def test_one_case_is_the_last_and_two_are_the_ends() -> None:
    assert spread_cases(PERF, 1) == ["perf[15]"]
    assert spread_cases(PERF, 2) == ["perf[0]", "perf[15]"]


def test_six_of_sixteen_are_evenly_spread_in_the_runners_order() -> None:
    assert spread_cases(PERF, 6) == ["perf[0]", "perf[3]", "perf[6]", "perf[9]", "perf[12]", "perf[15]"]
    # the runner's order is kept, whatever the names
    assert spread_cases(["z", "b", "y", "a", "x"], 3) == ["z", "y", "x"]


@pytest.mark.parametrize("n", range(2, 40))
def test_a_subset_never_repeats_a_case_and_keeps_first_and_last(n: int) -> None:
    cases = [f"c{i}" for i in range(n)]
    for m in range(2, n):
        picked = spread_cases(cases, m)
        assert len(picked) == m == len(set(picked)), (n, m, picked)
        assert picked[0] == cases[0] and picked[-1] == cases[-1]
        assert sorted(picked, key=cases.index) == picked


def test_a_negative_limit_is_refused() -> None:
    assert PairedConfig(max_cases=1).max_cases == 1
    with pytest.raises(ValueError, match="max_cases"):
        PairedConfig(max_cases=-1)
