"""The job event log: append-only, numbered per job, written only by the fenced leader.

Each job's last event number is read from Postgres once per process and then counted on in
memory: per engine, the numbers as of the last commit (`_COMMITTED`). Only the fenced leader
appends events, one transaction at a time, so a committed number stays the job's last until
this process appends the next one. A transaction's numbers become the committed ones when it
commits; any rollback forgets them all (a commit whose outcome is unknown rolls back too), as
does a scheduler taking the lead (`state_cache.clear_cache`): another leader may have appended
since. The unique (job_id, seq) constraint backs all of this: a number counted from a stale
reading fails its transaction, which forgets the numbers, and the next reads them afresh.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy import event as orm_events
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from kernelband.db.models import Event, Job, utcnow
from kernelband.db.row_buffer import add_row
from kernelband.scheduling.views import touch_job

_COMMITTED: weakref.WeakKeyDictionary[Engine, dict[int, int]] = weakref.WeakKeyDictionary()
_EVENT_COUNTERS = "kb_event_counters"
_LISTENING = "kb_event_counters_listening"

# One index probe (backwards) per job: the jobs' last event numbers not yet held.
_LAST_SEQS = (select(Job.id, select(func.max(Event.seq)).where(Event.job_id == Job.id)
                     .correlate(Job).scalar_subquery())
              .where(Job.id.in_(bindparam("ids", expanding=True))))


def append_event(session: Session, job_id: int, kind: str, payload: dict[str, Any]) -> int:
    """Append an event with the next sequence number of the job; returns that number.

    The events of one transaction go out together as buffered rows (`row_buffer`)."""
    number = last_seq(session, job_id) + 1
    _event_counters(session)[job_id] = number
    add_row(session, Event, {"job_id": job_id, "seq": number, "kind": kind,
                             "payload": payload, "created_at": utcnow()})
    touch_job(session, job_id)
    return number


def last_seq(session: Session, job_id: int) -> int:
    """The job's last event number as of this transaction (its own events included)."""
    counters = _event_counters(session)
    if job_id not in counters:
        hold_event_counters(session, (job_id,))
    return counters[job_id]


def hold_event_counters(session: Session, job_ids: Collection[int]) -> None:
    """Make these jobs' last event numbers known to this transaction: from the numbers last
    committed by this process, the others read in one query (none when all are held)."""
    counters = _event_counters(session)
    committed = _committed(session)
    missing = []
    for job_id in job_ids:
        if job_id in counters:
            continue
        if job_id in committed:
            counters[job_id] = committed[job_id]
        else:
            missing.append(job_id)
    if missing:
        read = session.execute(_LAST_SEQS, {"ids": sorted(set(missing))}).all()
        prime_event_counters(session, {job_id: int(seq or 0) for job_id, seq in read})
        for job_id in missing:  # a job without a row (deleted): its events are gone with it
            counters.setdefault(job_id, 0)


def prime_event_counters(session: Session, last: dict[int, int]) -> None:
    """Jobs' last event numbers, read along with other rows, so `append_event` need not ask."""
    counters = _event_counters(session)
    for job_id, seq in last.items():  # never behind what this transaction already counted
        counters[job_id] = max(counters.get(job_id, 0), seq)


def forget_event_counters() -> None:
    """Forget every number this process holds (a new leader; a database emptied in tests)."""
    _COMMITTED.clear()


def _event_counters(session: Session) -> dict[int, int]:
    """Last event number per job, valid for the session's current transaction only (begun
    here if none is: numbers taken from memory run no statement that would begin it)."""
    transaction = session.get_transaction() or session.begin()
    held = session.info.get(_EVENT_COUNTERS)
    if held is None or held[0] is not transaction:
        held = session.info[_EVENT_COUNTERS] = (transaction, {})
        if not session.info.get(_LISTENING):  # once per session
            session.info[_LISTENING] = True
            orm_events.listen(session, "after_commit", _publish)
            orm_events.listen(session, "after_soft_rollback", _forget)
    counters: dict[int, int] = held[1]
    return counters


def _publish(session: Session) -> None:
    """after_commit: this transaction's numbers are the jobs' last committed ones."""
    held = session.info.pop(_EVENT_COUNTERS, None)
    if held is not None and held[0] is session.get_transaction() and held[1]:
        _committed(session).update(held[1])


def _forget(session: Session, _previous: Any) -> None:
    """after_soft_rollback: what it counted may not be committed, and a failed insert may
    mean a number held here is stale."""
    session.info.pop(_EVENT_COUNTERS, None)
    _committed(session).clear()


def _committed(session: Session) -> dict[int, int]:
    bind = session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    if not isinstance(engine, Engine):
        return {}
    return _COMMITTED.setdefault(engine, {})


__all__ = ["append_event", "forget_event_counters", "hold_event_counters", "last_seq",
           "prime_event_counters"]
