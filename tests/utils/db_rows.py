"""Rows most database tests start from: a team's job on a toy problem, and a running track."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Job, Track
from kernelband.db.session import session_scope


def new_job(session: Session, team_name: str) -> Job:
    """A queued cpu job of a new team, on a one-line toy problem."""
    team = repository.get_or_create_team(session, team_name)
    problem = repository.get_or_create_problem(
        session, team.id, "toy", "native", "X", {"editable": "X"}, "t" * 64)
    return repository.create_job(session, team.id, problem.id, ("cpu",))


def new_track(factory: sessionmaker[Session], team_name: str) -> int:
    """The id of a running cpu track of a new job (committed)."""
    with session_scope(factory) as session:
        track = Track(job_id=new_job(session, team_name).id, target="cpu", status="running")
        session.add(track)
        session.flush()
        return track.id
