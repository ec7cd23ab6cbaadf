"""Suite metrics: Correct %, Fast@1 %, both geometric means and the label."""

from __future__ import annotations

import math

import pytest

from kernelband.suite.metrics import (
    ProblemResult,
    combined_label,
    geometric_mean,
    metric_for,
    suite_metrics,
)


def _row(problem: str, correct: bool, speedup: float | None, label: str | None = "estimated",
         policy: str = "kernelband", target: str = "cpu", status: str = "completed") -> ProblemResult:
    return ProblemResult(problem, policy, target, 1, status, correct, speedup, label,
                         "passed" if correct else None, None)


def test_metrics_follow_the_paper_definitions() -> None:
    rows = [_row("a", True, 2.0), _row("b", True, 0.5), _row("c", True, 1.0),
            _row("d", False, None, status="failed")]
    metric = metric_for("cpu", "kernelband", rows)
    assert metric.problems == 4 and metric.finished == 4
    assert metric.correct_pct == 75.0
    assert metric.fast1_pct == 25.0  # only a: correct and speedup > 1
    assert metric.geomean_speedup_correct == pytest.approx((2.0 * 0.5 * 1.0) ** (1 / 3))
    assert metric.geomean_speedup_all == pytest.approx((2.0 * 0.5 * 1.0 * 1.0) ** (1 / 4))
    assert metric.label == "estimated"


def test_failures_count_as_one_in_the_strict_mean_only() -> None:
    rows = [_row("a", True, 4.0), _row("b", False, None)]
    metric = metric_for("cpu", "p", rows)
    assert metric.geomean_speedup_correct == pytest.approx(4.0)
    assert metric.geomean_speedup_all == pytest.approx(2.0)


def test_no_correct_problem_gives_no_correct_mean_and_no_label() -> None:
    metric = metric_for("cpu", "p", [_row("a", False, None, label=None, status="running")])
    assert metric.geomean_speedup_correct is None
    assert metric.geomean_speedup_all == pytest.approx(1.0)
    assert metric.label == "none" and metric.finished == 0


def test_any_estimate_makes_the_aggregate_estimated() -> None:
    assert combined_label(["measured", "measured"]) == "measured"
    assert combined_label(["measured", "estimated"]) == "estimated"
    assert combined_label([None]) == "none"


def test_one_metric_row_per_target_and_policy() -> None:
    rows = [_row("a", True, 2.0, policy="kernelband"), _row("a", True, 1.5, policy="random"),
            ProblemResult("a", "kernelband", "h100", 1, "completed", True, 3.0, "measured",
                          "passed", None, speedup_low=2.8, speedup_high=3.2)]
    keys = [(m.target, m.policy) for m in suite_metrics(rows)]
    assert keys == [("cpu", "kernelband"), ("cpu", "random"), ("h100", "kernelband")]
    assert suite_metrics(rows)[2].label == "measured"


def test_geometric_mean() -> None:
    assert geometric_mean([]) is None
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert math.isclose(geometric_mean([1.0]) or 0, 1.0)


def test_fast_p_follows_kernelbench() -> None:
    # KernelBench's fast_p: correct AND speedup > p, over every problem (failures included)
    rows = [_row("a", True, 2.5), _row("b", True, 1.2), _row("c", True, 0.6),
            _row("d", True, 1.5), _row("e", False, None, status="failed")]
    metric = metric_for("cpu", "kernelband", rows)
    assert metric.fast_p == {"0": 80.0, "1": 60.0, "1.5": 20.0, "2": 20.0}
    assert metric.fast_p["0"] == metric.correct_pct and metric.fast_p["1"] == metric.fast1_pct


def test_an_untranslated_kernelbench_track_is_not_correct() -> None:
    from kernelband.suite.metrics import CORRECT_HELD_OUT

    assert "untranslated" not in CORRECT_HELD_OUT
