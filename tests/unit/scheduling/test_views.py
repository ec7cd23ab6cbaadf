"""The per-job version: bumped once by each scheduler transaction that changes the job."""

from __future__ import annotations

import pytest
from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Job
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.events import append_event
from kernelband.scheduling.pipeline import EngineContext, step


def version(factory: sessionmaker[Session], job_id: int) -> int:
    with session_scope(factory) as session:
        return int(session.scalar(select(Job.version).where(Job.id == job_id)) or 0)


def test_a_transaction_with_events_bumps_the_version_once(
    db_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(db_factory)
    before = version(db_factory, job_id)
    with session_scope(db_factory) as session:
        for _ in range(3):
            append_event(session, job_id, "note", {})
    assert version(db_factory, job_id) == before + 1
    with session_scope(db_factory) as session:  # reads only: nothing to tell pollers
        session.get_one(Job, job_id)
    assert version(db_factory, job_id) == before + 1


def test_a_rolled_back_transaction_leaves_the_version(db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory)
    before = version(db_factory, job_id)
    with pytest.raises(RuntimeError), session_scope(db_factory) as session:
        append_event(session, job_id, "note", {})
        raise RuntimeError("roll back")
    assert version(db_factory, job_id) == before


def test_every_scheduler_step_that_changes_a_job_changes_its_version(
    db_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(db_factory, budget_iterations=3)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    seen = [version(db_factory, job_id)]
    for _ in range(40):
        step(ctx)
        seen.append(version(db_factory, job_id))
        with session_scope(db_factory) as session:
            if session.get_one(Job, job_id).status == "completed":
                break
    assert seen == sorted(seen) and seen[-1] > seen[0] + 3  # never back, bumped along the way
    step(ctx)  # a finished job: nothing changes, the version stays
    assert version(db_factory, job_id) == seen[-1]
