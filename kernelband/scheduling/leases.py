"""Leases: a dispatched attempt is lost when its lease runs out; it is sent again, bounded by tries.

Queue time is not lost time. A try that no worker has taken yet (no lease heartbeat, so
`started_at` is empty) and whose queue still holds messages is presumed to be waiting its
turn: its lease is renewed without a re-send and without spending a try, up to
`queue_timeout_s` after dispatch. Without that, a backlog longer than the lease would re-send
every waiting task (duplicate work at the back of the queue) and fail attempts after
`max_tries` lease periods of plain waiting. When the dispatcher cannot tell how many messages
wait (`waiting` returns None) or the queue is empty, an expired try is treated as lost.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt
from kernelband.scheduling.attempts import note_claimable
from kernelband.scheduling.budgets import as_utc
from kernelband.scheduling.events import append_event
from kernelband.scheduling.ingest import fail_lost_attempt

WaitingCount = Callable[[str], int | None]  # messages still queued in a queue; None: unknown


def expire_leases(session: Session, now: datetime, max_tries: int, lease_s: float = 300.0,
                  waiting: WaitingCount | None = None,
                  queue_timeout_s: float = 3600.0, since: datetime | None = None) -> int:
    """Lost attempts go back to the queue until `max_tries`, then fail with their reason.

    Returns how many were treated as lost; tries still waiting in a busy queue get a new lease.
    `since`: the `now` of this scheduler's last committed call (None: look at every lease).
    Leases that ran out before it were seen then, and every lease it writes ends after the
    moment it is written, so only those ending since are looked at: the (state, lease) index
    keeps an entry for each finished attempt's old dispatched version until a vacuum, and a
    scan from the start visited them all once their leases had passed (11,246 entries on 661
    heap pages 20 s into the 100 x 1,000 benchmark, more with every pull).
    """
    # SQLite stores naive UTC text and Postgres timestamptz; both compare correctly with `now`.
    condition = (Attempt.state == "dispatched") & (Attempt.lease_expires_at < now)
    if since is not None:
        condition &= Attempt.lease_expires_at >= since
    query = select(Attempt).where(condition).order_by(Attempt.id).with_for_update()
    depth: dict[str, int | None] = {}  # one broker question per queue and pass
    lost = 0
    for attempt in session.scalars(query):
        if waiting is not None and _still_queued(attempt, now, queue_timeout_s, depth, waiting):
            attempt.lease_expires_at = now + timedelta(seconds=lease_s)
            continue
        retry_or_fail(session, attempt, max_tries, "lease expired")
        lost += 1
    return lost


def _still_queued(attempt: Attempt, now: datetime, queue_timeout_s: float,
                  depth: dict[str, int | None], waiting: WaitingCount) -> bool:
    """True when no worker took this try yet, its queue is not empty, and it has not waited too long."""
    if attempt.started_at is not None or attempt.dispatched_at is None:
        return False
    if (as_utc(now) - as_utc(attempt.dispatched_at)).total_seconds() > queue_timeout_s:
        return False
    if attempt.queue not in depth:
        depth[attempt.queue] = waiting(attempt.queue)
    return bool(depth[attempt.queue])


def recheck_untaken(session: Session, now: datetime, grace_s: float,
                    waiting: WaitingCount) -> int:
    """A new leader's first look: untaken tries that no queue holds get `grace_s`, not a lease.

    The scheduler commits a try as dispatched before it sends the message. One killed in
    between leaves a try whose message never existed, and it would wait out its whole lease
    (minutes) before being sent again. A worker beats once as soon as it takes a task, so a try
    that was taken shows up within the grace; one still silent then is lost, and
    `expire_leases` sends it again. While its queue holds messages (or the broker cannot say),
    a try keeps its lease: queue time is not lost time. Returns how many leases were shortened.
    """
    deadline = now + timedelta(seconds=grace_s)
    query = (select(Attempt).where(Attempt.state == "dispatched", Attempt.started_at.is_(None),
                                   Attempt.lease_expires_at > deadline)
             .order_by(Attempt.id).with_for_update())
    depth: dict[str, int | None] = {}
    shortened = 0
    for attempt in session.scalars(query):
        if attempt.queue not in depth:
            depth[attempt.queue] = waiting(attempt.queue)
        if depth[attempt.queue] == 0:
            attempt.lease_expires_at = deadline
            shortened += 1
    return shortened


def resend_tries(session: Session, tries: dict[int, str], max_tries: int, why: str) -> list[str]:
    """Tries whose worker is gone (attempt id -> the task id that worker took) are sent again
    now, bounded by tries, unless the attempt closed or moved on to another try meanwhile.
    Returns the task ids given up (their broker deliveries can be forgotten)."""
    if not tries:
        return []
    query = (select(Attempt).where(Attempt.id.in_(sorted(tries)), Attempt.state == "dispatched")
             .order_by(Attempt.id).with_for_update())
    given_up = []
    for attempt in session.scalars(query):
        if tries[attempt.id] and attempt.task_id and tries[attempt.id] != attempt.task_id:
            continue  # already sent again: another worker may hold the current try
        given_up.append(attempt.task_id or "")
        retry_or_fail(session, attempt, max_tries, why)
    return [task_id for task_id in given_up if task_id]


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
        note_claimable()
        attempt.reason = f"{why} on try {attempt.tries}; re-dispatching"
        append_event(session, attempt.job_id, "attempt_retry",
                     {"attempt": attempt.id, "kind": attempt.kind, "tries": attempt.tries})
        return
    slug = why.replace(" ", "_")
    fail_lost_attempt(session, attempt, f"lost:{slug}_after_{attempt.tries}_tries")


def lease_deadline(now: datetime, lease_s: float) -> datetime:
    """When a dispatched attempt counts as lost."""
    return now + timedelta(seconds=lease_s)


def extend_lease(session: Session, attempt_id: int, deadline: datetime,
                 task_id: str = "", now: datetime | None = None) -> bool:
    """Push a dispatched attempt's lease to `deadline` (worker heartbeat); False if closed.

    The first heartbeat of a try also records when a worker took it (`started_at`).
    """
    attempt = session.get(Attempt, attempt_id, with_for_update=True)
    return attempt is not None and extend_locked_lease(attempt, deadline, task_id, now)


def extend_locked_lease(attempt: Attempt, deadline: datetime, task_id: str = "",
                        now: datetime | None = None) -> bool:
    """`extend_lease` for an attempt this transaction already holds locked."""
    if attempt.state != "dispatched":
        return False
    if task_id and attempt.task_id and task_id != attempt.task_id:
        return False  # a superseded try: only the task now holding the lease may extend it
    attempt.lease_expires_at = deadline
    if attempt.started_at is None:
        attempt.started_at = now or deadline
    return True


__all__ = ["expire_leases", "extend_lease", "extend_locked_lease", "lease_deadline",
           "recheck_untaken", "requeue_orphans", "resend_tries", "retry_or_fail"]
