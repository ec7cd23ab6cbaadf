"""Selection: free slots come from the track's pull counters, which match its open attempts."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.dispatch import InboxDispatcher, TaskMessage
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, step
from kernelband.scheduling.selection import tracks_with_free_slots


class FaultyDispatcher(InboxDispatcher):
    """Loses every 5th task, answers every 7th twice, crashes every 4th compile and garbles
    every 6th profile; the rest run inline. The pattern is fixed, so runs repeat."""

    def __init__(self) -> None:
        super().__init__()
        self.count = itertools.count(1)

    def submit(self, task: TaskMessage) -> str:
        n = next(self.count)
        if n % 5 == 0:
            return task.task_id  # a dead worker: the lease expires, the task is sent again
        result: dict[str, Any]
        if task.kind == "compile" and n % 4 == 0:
            result = {"ok": False, "reason": "task_error:OSError", "message": "disk full"}
        elif task.kind == "profile" and n % 6 == 0 and not task.payload.get("original"):
            result = {"ok": True, "measurement": {"label": "estimated"}}  # keys missing
        else:
            result = FAKE_TASKS[task.kind](task.payload)
        self.deliver(task.attempt_id, result)
        if n % 7 == 0:
            self.deliver(task.attempt_id, result)  # a duplicate delivery
        return task.task_id


def open_pulls(session: Session) -> dict[int, int]:
    """Open attempts of pulls per track, counted from the attempts themselves."""
    query = (select(Attempt.track_id, func.count(Attempt.id))
             .where(Attempt.decision_id.is_not(None), Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
             .group_by(Attempt.track_id))
    return {int(track): int(count) for track, count in session.execute(query).all()}


def test_pull_counters_match_open_attempts_through_faults(
        db_factory: sessionmaker[Session]) -> None:
    job_ids = [make_job(db_factory, budget_iterations=12, parallelism=3, seed=seed)
               for seed in (1, 2)]
    now = [utcnow()]

    def clock() -> datetime:
        return now[0]

    ctx = EngineContext(db_factory, FaultyDispatcher(), Settings(max_tries=3, lease_s=30),
                        clock=clock)
    checked = 0
    for _ in range(400):
        step(ctx)
        now[0] += timedelta(seconds=31)  # every lost task's lease runs out by the next pass
        with session_scope(db_factory) as session:
            counted = open_pulls(session)
            for track in session.scalars(select(Track).where(Track.status == "running")):
                assert track.iterations_dispatched - track.iterations_done == counted.get(
                    track.id, 0), f"track {track.id}"
                checked += 1
            for row in tracks_with_free_slots(session):
                assert row.pulls == counted.get(row.track_id, 0)
        if all(job_is_finished(db_factory, job_id) for job_id in job_ids):
            break
    assert all(job_is_finished(db_factory, job_id) for job_id in job_ids)
    assert checked > 20
    with session_scope(db_factory) as session:  # the faults did happen
        reasons = {reason for reason in session.scalars(select(Attempt.reason)) if reason}
        tries = session.scalar(select(func.max(Attempt.tries)))
    assert "malformed_result:measurement" in reasons and tries and tries >= 2
    assert any(reason.startswith("lost:") for reason in reasons)
