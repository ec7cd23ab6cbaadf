"""A suite's cost: candidates judged per device-hour and how busy its device was."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from kernelband.config import Settings
from kernelband.sandbox.problems import load_problem_sandboxed
from kernelband.suite import SuiteSettings, load_sources, read_directory
from kernelband.suite.embedded import run_local_suite
from kernelband.suite.model import report_from_dict
from kernelband.suite.throughput import TargetThroughput, timed_share, union_s

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
T0 = datetime(2026, 1, 1)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_two_steps_at_once_count_once_and_gaps_do_not_count() -> None:
    spans = [(_at(0), _at(10)), (_at(5), _at(12)), (_at(20), _at(25)), (_at(21), _at(22))]
    assert union_s(spans) == pytest.approx(17.0)
    assert union_s([]) == 0.0


def test_the_gpu_held_alone_is_the_timed_parts_over_the_window() -> None:
    parts = [{"measure_timed_rounds": 30.0, "measure_prepare": 10.0, "check": 99.0},
             {"measure_calibrate": 1.0, "measure_verify": 4.0, "measure_after": 50.0}]
    assert timed_share(parts, 100.0) == pytest.approx(45.0)
    assert timed_share(parts, 0.0) == 0.0


def test_the_gpu_held_alone_is_the_exclusive_turns_as_measured_where_a_result_has_them() -> None:
    # a first prepare runs in a shared turn: only results kept before the measured part count it
    parts = [{"measure_held_alone": 20.0, "measure_timed_rounds": 15.0, "measure_prepare": 30.0},
             {"measure_timed_rounds": 10.0}]
    assert timed_share(parts, 100.0) == pytest.approx(30.0)


def test_the_figures_and_their_wording() -> None:
    cost = TargetThroughput("h200", judged=30, window_s=600.0, busy_s=540.0)
    assert cost.per_hour == pytest.approx(180.0) and cost.busy_pct == pytest.approx(90.0)
    assert cost.describe() == ("h200: 180 candidates judged per GPU-hour; 30 in an active window of "
                               "600 s, GPU busy with a profile or verify task 90% of it")
    assert "estimated timings, no GPU" in TargetThroughput("cpu", 1, 10.0, 5.0).describe()
    assert TargetThroughput.from_dict(cost.to_dict()) == cost


def test_an_embedded_suite_reports_what_it_cost(tmp_path: Path) -> None:
    sources = [s for s in read_directory(EXAMPLES) if s.name == "vector_add"]
    problems, failures = load_sources(sources, "native", load_problem_sandboxed)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'suite.db'}")
    report = run_local_suite(settings, "cost", "native", problems, failures,
                             SuiteSettings(targets=("cpu",), budget=2))
    assert report.finished and len(report.throughput) == 1
    cost = report.throughput[0]
    assert cost.target == "cpu" and cost.judged >= 1
    assert 0.0 < cost.busy_s <= cost.window_s and 0.0 < cost.busy_pct <= 100.0
    assert report_from_dict(report.to_dict()).throughput == report.throughput
    steps = {s.kind: s for s in report.steps}  # where the time went, over the suite's jobs
    assert steps["profile"].finished >= cost.judged and "check" in steps["profile"].parts
    assert report_from_dict(report.to_dict()).steps == report.steps
