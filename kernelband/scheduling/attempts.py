"""Attempts: one try of one task (generate, compile, profile, verify) for a track.

An attempt is created pending, dispatched only after the transaction that created it
commits, and closed exactly once (done or failed); `expired` ones wait to be sent again.
A transaction of the scheduler's passes inserts its new attempts claimed instead
(`send_on_commit`, `insert_claimed`): dispatched with their first try, sent once it commits.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    String,
    Table,
    TextClause,
    bindparam,
    cast,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy import event as orm_events
from sqlalchemy.orm import Session

from kernelband.db.json_rows import QUOTE, insert_rows, records_param, rows_portable
from kernelband.db.models import ACTIVE_ATTEMPT_STATES, Attempt, Track, utcnow
from kernelband.db.row_buffer import add_row
from kernelband.scheduling.dispatch import queue_for

# ACTIVE_ATTEMPT_STATES: an attempt in one of these is open, its result may still be applied.
# Defined beside the schema, whose state index on Postgres holds only these rows; ingest,
# selection and the lifecycle import it from here.


def new_attempt(session: Session, track: Track, kind: str, candidate_id: int | None,
                decision_id: str | None = None, ref: dict[str, Any] | None = None) -> None:
    """A pending attempt; it is dispatched only after this transaction commits.

    A buffered row (`row_buffer`): inserted with the transaction's other new attempts; in a
    transaction that sends its attempts on commit (`send_on_commit`), held for
    `insert_claimed`."""
    row = {
        "job_id": track.job_id, "track_id": track.id, "kind": kind, "state": "pending",
        "decision_id": decision_id, "candidate_id": candidate_id,
        "queue": queue_for(kind, track.target), "task_id": None, "tries": 0,
        "payload": dict(ref or {}), "result": None, "reason": None, "lease_expires_at": None,
        "created_at": utcnow(), "dispatched_at": None, "started_at": None, "finished_at": None}
    held = session.info.get(_CREATED)
    if held is not None and held[0] is session.get_transaction():
        held[1].append(row)
        return
    note_claimable()
    add_row(session, Attempt, row)


# Attempts this process made claimable, pending or expired (rolled back ones too): a claim
# that found none need not run again until this moves or another process may have made some.
_CLAIMABLE = [0]


def note_claimable(count: int = 1) -> None:
    """Count attempts made pending or expired here (`claim_pending` sends them)."""
    _CLAIMABLE[0] += count


def claimable_noted() -> int:
    """How many attempts this process has made pending or expired so far (a claim runs
    while this moves; attempts inserted claimed do not count)."""
    return _CLAIMABLE[0]


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


# session.info: (transaction, rows) of the attempts it created, inserted by `insert_claimed`
_CREATED = "kb_created_attempts"
_ATTEMPTS = typing.cast(Table, Attempt.__table__)
_CLAIMED_FIELDS = ("id", "job_id", "track_id", "kind", "queue", "candidate_id", "payload",
                   "task_id")


def send_on_commit(session: Session) -> None:
    """The attempts the current transaction creates from now on are held for
    `insert_claimed`, which inserts them already claimed (dispatched, their first try and
    lease), so they go out once it commits instead of waiting, pending, for a later claim:
    one write per attempt less (every claim rewrote each row and its five index entries) and
    no claim query. Any still held when it commits are inserted pending, as usual."""
    transaction = session.get_transaction() or session.begin()
    session.info[_CREATED] = (transaction, [])
    if not orm_events.contains(session, "before_commit", _insert_pending):
        orm_events.listen(session, "before_commit", _insert_pending)


def insert_claimed(session: Session, now: datetime,
                   lease_expires_at: datetime) -> list[ClaimedAttempt]:
    """Insert the attempts held since `send_on_commit` as `claim_pending` would leave them
    (dispatched at `now`, one try, a lease, task id `kb-<attempt>-1`), in one statement; the
    caller sends them once the transaction commits. Attempts created after this call are
    buffered pending rows again."""
    held = session.info.pop(_CREATED, None)
    if held is None or held[0] is not session.get_transaction() or not held[1]:
        return []
    rows = [{**row, "state": "dispatched", "tries": 1, "dispatched_at": now,
             "lease_expires_at": lease_expires_at} for row in held[1]]
    connection = session.connection()
    if connection.dialect.name == "postgresql" and rows_portable(r.values() for r in rows):
        result = connection.execute(_insert_claimed_sql(tuple(rows[0])), records_param(rows))
        found: list[Mapping[Any, Any]] = list(result.mappings())
    else:  # one row at a time, its task id set after its id is known (SQLite: tests)
        found = []
        for row in rows:  # a None left out: SQL NULL by default, not a JSON null
            values = {key: value for key, value in row.items() if value is not None}
            new_id = connection.execute(insert(_ATTEMPTS).values(values)
                                        .returning(_ATTEMPTS.c.id)).scalar_one()
            connection.execute(update(_ATTEMPTS).where(_ATTEMPTS.c.id == new_id)
                               .values(task_id=f"kb-{new_id}-1"))
            found.append({**row, "id": new_id, "task_id": f"kb-{new_id}-1"})
    return sorted((ClaimedAttempt(row["id"], row["job_id"], row["track_id"], row["kind"],
                                  row["queue"], row["candidate_id"], dict(row["payload"] or {}),
                                  str(row["task_id"])) for row in found),
                  key=lambda attempt: attempt.id)


@lru_cache(maxsize=8)
def _insert_claimed_sql(columns: tuple[str, ...]) -> TextClause:
    """INSERT of claimed attempts from a JSON recordset: each row's id is drawn first
    (`nextval`), so its task id can name it in the same statement."""
    names = [name for name in columns if name not in ("id", "task_id")]
    listed = ", ".join(QUOTE(name) for name in names)
    returned = ", ".join(QUOTE(name) for name in _CLAIMED_FIELDS)
    return text(
        f"INSERT INTO attempts (id, task_id, {listed}) "
        f"SELECT given.new_id, 'kb-' || given.new_id || '-' || given.tries, {listed} "
        f"FROM (SELECT nextval((SELECT pg_get_serial_sequence('attempts', 'id'))) AS new_id, "
        f"{listed} FROM json_populate_recordset(NULL::attempts, :rows)) AS given "
        f"RETURNING {returned}")


def _insert_pending(session: Session) -> None:
    """before_commit: attempts still held for `insert_claimed` go in pending, as usual."""
    held = session.info.pop(_CREATED, None)
    if held is not None and held[0] is session.get_transaction() and held[1]:
        note_claimable(len(held[1]))
        insert_rows(session.connection(), _ATTEMPTS, held[1])


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


__all__ = ["ACTIVE_ATTEMPT_STATES", "ClaimedAttempt", "claim_pending", "claimable_noted",
           "fail_open_attempts", "fail_open_pulls", "insert_claimed", "new_attempt",
           "note_claimable", "pulls_in_flight", "send_on_commit"]
