"""Claiming pending attempts for sending: one statement, oldest first, a new try each."""

from __future__ import annotations

from datetime import timedelta

from scheduling_fakes import make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Attempt, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling.attempts import (
    claim_pending,
    claimable_noted,
    insert_claimed,
    new_attempt,
    send_on_commit,
)
from kernelband.scheduling.lifecycle import start_queued_jobs


def _pending_attempts(factory: sessionmaker[Session], count: int) -> list[int]:
    """`count` pending compile attempts on one started job, ids ascending."""
    make_job(factory)
    with session_scope(factory) as session:
        start_queued_jobs(session)  # the track and its pending baseline attempt
        track = session.scalars(select(Track)).one()
        for _ in range(count - 1):
            new_attempt(session, track, "compile", track.original_candidate_id)
        session.flush()
        return sorted(session.scalars(select(Attempt.id)))


def test_claims_the_oldest_with_a_new_try_a_lease_and_a_task_id(
        db_factory: sessionmaker[Session]) -> None:
    ids = _pending_attempts(db_factory, 4)
    now = utcnow()
    lease = now + timedelta(seconds=60)
    with session_scope(db_factory) as session:
        claimed = claim_pending(session, now, lease, limit=3)
    assert [a.id for a in claimed] == ids[:3]
    assert [a.task_id for a in claimed] == [f"kb-{i}-1" for i in ids[:3]]
    assert claimed[1].kind == "compile" and claimed[1].queue and claimed[1].payload == {}
    with session_scope(db_factory) as session:
        rows = {a.id: a for a in session.scalars(select(Attempt))}
        assert [rows[i].state for i in ids] == ["dispatched"] * 3 + ["pending"]
        assert all(rows[i].tries == 1 and rows[i].started_at is None for i in ids[:3])
        assert rows[ids[0]].lease_expires_at is not None
        assert abs((rows[ids[0]].lease_expires_at.replace(tzinfo=None)
                    - lease.replace(tzinfo=None)).total_seconds()) < 1e-3
        rows[ids[0]].state = "expired"  # its lease ran out: it is sent again
    with session_scope(db_factory) as session:
        again = claim_pending(session, now, lease, limit=10)
    assert [(a.id, a.task_id) for a in again] == [(ids[0], f"kb-{ids[0]}-2"),
                                                   (ids[3], f"kb-{ids[3]}-1")]
    with session_scope(db_factory) as session:
        assert claim_pending(session, now, lease, limit=10) == []


def test_a_claim_above_what_was_claimed_finds_the_rest_and_an_expiry_reopens_the_search(
        db_factory: sessionmaker[Session]) -> None:
    ids = _pending_attempts(db_factory, 4)
    now, lease = utcnow(), utcnow() + timedelta(seconds=60)
    with session_scope(db_factory) as session:
        first = claim_pending(session, now, lease, limit=2)
    with session_scope(db_factory) as session:  # looks above the highest id claimed
        rest = claim_pending(session, now, lease, limit=10, claimable_after=first[-1].id)
    assert [a.id for a in first + rest] == ids
    with session_scope(db_factory) as session:
        session.get_one(Attempt, ids[0]).state = "expired"
    with session_scope(db_factory) as session:  # below the mark: the caller starts from 0
        assert claim_pending(session, now, lease, limit=10, claimable_after=ids[-1]) == []
        assert [a.id for a in claim_pending(session, now, lease, limit=10)] == [ids[0]]


def test_attempts_inserted_claimed_go_out_with_their_transaction(
        db_factory: sessionmaker[Session]) -> None:
    """Held by `send_on_commit`, inserted as a claim leaves them (no later claim finds them);
    one created after `insert_claimed` is inserted pending, as without it."""
    base = _pending_attempts(db_factory, 1)  # the baseline, pending
    now, lease = utcnow(), utcnow() + timedelta(seconds=60)
    noted = claimable_noted()
    with session_scope(db_factory) as session:
        send_on_commit(session)
        track = session.scalars(select(Track)).one()
        for kind in ("compile", "profile"):
            new_attempt(session, track, kind, track.original_candidate_id, "d1", {"turn": 0})
        assert session.scalars(select(Attempt.id)).all() == base  # held, not yet inserted
        created = insert_claimed(session, now, lease)
        new_attempt(session, track, "verify", track.original_candidate_id)  # after: pending
    assert claimable_noted() == noted + 1
    assert [a.kind for a in created] == ["compile", "profile"]
    assert [a.task_id for a in created] == [f"kb-{a.id}-1" for a in created]
    assert created[0].payload == {"turn": 0} and created[0].queue == "cpu"
    with session_scope(db_factory) as session:
        rows = {a.id: a for a in session.scalars(select(Attempt))}
        assert all(rows[a.id].state == "dispatched" and rows[a.id].tries == 1
                   and rows[a.id].task_id == a.task_id and rows[a.id].decision_id == "d1"
                   and rows[a.id].dispatched_at is not None and rows[a.id].result is None
                   for a in created)
        claimed = claim_pending(session, now, lease, limit=10)
    assert [a.kind for a in claimed] == ["profile", "verify"]  # the baseline and the late one


def test_attempts_held_and_never_taken_are_inserted_pending(
        db_factory: sessionmaker[Session]) -> None:
    _pending_attempts(db_factory, 1)
    with session_scope(db_factory) as session:
        send_on_commit(session)
        track = session.scalars(select(Track)).one()
        new_attempt(session, track, "compile", track.original_candidate_id)
    with session_scope(db_factory) as session:
        states = sorted(session.scalars(select(Attempt.state)))
    assert states == ["pending", "pending"]
