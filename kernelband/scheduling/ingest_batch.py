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

from sqlalchemy.orm import Session

from kernelband.db.models import Attempt
from kernelband.loop.dedupe import prefetch_same_source
from kernelband.loop.skills import prefetch_for_skills
from kernelband.scheduling.attempt_values import lock_attempt_values
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES, note_claimable
from kernelband.scheduling.children import Wanted, insert_children
from kernelband.scheduling.dispatch import TaskResult
from kernelband.scheduling.ingest import LockedAttempt, apply_result
from kernelband.scheduling.leases import extend_locked_lease, lease_deadline
from kernelband.scheduling.results import GenerateResult, LeaseBeat, TaskResultValue, read_result

BATCH_SIZE = 500  # results per transaction: bounds how long attempt locks are held


def apply_batch(session: Session, items: Sequence[TaskResult], now: datetime, lease_s: float,
                max_tries: int) -> list[bool]:
    """Each item in order: heartbeats extend leases, results apply at most once."""
    locked = lock_attempts(session, {item.attempt_id for item in items})
    read = [read_item(locked, item) for item in items]  # each result read once, by its kind
    add_children(session, locked, read)
    prefetch_for_skills(session, [
        (job, track, candidate) for attempt, track, job, candidate in locked.values()
        if attempt.kind == "profile" and attempt.decision_id is not None and candidate])
    outcomes = []
    for entry in read:
        if entry is None:
            outcomes.append(False)
        elif isinstance(entry[1], LeaseBeat):  # the attempt stays open for its real result
            extend_locked_lease(entry[0], lease_deadline(now, lease_s), entry[1].task_id, now)
            outcomes.append(False)
        else:
            outcomes.append(apply_locked(session, entry[0], entry[1], max_tries,
                                         locked[entry[0].id]))
    return outcomes


def read_item(locked: dict[int, LockedAttempt],
              item: TaskResult) -> tuple[Attempt, TaskResultValue | LeaseBeat] | None:
    """The item's attempt (None: unknown) and its lease beat or typed result."""
    if item.attempt_id not in locked:
        return None
    attempt = locked[item.attempt_id][0]
    return attempt, LeaseBeat.read(item.result) or read_result(attempt.kind, item.result)


def add_children(session: Session, locked: dict[int, LockedAttempt],
                 read: Sequence[tuple[Attempt, TaskResultValue | LeaseBeat] | None]) -> None:
    """The children of the batch's successful generate results, inserted in one statement.

    Only an attempt's first result is looked at: it is the one that will be applied."""
    seen: set[int] = set()
    wanted: list[Wanted] = []
    for entry in read:
        if entry is None or isinstance(entry[1], LeaseBeat) or entry[0].id in seen:
            continue
        attempt, result = entry
        seen.add(attempt.id)
        _, track, _, parent = locked[attempt.id]
        if (isinstance(result, GenerateResult) and attempt.state in ACTIVE_ATTEMPT_STATES
                and result.ok and result.editable):
            wanted.append((track, attempt, result.editable, parent))
    prefetch_same_source(session, insert_children(session, wanted))


def apply_locked(session: Session, attempt: Attempt, result: TaskResultValue,
                 max_tries: int, locked: LockedAttempt | None = None) -> bool:
    """`ingest_result` for an attempt this transaction holds locked (`locked`: its rows as
    read with it; None: looked up in the session)."""
    if attempt.state not in ACTIVE_ATTEMPT_STATES:
        return False  # already applied, or closed by cancellation / expiry
    if result.reason.startswith("task_error") and attempt.tries < max_tries:
        attempt.state = "expired"
        note_claimable()  # sent again by the next claim
        attempt.reason = f"{result.reason} on try {attempt.tries}; retrying"
        return True
    apply_result(session, attempt, result, locked)
    return True


def lock_attempts(session: Session, attempt_ids: set[int]) -> dict[int, LockedAttempt]:
    """`lock_attempt` for many attempts in one read, locked in id order; the attempts come as
    values that no session holds, their changes written by this transaction
    (`attempt_values`).

    Keep the returned dict while applying: it keeps the rows in the session's identity map.
    """
    return lock_attempt_values(session, attempt_ids)


__all__ = ["BATCH_SIZE", "apply_batch", "apply_locked", "lock_attempts"]
