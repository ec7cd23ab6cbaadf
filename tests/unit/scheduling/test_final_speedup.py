"""A job's reported speedup: each best carries its paired interval, and the final step's
re-measure against the original becomes the track's speedup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduling_fakes import FAKE_TASKS, fake_profile, fake_time, toy_problem
from sqlalchemy import select

from kernelband.config import Settings
from kernelband.db.models import Event, Measurement, Track
from kernelband.db.session import open_database, session_scope
from kernelband.scheduling.embedded import JobOptions, run_local_job

METHOD = "ABBA rounds; 95% BCa bootstrap"


def _paired(point: float, spread: float) -> dict[str, Any]:
    return {"point": point, "low": point - spread, "high": point + spread, "rounds": 20,
            "method": METHOD, "baseline": "original"}


def paired_profile(payload: dict[str, Any]) -> dict[str, Any]:
    """The fake profile, measured on a GPU: original / candidate with a +-0.05 interval."""
    result = fake_profile(payload)
    point = 1.0 / fake_time(payload["editable"])
    result["measurement"] |= {"label": "measured", "device": "fake GPU",
                              "speedup": _paired(point, 0.05)}
    return result


def remeasuring_verify(payload: dict[str, Any]) -> dict[str, Any]:
    """Held-out cases pass; the final re-measure finds a smaller, still significant speedup."""
    result = paired_profile(payload)
    result["measurement"]["speedup"] = _paired(1.10, 0.03)
    return {"ok": True, "verdict": {"correct": True}, "measurement": result["measurement"],
            "features": result["features"]}


def test_the_final_re_measure_is_the_reported_speedup(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", poll_interval_s=0.01)
    tasks = {**FAKE_TASKS, "profile": paired_profile, "verify": remeasuring_verify}
    outcome = run_local_job(settings, toy_problem(), JobOptions(targets=("h200",), budget=4,
                                                                parallel=1, seed=3),
                            functions=tasks)
    assert outcome.status == "completed"
    (track_outcome,) = outcome.tracks
    assert track_outcome.speedup_text == "1.10x [1.07, 1.13]"
    _, factory = open_database(settings.effective_database_url)
    with session_scope(factory) as session:
        track = session.scalars(select(Track)).one()
        assert track.best_candidate_id != track.original_candidate_id  # tiling found a faster one
        assert (track.best_speedup, track.best_speedup_low, track.best_speedup_high) == (
            1.10, 1.10 - 0.03, 1.10 + 0.03)
        assert track.best_speedup_final is True and track.best_speedup_method == METHOD
        rows = session.scalars(select(Measurement).where(
            Measurement.candidate_id == track.best_candidate_id).order_by(Measurement.id)).all()
        assert len(rows) == 2 and rows[-1].speedup == 1.10  # the search's, then the final one
        assert rows[0].speedup_low is not None and rows[0].speedup_rounds == 20
        bests = session.scalars(select(Event).where(Event.kind == "new_best")).all()
        assert all(e.payload["speedup_low"] is not None for e in bests
                   if e.payload["candidate"] != track.original_candidate_id)
        done = session.scalars(select(Event).where(Event.kind == "track_completed")).one()
        assert done.payload["best_speedup"] == 1.10 and done.payload["significant"] is True


def test_a_best_that_cannot_be_measured_again_is_not_accepted(tmp_path: Path) -> None:
    def failing_verify(payload: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False, "reason": "final_measure:timing_forged", "message": "forged"}

    settings = Settings(data_dir=tmp_path / "data", poll_interval_s=0.01)
    tasks = {**FAKE_TASKS, "profile": paired_profile, "verify": failing_verify}
    outcome = run_local_job(settings, toy_problem(), JobOptions(targets=("h200",), budget=3,
                                                                parallel=1, seed=3),
                            functions=tasks)
    (track_outcome,) = outcome.tracks
    assert track_outcome.speedup_text == "1.00x original"  # every faster child was refused
    assert track_outcome.held_out == "original"
