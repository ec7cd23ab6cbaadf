"""Attempts: one try of one task (generate, compile, profile, verify) for a track.

An attempt is created pending, dispatched only after the transaction that created it
commits, and closed exactly once (done or failed); `expired` ones wait to be sent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, bindparam, cast, func, literal, select, update
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt, Track, utcnow
from kernelband.db.row_buffer import add_row
from kernelband.scheduling.dispatch import queue_for

# An attempt in one of these states is open: its result may still be applied (the only
# definition; ingest, selection and the lifecycle import it).
ACTIVE_ATTEMPT_STATES = ("pending", "dispatched", "expired")


def new_attempt(session: Session, track: Track, kind: str, candidate_id: int | None,
                decision_id: str | None = None, ref: dict[str, Any] | None = None) -> None:
    """A pending attempt; it is dispatched only after this transaction commits.

    A buffered row (`row_buffer`): inserted with the transaction's other new attempts."""
    add_row(session, Attempt, {
        "job_id": track.job_id, "track_id": track.id, "kind": kind, "state": "pending",
        "decision_id": decision_id, "candidate_id": candidate_id,
        "queue": queue_for(kind, track.target), "task_id": None, "tries": 0,
        "payload": dict(ref or {}), "result": None, "reason": None, "lease_expires_at": None,
        "created_at": utcnow(), "dispatched_at": None, "started_at": None, "finished_at": None})


@dataclass(frozen=True)
class ClaimedAttempt:
    """The fields of an attempt just claimed for sending (what its task message needs)."""

    id: int
    job_id: int
    track_id: int
    kind: str
    queue: str
    candidate_id: int | None
    payload: dict[str, Any]
    task_id: str


def claim_pending(session: Session, now: datetime, lease_expires_at: datetime,
                  limit: int, claimable_after: int = 0) -> list[ClaimedAttempt]:
    """Mark up to `limit` pending (or expired) attempts dispatched, oldest first, in one
    UPDATE ... RETURNING: one more try each, a lease, a task id `kb-<attempt>-<try>`. The
    rows are locked (FOR UPDATE) until the transaction ends; send them only after it commits.

    `claimable_after`: no pending or expired attempt has an id at or below it (the caller
    claimed every one up to there, and none expired since), so the search starts above it.
    Every attempt leaves `pending` with a new row version; where nothing vacuums, a search
    from the first id reads every version left behind, a cost that grows with the history.
    """
    claim = _CLAIM_ABOVE if claimable_after > 0 else _CLAIM_FROM_START
    rows = session.execute(claim, {"after": claimable_after, "below": _NO_ID_ABOVE,
                                   "limit": limit, "now": now, "lease": lease_expires_at}).all()
    return sorted((ClaimedAttempt(row.id, row.job_id, row.track_id, row.kind, row.queue,
                                  row.candidate_id, dict(row.payload or {}), str(row.task_id))
                   for row in rows), key=lambda attempt: attempt.id)


def _claim(state: Any) -> Any:
    """The claiming UPDATE ... RETURNING, its pending attempts found by `state`, built once."""
    oldest = (select(Attempt.id)
              .where(Attempt.id > bindparam("after"), Attempt.id < bindparam("below"),
                     state.in_(("pending", "expired")))
              .order_by(Attempt.id).limit(bindparam("limit")).with_for_update())
    task_id = literal("kb-") + cast(Attempt.id, String) + "-" + cast(Attempt.tries + 1, String)
    return (update(Attempt).where(Attempt.id.in_(oldest.scalar_subquery()))
            .values(tries=Attempt.tries + 1, state="dispatched", dispatched_at=bindparam("now"),
                    started_at=None, lease_expires_at=bindparam("lease"), task_id=task_id)
            .returning(Attempt.id, Attempt.job_id, Attempt.track_id, Attempt.kind, Attempt.queue,
                       Attempt.candidate_id, Attempt.payload, Attempt.task_id)
            .execution_options(synchronize_session=False))


# Above a claimed id the search reads the ids from there on (a window that does not grow); the
# state index would be read whole: it keeps an entry for every attempt ever pending. From the
# start (a new scheduler, tries expired) the state index is the smaller read.
# The id range is closed above by a bound no id reaches: where the table was never analyzed, an
# open `id > after` is guessed to keep a third of the rows, and the planner read the whole
# table (a sequential scan, 10.8 ms at 80,000 attempts, growing with the history); a closed
# range is guessed small, and the primary key is walked from `after`.
_NO_ID_ABOVE = 2**62
_CLAIM_ABOVE = _claim(func.coalesce(Attempt.state, ""))
_CLAIM_FROM_START = _claim(Attempt.state)


def pulls_in_flight(session: Session, track_id: int) -> int:
    """Pulls of the track whose current attempt is not finished."""
    query = select(func.count(Attempt.id)).where(
        Attempt.track_id == track_id, Attempt.decision_id.is_not(None),
        Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
    return int(session.execute(query).scalar() or 0)


def fail_open_attempts(session: Session, track_id: int, reason: str) -> None:
    """Close every open attempt of a track (cancellation): late results are then ignored."""
    session.execute(
        update(Attempt)
        .where(Attempt.track_id == track_id, Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
        .values(state="failed", reason=reason, finished_at=utcnow())
    )


def fail_open_pulls(session: Session, track_id: int, reason: str) -> None:
    """Close the open attempts of a track's pulls (not its baseline or verification)."""
    session.execute(
        update(Attempt)
        .where(Attempt.track_id == track_id, Attempt.decision_id.is_not(None),
               Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
        .values(state="failed", reason=reason, finished_at=utcnow())
    )


__all__ = ["ACTIVE_ATTEMPT_STATES", "ClaimedAttempt", "claim_pending", "fail_open_attempts", "fail_open_pulls", "new_attempt",
           "pulls_in_flight"]
