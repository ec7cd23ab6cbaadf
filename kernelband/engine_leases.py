"""Leases: a dispatched attempt is lost when its lease runs out; it is sent again, bounded by tries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt
from kernelband.engine_ingest import fail_lost_attempt
from kernelband.engine_support import append_event


def expire_leases(session: Session, now: datetime, max_tries: int) -> int:
    """Lost attempts go back to the queue until `max_tries`, then fail with their reason."""
    # SQLite stores naive UTC text and Postgres timestamptz; both compare correctly with `now`.
    query = (select(Attempt).where(Attempt.state == "dispatched",
                                   Attempt.lease_expires_at < now)
             .order_by(Attempt.id).with_for_update())
    expired = list(session.scalars(query))
    for attempt in expired:
        retry_or_fail(session, attempt, max_tries, "lease expired")
    return len(expired)


def requeue_orphans(session: Session, max_tries: int) -> int:
    """Embedded restart: every dispatched attempt died with the old process; send it again."""
    query = (select(Attempt).where(Attempt.state == "dispatched").order_by(Attempt.id)
             .with_for_update())
    orphans = list(session.scalars(query))
    for attempt in orphans:
        retry_or_fail(session, attempt, max_tries, "scheduler restarted")
    return len(orphans)


def retry_or_fail(session: Session, attempt: Attempt, max_tries: int, why: str) -> None:
    """A lost attempt is sent again while tries remain, else it fails with its reason."""
    if attempt.tries < max_tries:
        attempt.state = "expired"  # dispatch_pending sends it again
        attempt.reason = f"{why} on try {attempt.tries}; re-dispatching"
        append_event(session, attempt.job_id, "attempt_retry",
                     {"attempt": attempt.id, "kind": attempt.kind, "tries": attempt.tries})
        return
    slug = why.replace(" ", "_")
    fail_lost_attempt(session, attempt, f"lost:{slug}_after_{attempt.tries}_tries")


def extend_lease(session: Session, attempt_id: int, deadline: datetime,
                 task_id: str = "") -> bool:
    """Push a dispatched attempt's lease to `deadline` (worker heartbeat); False if closed."""
    attempt = session.get(Attempt, attempt_id, with_for_update=True)
    if attempt is None or attempt.state != "dispatched":
        return False
    if task_id and attempt.task_id and task_id != attempt.task_id:
        return False  # a superseded try: only the task now holding the lease may extend it
    attempt.lease_expires_at = deadline
    return True
