"""The newest measurement of each candidate, read for many candidates in one query."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Candidate, Measurement, Track
from kernelband.db.session import session_scope


def _measured(session: Session, track_id: int, times: list[float]) -> int:
    """A candidate with one measurement per time, in this order (the last is the newest)."""
    candidate = Candidate(track_id=track_id, editable="ORIGINAL")
    session.add(candidate)
    session.flush()
    for time_ms in times:
        session.add(Measurement(candidate_id=candidate.id, label="estimated", method="test",
                                device="cpu", target="cpu", time_ms=time_ms))
        session.flush()
    return candidate.id


def test_each_candidate_gets_its_newest_measurement_and_unmeasured_ones_none(
        db_factory: sessionmaker[Session]) -> None:
    with session_scope(db_factory) as session:
        team = repository.create_team(session, "t")
        problem = repository.get_or_create_problem(session, team.id, "p", "native", "X", {},
                                                   "h" * 64)
        job = repository.create_job(session, team.id, problem.id, ("cpu",))
        track = Track(job_id=job.id, target="cpu")
        session.add(track)
        session.flush()
        twice = _measured(session, track.id, [3.0, 2.0])
        once = _measured(session, track.id, [5.0])
        never = _measured(session, track.id, [])
    with session_scope(db_factory) as session:
        newest = repository.latest_measurements(session, [never, twice, once, twice])
        assert {cid: m.time_ms for cid, m in newest.items()} == {twice: 2.0, once: 5.0}
        assert repository.latest_measurements(session, []) == {}
