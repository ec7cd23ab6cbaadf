"""Stage times: per task kind, worker seconds, queue wait and the parts a worker reported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Attempt, Track
from kernelband.db.session import session_scope
from kernelband.scheduling.stages import StageTime, stage_times

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _attempt(track: Track, kind: str, sent: float | None, started: float | None,
             finished: float | None, state: str = "done",
             result: dict[str, Any] | None = None) -> Attempt:
    def at(s: float | None) -> datetime | None:
        return None if s is None else T0 + timedelta(seconds=s)

    return Attempt(job_id=track.job_id, track_id=track.id, kind=kind, state=state,
                   created_at=T0, dispatched_at=at(sent), started_at=at(started),
                   finished_at=at(finished), result=result)


def test_stage_times_summarise_work_wait_and_parts(sqlite_factory: sessionmaker[Session]) -> None:
    with session_scope(sqlite_factory) as session:
        team = repository.get_or_create_team(session, "team-s")
        problem = repository.get_or_create_problem(session, team.id, "p", "native", "S", {}, "h")
        job_id = repository.create_job(session, team.id, problem.id, ("cpu",)).id
        track = Track(job_id=job_id, target="cpu")
        session.add(track)
        session.flush()
        session.add_all([
            _attempt(track, "profile", 0, 1, 3, result={"timings": {"check": 1.5, "measure": 0.5}}),
            _attempt(track, "profile", 0, 2, 6, result={"timings": {"check": 2.5, "bad": "x"}}),
            _attempt(track, "profile", 0, 3, 9, state="failed", result={"ok": False}),
            _attempt(track, "generate", 0, None, 0.5),  # no start beat: queue wait included
            _attempt(track, "compile", None, None, 4),  # never sent: nothing to count
            _attempt(track, "verify", 0, 1, None),  # still running: not finished
        ])
    with session_scope(sqlite_factory) as session:
        stages = {s.kind: s for s in stage_times(session, job_id)}
    assert list(stages) == ["generate", "profile"]  # pipeline order, finished attempts only
    profile = stages["profile"]
    assert (profile.finished, profile.failed) == (3, 1)
    assert profile.work_median_s == pytest.approx(4.0)  # 2, 4 and 6 s from the start beats
    assert profile.work_p90_s == pytest.approx(6.0) and profile.work_total_s == pytest.approx(12)
    assert profile.wait_median_s == pytest.approx(2.0)
    assert profile.parts == {"check": pytest.approx(2.0), "measure": pytest.approx(0.5)}
    assert profile.parts_total_s == {"check": pytest.approx(4.0), "measure": pytest.approx(0.5)}
    generate = stages["generate"]
    assert generate.work_median_s == pytest.approx(0.5) and generate.wait_median_s is None
    assert profile.text() == "profile x3: 4.00 s median, p90 6.00 (check 2.00, measure 0.50)"


def test_stage_times_of_several_jobs_pool_their_attempts(sqlite_factory: sessionmaker[Session]) -> None:
    with session_scope(sqlite_factory) as session:
        team = repository.get_or_create_team(session, "team-s2")
        problem = repository.get_or_create_problem(session, team.id, "p", "native", "S", {}, "h")
        tracks = []
        for _ in range(3):
            track = Track(job_id=repository.create_job(session, team.id, problem.id, ("cpu",)).id, target="cpu")
            session.add(track)
            tracks.append(track)
        session.flush()
        session.add_all([_attempt(track, "profile", 0, 0, seconds)
                         for track, seconds in zip(tracks, (1, 2, 9), strict=True)])
        job_ids = [t.job_id for t in tracks]
    with session_scope(sqlite_factory) as session:
        pooled = stage_times(session, job_ids[:2])
        alone = stage_times(session, job_ids[2])
    assert [(s.kind, s.finished, s.work_median_s) for s in pooled] == [("profile", 2, 1.5)]
    assert [(s.finished, s.work_median_s) for s in alone] == [(1, 9.0)]
    assert StageTime.from_dict(pooled[0].to_dict()) == pooled[0]
