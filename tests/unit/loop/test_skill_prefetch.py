"""The skill library's batch prefetch: what `record_skill` reads, read once per batch, by
statements built once; a team's switch is read anew each batch (the API may flip it)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Candidate, Job, Measurement, Skill, Team, Track
from kernelband.db.session import session_scope
from kernelband.loop import skills


def _measured_child(factory: sessionmaker[Session]) -> tuple[int, int, int]:
    """A job whose parent was measured twice on `cpu` (newest 2.0 ms), and a child of it
    measured at 1.0 ms: (job, track, child) ids."""
    with session_scope(factory) as session:
        team = repository.get_or_create_team(session, "team-a")
        problem = repository.get_or_create_problem(
            session, team.id, "toy", "native", "ORIGINAL", {"editable": "ORIGINAL"}, "h" * 64)
        job = repository.create_job(session, team.id, problem.id, ("cpu",))
        track = Track(job_id=job.id, target="cpu", status="running")
        session.add(track)
        session.flush()
        parent = Candidate(track_id=track.id, editable="PARENT", status="measured")
        session.add(parent)
        session.flush()
        child = Candidate(track_id=track.id, parent_id=parent.id, editable="CHILD",
                          strategy="tiling", status="measured", decision_id="d1")
        session.add(child)
        session.flush()
        for candidate_id, time_ms in ((parent.id, 3.0), (parent.id, 2.0), (child.id, 1.0)):
            session.add(Measurement(candidate_id=candidate_id, label="estimated", method="m",
                                    device="d", target="cpu", time_ms=time_ms))
        return job.id, track.id, child.id


def _record(factory: sessionmaker[Session], ids: tuple[int, int, int],
            statements: list[str]) -> bool:
    """Prefetch for the child, then record it with no statement of its own; whether added."""
    job_id, track_id, child_id = ids
    with session_scope(factory) as session:
        job, track = session.get_one(Job, job_id), session.get_one(Track, track_id)
        child = session.get_one(Candidate, child_id)
        measurement = session.scalars(select(Measurement)
                                      .where(Measurement.candidate_id == child_id)).one()
        skills.prefetch_for_skills(session, [(job, track, child)])
        before = len(statements)
        added = skills.record_skill(session, job, track, child, measurement)
        assert not [s for s in statements[before:] if s.startswith("SELECT")], statements
        return added


def test_a_prefetched_batch_records_a_skill_without_reading_and_rereads_the_switch(
        db_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    ids = _measured_child(db_factory)
    statements: list[str] = []

    def log(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement.lstrip().upper())

    engine = db_factory.kw["bind"]
    event.listen(engine, "before_cursor_execute", log)
    try:
        assert _record(db_factory, ids, statements)  # builds the prefetch's statements
        built = skills._statements(engine.dialect.name)

        def no_new_statement(*args: Any) -> Any:
            raise AssertionError("the prefetch built a statement again")

        monkeypatch.setattr(skills, "select", no_new_statement)
        with session_scope(db_factory) as session:
            session.get_one(Team, session.get_one(Job, ids[0]).team_id).skill_library = False
        assert not _record(db_factory, ids, statements)  # the switch was read anew
        assert skills._statements(engine.dialect.name) is built
    finally:
        event.remove(engine, "before_cursor_execute", log)
    with session_scope(db_factory) as session:
        (skill,) = session.scalars(select(Skill)).all()
        assert (skill.before, skill.after, skill.speedup) == ("PARENT", "CHILD", 2.0)
