"""Applying worker results in batches: many results, one transaction, one locking read.

A result costs the scheduler a transaction commit (a disk flush) and a locking read when
applied alone; a fleet sends hundreds per second. `ingest_batch` locks every attempt of a
batch in one read (FOR UPDATE OF attempts, with its track, job, candidate and the job's last
event number) and applies them in order in one fenced transaction, so each is still applied
at most once per attempt id. New frontier rows, the arm/cluster views and job versions go out
once per transaction (views.deferred_writes). `kernelband.scheduling.pipeline.ingest_batch` runs
it; a result that cannot be applied rolls its batch back, and that batch is then applied one
result per transaction (`ingest_safely`), which fails only that result's attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt, Candidate, Event, Job, Track
from kernelband.loop.dedupe import prefetch_same_source
from kernelband.loop.skills import prefetch_for_skills
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.dispatch import TaskResult
from kernelband.scheduling.events import prime_event_counters
from kernelband.scheduling.ingest import LockedAttempt, apply_result, generated_child
from kernelband.scheduling.leases import extend_locked_lease, lease_deadline
from kernelband.scheduling.state import WITHOUT_STORED_STATE

BATCH_SIZE = 500  # results per transaction: bounds how long attempt locks are held


def apply_batch(session: Session, items: Sequence[TaskResult], now: datetime, lease_s: float,
                max_tries: int) -> list[bool]:
    """Each item in order: heartbeats extend leases, results apply at most once."""
    locked = lock_attempts(session, {item.attempt_id for item in items})
    add_children(session, locked, items)
    held = prefetch_for_skills(session, [  # kept while applying (the identity map is weak)
        (job, track, candidate) for attempt, track, job, candidate in locked.values()
        if attempt.kind == "profile" and attempt.decision_id is not None and candidate])
    outcomes = []
    for item in items:
        attempt = locked[item.attempt_id][0] if item.attempt_id in locked else None
        result = item.result
        if attempt is None:
            outcomes.append(False)
        elif result.get("heartbeat"):  # the attempt stays open for its real result
            extend_locked_lease(attempt, lease_deadline(now, lease_s),
                                str(result.get("task_id") or ""), now)
            outcomes.append(False)
        else:
            outcomes.append(apply_locked(session, attempt, result, max_tries))
    del held
    return outcomes


def add_children(session: Session, locked: dict[int, LockedAttempt],
                 items: Sequence[TaskResult]) -> None:
    """The children of the batch's successful generate results, inserted in one flush.

    Only an attempt's first result is looked at: it is the one that will be applied."""
    seen: set[int] = set()
    children = []
    for item in items:
        if item.result.get("heartbeat") or item.attempt_id in seen:
            continue
        seen.add(item.attempt_id)
        attempt, track, _, _ = locked.get(item.attempt_id, (None, None, None, None))
        if (attempt is not None and track is not None and attempt.kind == "generate"
                and attempt.state in ACTIVE_ATTEMPT_STATES and item.result.get("ok")
                and item.result.get("editable")):
            children.append(generated_child(session, track, attempt, item.result))
    session.flush()
    prefetch_same_source(session, children)


def apply_locked(session: Session, attempt: Attempt, result: dict, max_tries: int) -> bool:
    """`ingest_result` for an attempt this transaction holds locked."""
    if attempt.state not in ACTIVE_ATTEMPT_STATES:
        return False  # already applied, or closed by cancellation / expiry
    reason = str(result.get("reason") or "")
    if reason.startswith("task_error") and attempt.tries < max_tries:
        attempt.state, attempt.reason = "expired", f"{reason} on try {attempt.tries}; retrying"
        return True
    apply_result(session, attempt, result)
    return True


def lock_attempts(session: Session, attempt_ids: set[int]) -> dict[int, LockedAttempt]:
    """`lock_attempt` for many attempts in one read, locked in id order.

    Keep the returned dict while applying: it keeps the rows in the session's identity map.
    """
    if not attempt_ids:
        return {}
    last_event = (select(func.max(Event.seq)).where(Event.job_id == Attempt.job_id)
                  .correlate(Attempt).scalar_subquery())
    query = (select(Attempt, Track, Job, Candidate, last_event)
             .join(Track, Track.id == Attempt.track_id).join(Job, Job.id == Attempt.job_id)
             .outerjoin(Candidate, Candidate.id == Attempt.candidate_id)
             .where(Attempt.id.in_(sorted(attempt_ids))).order_by(Attempt.id)
             .with_for_update(of=Attempt).options(WITHOUT_STORED_STATE))
    locked: dict[int, LockedAttempt] = {}
    last: dict[int, int] = {}
    for attempt, track, job, candidate, seq in session.execute(query).all():
        locked[attempt.id] = (attempt, track, job, candidate)
        last[job.id] = max(last.get(job.id, 0), seq or 0)
    prime_event_counters(session, last)
    return locked


__all__ = ["BATCH_SIZE", "apply_batch", "apply_locked", "lock_attempts"]
