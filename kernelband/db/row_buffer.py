"""Append-only rows inserted without ORM objects: one INSERT per table.

A scheduler transaction adds many rows that nothing in it reads back as objects: events, LLM
usage, measurements, new attempts, new frontier entries. As ORM objects each cost the unit of
work about 140 microseconds on Postgres (constructed, tracked, sorted, flushed, expired); a Core
executemany row about 50, a row of a JSON recordset parameter (`json_rows`) about 25. `add_row`
keeps the row as a plain dict. The buffer is written, one INSERT per table in the order the tables were
first used:

- before the session runs any ORM statement (a query, `session.get` of an unloaded row, an
  ORM-enabled insert or update), so every query of the transaction sees the rows, except a
  read run with `BUFFER_UNREAD`, which no buffered row can change;
- before the transaction commits.

A rollback drops the buffer with its transaction. Rows get no primary key back, so a buffered
row cannot be referenced by another row of the same transaction; every foreign key it holds
must name a row that is already flushed (the ids it is built from prove that). Reads through
`session.connection()` directly, bypassing the ORM, do not write the buffer first.
"""

from __future__ import annotations

import typing
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy import event as orm_events
from sqlalchemy.orm import ORMExecuteState, Session, make_transient_to_detached

from kernelband.db.json_rows import insert_rows
from kernelband.db.models import Base

_BUFFER = "kb_row_buffer"


def add_row(session: Session, model: type[Base], values: dict[str, Any]) -> None:
    """Insert `values` into `model`'s table with the transaction's next buffered write.

    Every row of one table must carry the same columns (one executemany statement each); leave
    none to its column default."""
    transaction = session.get_transaction() or session.begin()  # keyed by a real transaction
    held = session.info.get(_BUFFER)
    if held is None or held[0] is not transaction:
        held = session.info[_BUFFER] = (transaction, {})
        _listen(session)
    tables: dict[Table, list[dict[str, Any]]] = held[1]
    tables.setdefault(typing.cast(Table, model.__table__), []).append(values)


M = TypeVar("M", bound=Base)


def row_value(model: type[M], values: dict[str, Any]) -> M:
    """A transient `model` instance that carries `values`, for reading only (a buffered row has
    no object of its own; callers that want one, e.g. to read a measurement's time, get this).

    Built without the constructor's attribute events: they cost about ten times as much as
    the copy, and nothing tracks a value object's changes. Never add it to a session."""
    instance: M = model.__mapper__.class_manager.new_instance()
    instance.__dict__.update(values)
    return instance


def loaded_row(session: Session, model: type[M], values: dict[str, Any]) -> M:
    """The instance of a row this transaction inserted itself (`values`: every column, its id
    too), put in the session as if loaded: persistent, with nothing to flush.

    For rows inserted with `json_rows.insert_returning_ids` that the transaction goes on to
    use as objects (and may change: changes are flushed as usual). A column left out of
    `values` would be loaded on first access."""
    instance = row_value(model, values)
    make_transient_to_detached(instance)
    session.add(instance)
    return instance


def buffered_rows(session: Session, model: type[Base]) -> list[dict[str, Any]]:
    """The rows of `model` this transaction holds unwritten (a copy; for tests and checks)."""
    held = session.info.get(_BUFFER)
    if held is None or held[0] is not session.get_transaction():
        return []
    return list(held[1].get(model.__table__, []))


def write_rows(session: Session) -> None:
    """Insert every buffered row of the current transaction now."""
    held = session.info.pop(_BUFFER, None)
    if held is None or held[0] is not session.get_transaction() or not held[1]:
        return
    connection = session.connection()  # Core: runs no ORM hook, so this cannot recurse
    for table, rows in held[1].items():
        insert_rows(connection, table, rows)


# Execution options of an ORM read that no buffered row can change (it reads other tables, or
# only what the caller reconciles itself): the buffer stays unwritten until the next statement
# that needs it, so a transaction that reads in several chunks inserts its rows once.
BUFFER_UNREAD = {"kb_buffer_unread": True}


def _before_orm_statement(state: ORMExecuteState) -> None:
    if not state.execution_options.get("kb_buffer_unread"):
        write_rows(state.session)


def _listen(session: Session) -> None:
    """Hook the buffer's writes into the session once."""
    for name, hook in (("do_orm_execute", _before_orm_statement), ("before_commit", write_rows)):
        if not orm_events.contains(session, name, hook):
            orm_events.listen(session, name, hook)


__all__ = ["BUFFER_UNREAD", "add_row", "buffered_rows", "loaded_row", "row_value", "write_rows"]
