"""The fleet run's pure parts: lost/doubled checks, interval arithmetic, stages."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.gpu.fleet_records import (
    AttemptRow,
    CandidateRow,
    JobRow,
    MeasurementRow,
    PullRow,
    Records,
    TrackRow,
    aggregate_stages,
    integrity,
    merged_seconds,
)

QUEUE = "gpu.h100"


def attempt(id: int, kind: str, **kw: object) -> AttemptRow:
    base = {"job_id": 1, "track_id": 10, "state": "done", "tries": 1, "queue": QUEUE,
            "has_result": True}
    return AttemptRow(id=id, kind=kind, **{**base, **kw})  # type: ignore[arg-type]


def clean_records() -> Records:
    """One finished job: baseline, one pull (generate, compile, profile) and the verify."""
    attempts = [
        attempt(1, "profile", candidate_id=100, started_at=10.0, finished_at=12.0),
        attempt(2, "generate", queue="llm", decision_id="d1", candidate_id=100),
        attempt(3, "compile", queue="cpu", decision_id="d1", candidate_id=101),
        attempt(4, "profile", decision_id="d1", candidate_id=101, started_at=14.0,
                finished_at=17.0),
        attempt(5, "verify", candidate_id=101, started_at=18.0, finished_at=19.0),
    ]
    return Records(
        jobs=[JobRow(1, "completed")],
        tracks=[TrackRow(10, 1, "h100", "completed", 1)],
        attempts=attempts,
        candidates=[CandidateRow(100, 10, None, 0, "measured"),
                    CandidateRow(101, 10, "d1", 1, "measured")],
        measurements=[MeasurementRow(100, "h100"), MeasurementRow(101, "h100")],
        pulls=[PullRow(1, "h100", "d1")],
    )


def test_a_clean_run_has_nothing_lost_or_doubled() -> None:
    found = integrity(clean_records())
    assert found["ok"] is True
    assert found["counts"]["attempts"] == 5
    assert found["counts"]["results_recorded"] == 5
    assert found["counts"]["attempts_by_kind"]["profile"] == {"done": 2}


def test_a_second_measurement_of_one_candidate_is_doubled() -> None:
    records = clean_records()
    doubled = replace(records, measurements=[*records.measurements, MeasurementRow(100, "h100")])
    found = integrity(doubled)
    assert found["ok"] is False
    assert found["doubled_measurements"] == {"(100, 'h100')": 2}


def test_the_final_re_measure_of_the_best_is_not_doubled_but_a_third_measurement_is() -> None:
    records = clean_records()  # candidate 101 went through a finished verify attempt
    remeasured = replace(records, measurements=[*records.measurements, MeasurementRow(101, "h100")])
    assert integrity(remeasured)["ok"] is True
    third = replace(remeasured, measurements=[*remeasured.measurements, MeasurementRow(101, "h100")])
    assert integrity(third)["doubled_measurements"] == {"(101, 'h100')": 3}


def test_a_pull_finished_twice_is_doubled_and_breaks_the_iteration_count() -> None:
    records = clean_records()
    found = integrity(replace(records, pulls=[*records.pulls, PullRow(1, "h100", "d1")]))
    assert found["doubled_pulls"] == {"(1, 'h100', 'd1')": 2}
    assert found["iterations_mismatch"] == ["job 1 h100: 1 iterations, 2 pulls"]


def test_decision_ids_repeat_across_tracks_without_counting_as_doubled() -> None:
    records = clean_records()
    other = CandidateRow(201, 20, "d1", 1, "measured")  # same decision id, another track
    assert integrity(replace(records, candidates=[*records.candidates, other]))["ok"] is True


def test_a_decision_without_a_finished_pull_is_lost() -> None:
    found = integrity(replace(clean_records(), pulls=[]))
    assert found["decisions_without_pull"] == ["(1, 'h100', 'd1')"]


def test_open_attempts_unfinished_jobs_and_silent_failures_are_reported() -> None:
    records = clean_records()
    attempts = [*records.attempts, attempt(6, "profile", state="dispatched", has_result=False),
                attempt(7, "compile", state="failed", reason=None),
                attempt(8, "compile", state="done", has_result=False)]
    found = integrity(replace(records, attempts=attempts, jobs=[JobRow(1, "running")]))
    assert found["open_attempts"] == [6]
    assert found["unfinished_jobs"] == [1]
    assert found["failed_without_reason"] == [7]
    assert found["closed_without_result"] == [8]


def test_merged_seconds_counts_overlaps_once_and_clips_to_the_window() -> None:
    intervals = [(0.0, 4.0), (2.0, 6.0), (8.0, 12.0), (20.0, 30.0)]
    assert merged_seconds(intervals, (1.0, 10.0)) == pytest.approx(5.0 + 2.0)
    assert merged_seconds([], (0.0, 10.0)) == 0.0


def test_aggregate_stages_sums_attempts_and_takes_medians_across_jobs() -> None:
    job_a = [{"kind": "profile", "finished": 2, "failed": 0, "work_median_s": 3.0,
              "work_p90_s": 4.0, "work_total_s": 6.0, "wait_median_s": 1.0,
              "parts": {"measure": 2.0}}]
    job_b = [{"kind": "generate", "finished": 1, "failed": 1, "work_median_s": 0.5,
              "work_p90_s": 0.5, "work_total_s": 0.5, "wait_median_s": None, "parts": {}},
             {"kind": "profile", "finished": 1, "failed": 0, "work_median_s": 5.0,
              "work_p90_s": 5.0, "work_total_s": 5.0, "wait_median_s": 3.0,
              "parts": {"measure": 4.0}}]
    rows = aggregate_stages([job_a, job_b])
    assert [r["kind"] for r in rows] == ["generate", "profile"]
    profile = rows[1]
    assert profile["finished"] == 3
    assert profile["work_total_s"] == 11.0
    assert profile["work_mean_s"] == pytest.approx(11.0 / 3)
    assert profile["work_median_s"] == 4.0
    assert profile["wait_median_s"] == 2.0
    assert profile["parts_median_s"] == {"measure": 3.0}
    assert rows[0]["wait_median_s"] is None and rows[0]["failed"] == 1
