"""The job event log: append-only, numbered per job, written only by the fenced leader."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelband.db.models import Event, utcnow
from kernelband.db.row_buffer import add_row
from kernelband.scheduling.views import touch_job


def append_event(session: Session, job_id: int, kind: str, payload: dict[str, Any]) -> int:
    """Append an event with the next sequence number of the job; returns that number.

    The job's last number is read once per transaction and counted on in memory, so the events
    of one transaction go out together as buffered rows (`row_buffer`). Only the fenced leader
    appends events, one transaction at a time; the unique (job_id, seq) constraint backs that.
    """
    counters = _event_counters(session)
    last = counters.get(job_id)
    if last is None:
        last = session.execute(select(func.max(Event.seq)).where(Event.job_id == job_id)).scalar()
    counters[job_id] = (last or 0) + 1
    add_row(session, Event, {"job_id": job_id, "seq": counters[job_id], "kind": kind,
                             "payload": payload, "created_at": utcnow()})
    touch_job(session, job_id)
    return counters[job_id]


def last_seq(session: Session, job_id: int) -> int:
    """The job's last event number as of this transaction (its own events included)."""
    counters = _event_counters(session)
    if job_id not in counters:
        last = session.execute(select(func.max(Event.seq)).where(Event.job_id == job_id)).scalar()
        counters[job_id] = int(last or 0)
    return counters[job_id]


_EVENT_COUNTERS = "kb_event_counters"


def prime_event_counters(session: Session, last: dict[int, int]) -> None:
    """Jobs' last event numbers, read along with other rows, so `append_event` need not ask."""
    counters = _event_counters(session)
    for job_id, seq in last.items():  # never behind what this transaction already counted
        counters[job_id] = max(counters.get(job_id, 0), seq)


def _event_counters(session: Session) -> dict[int, int]:
    """Last event number per job, valid for the session's current transaction only."""
    transaction = session.get_transaction()
    held = session.info.get(_EVENT_COUNTERS)
    if held is None or held[0] is not transaction:
        held = session.info[_EVENT_COUNTERS] = (transaction, {})
    counters: dict[int, int] = held[1]
    return counters


__all__ = ["append_event", "last_seq", "prime_event_counters"]
