"""Suite metrics on paired speedups: Fast@1 counts an interval above 1.0, the point rule beside it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kernelband.speedups import paired_columns
from kernelband.suite.metrics import ProblemResult, metric_for
from kernelband.suite.model import SuiteReport, SuiteSettings, report_from_dict


def _paired(point: float, low: float, high: float) -> dict[str, Any]:
    """A PairedSpeedup.to_dict() as the measurement carries it."""
    return {"point": point, "low": low, "high": high, "rounds": 30,
            "method": "ABBA rounds, bootstrap 95%", "baseline": "original"}


def _row(name: str, paired: dict[str, Any] | None, correct: bool = True,
         label: str = "measured") -> ProblemResult:
    columns = paired_columns(paired)
    return ProblemResult(name, "kernelband", "h200", 1, "completed" if correct else "failed",
                         correct, columns["speedup"], label if correct else None,
                         "passed" if correct else None, None,
                         speedup_low=columns["speedup_low"], speedup_high=columns["speedup_high"],
                         speedup_method=columns["speedup_method"])


ROWS = [_row("sure", _paired(1.18, 1.12, 1.24)),       # faster with confidence
        _row("unsure", _paired(1.01, 0.97, 1.05)),     # point above 1.0, interval contains it
        _row("slower", _paired(0.95, 0.90, 0.99)),
        _row("unpaired", None),                          # measured, never paired: no speedup
        _row("broken", None, correct=False)]


def test_fast1_counts_only_an_interval_above_one_and_reports_the_point_rule_beside_it() -> None:
    metric = metric_for("h200", "kernelband", ROWS)
    assert metric.correct_pct == 80.0  # correctness does not need a speedup
    assert metric.fast1_pct == 20.0  # only "sure": low 1.12 > 1.0
    assert metric.fast1_point_pct == 40.0  # "sure" and "unsure" on their points
    assert metric.fast_p == {"0": 80.0, "1": 20.0, "1.5": 0.0, "2": 0.0}
    assert metric.label == "measured"


def test_geomeans_use_the_paired_points_and_count_unpaired_problems_as_one() -> None:
    metric = metric_for("h200", "kernelband", ROWS)
    assert metric.geomean_speedup_correct == pytest.approx((1.18 * 1.01 * 0.95) ** (1 / 3))
    assert metric.geomean_speedup_all == pytest.approx(
        math.exp((math.log(1.18) + math.log(1.01) + math.log(0.95)) / 5))


def test_each_row_says_its_interval_or_that_it_was_not_measured() -> None:
    texts = {r.problem: r.to_dict()["speedup_text"] for r in ROWS}
    assert texts == {"sure": "1.18x [1.12, 1.24]",
                     "unsure": "1.01x [0.97, 1.05], no significant speedup",
                     "slower": "0.95x [0.90, 0.99]",  # slower, with confidence
                     "unpaired": "not measured", "broken": "not measured"}
    assert [r.to_dict()["significant"] for r in ROWS] == [True, False, False, False, False]


def test_a_measured_speedup_without_its_interval_is_never_counted_fast() -> None:
    legacy = ProblemResult("old", "kernelband", "h100", 1, "completed", True, 3.0, "measured",
                           "passed", None)
    assert not legacy.fast and legacy.fast_point
    assert legacy.to_dict()["speedup_text"] == "not measured"


def test_estimates_count_on_their_ratio_and_say_estimated() -> None:
    estimate = ProblemResult("est", "kernelband", "cpu", 1, "completed", True, 1.4, "estimated",
                             "passed", None)
    metric = metric_for("cpu", "kernelband", [estimate])
    assert metric.fast1_pct == 100.0 and metric.label == "estimated"
    assert estimate.to_dict()["speedup_text"] == "1.40x estimated"


def test_report_round_trips_the_intervals() -> None:
    report = SuiteReport("suite-p", "paired", "tritonbench", SuiteSettings(targets=("h200",)),
                         None, (1,), 1, (metric_for("h200", "kernelband", ROWS),), tuple(ROWS))
    again = report_from_dict(report.to_dict())
    assert again.problems == report.problems and again.metrics == report.metrics


def test_suite_command_table_shows_intervals_and_both_fast1_rules() -> None:
    from kernelband.commands.suite import console, show_report

    report = SuiteReport("suite-p", "paired", "tritonbench", SuiteSettings(targets=("h200",)),
                         None, (1,), 1, (metric_for("h200", "kernelband", ROWS),), tuple(ROWS))
    with console.capture() as captured:
        console.width = 250
        show_report(report)
    text = captured.get()
    assert "Fast@1 % (95% low > 1)" in text and "Fast@1 % (point, as published)" in text
    assert "20.0" in text and "40.0" in text
    assert "1.18x [1.12, 1.24]" in text and "1.01x [0.97, 1.05], no significant speedup" in text
    assert "not measured" in text


def test_suite_command_closes_with_cost_gpu_held_alone_and_steps() -> None:
    from kernelband.commands.suite import console, show_report
    from kernelband.scheduling.stages import StageTime
    from kernelband.suite.throughput import TargetThroughput

    steps = (StageTime("profile", 4, 0, 10.0, 12.0, 40.0, 0.5, {"measure_timed_rounds": 2.0},
                       {"measure_timed_rounds": 8.0, "measure_prepare": 4.0, "check": 9.0}),)
    report = SuiteReport("suite-p", "paired", "tritonbench", SuiteSettings(targets=("h200",)),
                         None, (1,), 1, (metric_for("h200", "kernelband", ROWS),), tuple(ROWS),
                         throughput=(TargetThroughput("h200", 4, 60.0, 50.0),), steps=steps)
    with console.capture() as captured:
        console.width = 250
        show_report(report)
    text = captured.get()
    assert "h200: 240 candidates judged per GPU-hour" in text
    assert "h200: GPU held alone for paired timing 20% of the window" in text  # (8 + 4) / 60
    assert "time per step, all jobs: profile x4: 10.00 s median, p90 12.00" in text
