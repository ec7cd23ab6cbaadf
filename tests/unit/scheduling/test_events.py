"""The job event log: numbers read for many jobs at once (with the tracks a selection loads)
continue each job's own sequence."""

from __future__ import annotations

from scheduling_fakes import make_job
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Event, Track
from kernelband.db.session import session_scope
from kernelband.scheduling.events import append_event
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.selection import load_tracks


def test_tracks_loaded_for_selection_continue_each_jobs_events_including_one_without(
        db_factory: sessionmaker[Session]) -> None:
    busy, quiet = make_job(db_factory, seed=1), make_job(db_factory, seed=2)
    with session_scope(db_factory) as session:
        start_queued_jobs(session)  # one track each
        session.execute(delete(Event).where(Event.job_id == quiet))  # a job without events
        started = session.scalar(select(func.max(Event.seq)).where(Event.job_id == busy)) or 0
    with session_scope(db_factory) as session:
        for _ in range(3):
            append_event(session, busy, "note", {})
    with session_scope(db_factory) as session:
        track_ids = list(session.scalars(select(Track.id).where(Track.job_id.in_([busy, quiet]))))
        assert {job.id for _, job in load_tracks(session, track_ids).values()} == {busy, quiet}
        assert append_event(session, busy, "note", {}) == started + 4
        assert append_event(session, quiet, "note", {}) == 1
