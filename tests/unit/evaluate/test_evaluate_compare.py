"""Comparing results: Python float scalars (a test's `.item()` values) and their infinities."""

from __future__ import annotations

import math

from kernelband.evaluate.compare import compare_results
from kernelband.problem.model import DEFAULT_TOLERANCES


def tol(dtype: str) -> tuple[float, float]:
    return DEFAULT_TOLERANCES.get(dtype, (1e-5, 1e-5))


def test_equal_float_infinities_match_and_opposite_ones_do_not() -> None:
    assert compare_results({"norm": math.inf}, {"norm": math.inf}, tol) is None
    assert compare_results(-math.inf, -math.inf, tol) is None
    assert compare_results(math.inf, -math.inf, tol) is not None
    assert compare_results(math.inf, 1e30, tol) is not None
    assert compare_results(1e30, math.inf, tol) is not None


def test_float_scalars_compare_within_tolerance_and_nan_matches_nan() -> None:
    assert compare_results(1.0, 1.0 + 1e-12, tol) is None
    assert compare_results(math.nan, math.nan, tol) is None
    found = compare_results(1.0, 2.0, tol)
    assert found is not None and found.reason == "wrong_result"
