"""The job event log: numbers read for many jobs at once continue each job's own sequence."""

from __future__ import annotations

from scheduling_fakes import make_job
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.session import session_scope
from kernelband.scheduling.events import append_event, read_event_counters


def test_read_event_counters_continues_each_job_including_one_without_events(
        db_factory: sessionmaker[Session]) -> None:
    busy, quiet = make_job(db_factory, seed=1), make_job(db_factory, seed=2)
    with session_scope(db_factory) as session:
        for _ in range(3):
            append_event(session, busy, "note", {})
    with session_scope(db_factory) as session:
        read_event_counters(session, [busy, quiet, busy])
        assert append_event(session, busy, "note", {}) == 4
        assert append_event(session, quiet, "note", {}) == 1
