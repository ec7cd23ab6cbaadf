"""A generate payload's profile facts come from the newest measurement of its parent."""

from __future__ import annotations

from scheduling_fakes import make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Candidate, Measurement, Track
from kernelband.db.session import session_scope
from kernelband.scheduling.attempts import ClaimedAttempt
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.payloads import task_payloads


def _measure(session: Session, candidate_id: int, time_ms: float) -> None:
    session.add(Measurement(candidate_id=candidate_id, label="estimated", method="test",
                            device="cpu", target="cpu", time_ms=time_ms))
    session.flush()


def test_each_parent_reads_its_newest_measurement_and_an_unmeasured_one_none(
        db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory)
    with session_scope(db_factory) as session:
        start_queued_jobs(session)
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        twice, never = (Candidate(track_id=track.id, editable=f"K{i}") for i in range(2))
        session.add_all([twice, never])
        session.flush()
        _measure(session, twice.id, 4.0)
        _measure(session, twice.id, 3.0)  # the newest
        attempts = [ClaimedAttempt(1000 + i, job_id, track.id, "generate", "q", cid, {}, "t")
                    for i, cid in enumerate((twice.id, never.id, twice.id))]
    with session_scope(db_factory) as session:
        payloads = task_payloads(session, attempts)
    assert [p["parent_editable"] for p in payloads] == ["K0", "K1", "K0"]
    assert payloads[0]["profile_summary"][0]["value"] == 3.0
    assert payloads[0]["profile_summary"] == payloads[2]["profile_summary"]
    assert payloads[1]["profile_summary"] == []
