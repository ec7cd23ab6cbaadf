"""Locked attempts as plain values: a batch of results reads and closes its attempts without
ORM objects.

A batch applies hundreds of results a pass, and each attempt it locked was an ORM object that
the session's flushes and commit then tracked, compared and expired, although the batch only
reads a few of its columns and closes it. `lock_attempt_values` reads the attempts' columns as
plain values, locked as before (FOR UPDATE OF attempts, with the track, job and candidate rows
the results need as ORM objects), and each attempt becomes an `Attempt` value that no session
holds (`row_buffer.row_value`), so code that reads or changes an attempt works alike on both.
What the transaction changes on these values is written by this module, one UPDATE per set of
changed columns (`row_updates.update_rows`, a JSON recordset on Postgres): before any ORM
statement of the transaction (so its reads see the change, as autoflush would) and before it
commits. A rollback drops them with the transaction. Building a value costs about what loading
the ORM object did; what is saved is that bookkeeping (measured in bench/RESULTS.md).

The row lock taken by the read is what keeps a result applied at most once; these values are
only ever changed while this transaction holds it. Another read of the same attempt through
the ORM in the transaction (`session.get(Attempt, id)`) gets its own object, loaded after the
changes were written, for reading.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, Select, Table, bindparam, null, select, update
from sqlalchemy import event as orm_events
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.orm.attributes import instance_state

from kernelband.db.models import Attempt, Candidate, Job, Track
from kernelband.db.row_buffer import row_value
from kernelband.scheduling.events import hold_event_counters
from kernelband.scheduling.ingest import LockedAttempt
from kernelband.scheduling.row_updates import changed_columns, update_rows
from kernelband.scheduling.state import WITHOUT_STORED_STATE

_HELD = "kb_attempt_values"  # session.info: (transaction, the values it locked)
_ATTEMPTS = typing.cast(Table, Attempt.__table__)
_NAMES = tuple(column.key for column in _ATTEMPTS.c)
_JSON_NAMES = frozenset(column.key for column in _ATTEMPTS.c if isinstance(column.type, JSON))


def _locking_read() -> Select[Any]:
    """The attempts of `:ids` (their columns), locked, with their track, job and candidate;
    built once."""
    return (select(*_ATTEMPTS.c, Track, Job, Candidate)
            .join(Track, Track.id == _ATTEMPTS.c.track_id)
            .join(Job, Job.id == _ATTEMPTS.c.job_id)
            .outerjoin(Candidate, Candidate.id == _ATTEMPTS.c.candidate_id)
            .where(_ATTEMPTS.c.id.in_(bindparam("ids", expanding=True)))
            .order_by(_ATTEMPTS.c.id).with_for_update(of=_ATTEMPTS)
            .options(WITHOUT_STORED_STATE))


_LOCK_MANY = _locking_read()


def lock_attempt_values(session: Session, attempt_ids: set[int]) -> dict[int, LockedAttempt]:
    """The attempts of these ids, locked in id order, as values whose changes this transaction
    writes (module docstring), each with its track, job and candidate; holds the jobs' event
    counters (`events.hold_event_counters`). Keep the returned dict while applying: it keeps the track, job and candidate rows
    in the session's identity map."""
    if not attempt_ids:
        return {}
    rows = session.execute(_LOCK_MANY, {"ids": sorted(attempt_ids)}).all()
    width = len(_NAMES)
    locked: dict[int, LockedAttempt] = {}
    values: list[Attempt] = []
    for row in rows:
        attempt = row_value(Attempt, dict(zip(_NAMES, row[:width], strict=True)))
        track, job, candidate = row[width:]
        values.append(attempt)
        locked[attempt.id] = (attempt, track, job, candidate)
    hold_event_counters(session, {attempt.job_id for attempt in values})
    _hold(session, values)
    return locked


def _hold(session: Session, values: Sequence[Attempt]) -> None:
    transaction = session.get_transaction() or session.begin()
    held: tuple[Any, list[Attempt]] | None = session.info.get(_HELD)
    if held is None or held[0] is not transaction:
        held = session.info[_HELD] = (transaction, [])
        for name, hook in (("do_orm_execute", _before_orm_statement),
                           ("before_commit", write_attempt_changes)):
            if not orm_events.contains(session, name, hook):
                orm_events.listen(session, name, hook)
    held[1].extend(values)


def write_attempt_changes(session: Session) -> int:
    """Write what the current transaction changed on its attempt values (one UPDATE per set of
    changed columns); returns how many rows were written."""
    held = session.info.get(_HELD)
    if held is None or held[0] is not session.get_transaction():
        return 0
    groups: dict[tuple[str, ...], list[Attempt]] = {}
    for attempt in held[1]:
        keys = changed_columns(attempt)
        if keys:
            groups.setdefault(keys, []).append(attempt)
    postgres = session.get_bind().dialect.name == "postgresql"
    for keys, attempts in groups.items():
        if postgres:
            update_rows(session, Attempt, keys, attempts)
        else:
            _write_one_by_one(session, keys, attempts)
        for attempt in attempts:
            # What they hold is now written. No session tracks them, so forgetting the values
            # they had before is all `set_committed_value` would do (at a twentieth of its cost).
            instance_state(attempt).committed_state.clear()
    return sum(len(attempts) for attempts in groups.values())


def _write_one_by_one(session: Session, keys: tuple[str, ...], attempts: Sequence[Attempt]) -> None:
    """One UPDATE per attempt (SQLite: the recordset UPDATE is Postgres's); a None in a JSON
    column is SQL NULL, as the recordset UPDATE writes it."""
    connection = session.connection()
    for attempt in attempts:
        values = {key: getattr(attempt, key) for key in keys}
        values.update({key: null() for key in keys if key in _JSON_NAMES and values[key] is None})
        connection.execute(update(_ATTEMPTS).where(_ATTEMPTS.c.id == attempt.id).values(values))


def _before_orm_statement(state: ORMExecuteState) -> None:
    if not state.execution_options.get("kb_buffer_unread"):  # reads no attempt (row_buffer)
        write_attempt_changes(state.session)


__all__ = ["LockedAttempt", "lock_attempt_values", "write_attempt_changes"]
