"""Changed rows of a flush written one statement per table and column set (Postgres).

The ORM writes every changed row with an UPDATE of its own (a versioned row always; others in
an executemany that still renders and sends each row), so a pass that touched 100 tracks and
closed 200 attempts sent hundreds of row updates. `batch_row_updates` makes a session write
the changed tracks, attempts and candidates of each flush together, before the ORM's own
flush: per table and set of changed columns, one

    UPDATE t SET ... FROM json_populate_recordset(NULL::t, :rows) AS changed
    WHERE t.id = changed.id AND t.id = ANY(:ids) [AND t.version = changed.version]
    RETURNING t.id

with the rows as one JSON parameter (`json_rows`; a VALUES list for rows holding a NaN or
infinite float). A track row carries an optimistic version counter (`Track.version`): it is
checked and bumped as the ORM would, and a row whose version did not match raises
`StaleDataError`, as the ORM would, which rolls the transaction back. The written values are
then marked committed on the objects, so the ORM's flush has nothing left to write for them.
A table with one changed row of a column set is left to the ORM (one statement either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Integer,
    Table,
    TextClause,
    Update,
    cast,
    column,
    event,
    inspect,
    text,
    update,
    values,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, UOWTransaction
from sqlalchemy.orm.attributes import instance_state, set_committed_value
from sqlalchemy.orm.exc import StaleDataError

from kernelband.db.json_rows import records_param, rows_portable
from kernelband.db.models import Attempt, Base, Candidate, Track

BATCHED: tuple[type[Base], ...] = (Track, Attempt, Candidate)
_COLUMNS = {model: frozenset(attr.key for attr in inspect(model).column_attrs
                             if attr.key not in ("id", "version")) for model in BATCHED}


def batch_row_updates(session: Session) -> None:
    """Write this session's changed rows one statement per flush and column set (Postgres
    only)."""
    if session.get_bind().dialect.name != "postgresql":
        return  # elsewhere the ORM's row-by-row UPDATE stays (SQLite is local anyway)
    if not event.contains(session, "before_flush", _write_changed_rows):
        event.listen(session, "before_flush", _write_changed_rows)


def _write_changed_rows(session: Session, _context: UOWTransaction, _instances: Any) -> None:
    """before_flush: the changed rows, grouped by table and by which columns changed."""
    groups: dict[tuple[type[Base], tuple[str, ...]], list[Any]] = {}
    for obj in session.dirty:
        model = type(obj)
        if model in _COLUMNS and instance_state(obj).has_identity:
            keys = changed_columns(obj)
            if keys:
                groups.setdefault((model, keys), []).append(obj)
    for (model, keys), objs in groups.items():
        if len(objs) >= 2:
            write_rows(session, model, keys, objs)


def changed_columns(obj: Base) -> tuple[str, ...]:
    """Names of the row's columns set since they were loaded or written (sorted).

    A column set to the value it had is written too (the ORM would compare and skip it; the
    row is written either way when another column changed, and comparing every set column's
    history cost more than the write)."""
    names = _COLUMNS[type(obj)]
    # instance_state: what inspect() returns for an instance, without its registry lookup
    return tuple(sorted(key for key in instance_state(obj).committed_state if key in names))


def write_rows(session: Session, model: type[Base], keys: tuple[str, ...],
               objs: Sequence[Any]) -> None:
    """One UPDATE of `keys` for every row (versioned for tracks); each row's values then count
    as committed, a track's version bumped."""
    update_rows(session, model, keys, objs)
    versioned = model is Track
    for obj in objs:
        for key in keys:
            set_committed_value(obj, key, getattr(obj, key))
        if versioned:
            set_committed_value(obj, "version", obj.version + 1)


def update_rows(session: Session, model: type[Base], keys: tuple[str, ...],
                objs: Sequence[Any]) -> None:
    """The UPDATE of `write_rows` alone (the objects' values are left as they are, changes and
    all); raises `StaleDataError` when a row was not written."""
    table: Table = model.__table__  # type: ignore[assignment]
    versioned = model is Track
    head = ("id", "version") if versioned else ("id",)
    rows = [(obj.id, *((obj.version,) if versioned else ()), *(getattr(obj, k) for k in keys))
            for obj in objs]
    if rows_portable(rows):
        records = [dict(zip((*head, *keys), row, strict=True)) for row in rows]
        statement: Any = _recordset_update(table.name, keys, versioned)
        ids = {"ids": [obj.id for obj in objs]}
        result = session.connection().execute(statement, records_param(records) | ids)
    else:
        result = session.connection().execute(_values_update(table, keys, rows, versioned))
    written = set(result.scalars())
    missing = sorted({obj.id for obj in objs} - written)
    if missing:
        raise StaleDataError(f"{table.name} {missing} were changed by another writer (version "
                             "mismatch); this transaction is rolled back")


@lru_cache(maxsize=128)
def _recordset_update(table: str, keys: tuple[str, ...], versioned: bool) -> TextClause:
    """The UPDATE for one table and set of changed columns, its rows one JSON array parameter.

    Its text depends on the names only, so it is compiled once; a VALUES list of N rows is
    compiled again for every flush, which took longer than the UPDATE itself. Postgres reads
    each record into the table's row type (`json_populate_recordset`), so every column keeps
    its own type; a JSON column's value is taken as it stands.

    The rows' ids are also given as an array (`:ids`): the planner cannot see how many records
    the JSON holds (it assumes 100), so on a table it takes for small (never analyzed, as where
    nothing vacuums) it hash-joined them with a scan of the whole table, dead row versions
    included, to write 2 of 100 tracks or 4 of 2,000 attempts; `id = ANY(:ids)` is a condition
    on the primary key's index, which reads the rows written and no other."""
    quote = postgresql.dialect().identifier_preparer.quote  # names come from the models
    name = quote(table)
    assignments = ", ".join(f"{quote(key)} = changed.{quote(key)}" for key in keys)
    bump = f", version = {name}.version + 1" if versioned else ""
    check = f" AND {name}.version = changed.version" if versioned else ""
    return text(f"UPDATE {name} SET {assignments}{bump} "
                f"FROM json_populate_recordset(NULL::{name}, :rows) AS changed "
                f"WHERE {name}.id = changed.id AND {name}.id = ANY(:ids){check} "
                f"RETURNING {name}.id")


def _values_update(table: Table, keys: tuple[str, ...], rows: list[tuple[Any, ...]],
                   versioned: bool) -> Update:
    """The same UPDATE with the rows in a VALUES list (any value, compiled per call)."""
    head = [column("id", Integer), *([column("version", Integer)] if versioned else [])]
    changed = values(*head, *(column(key, table.c[key].type) for key in keys),
                     name="changed").data(rows)
    assignments: dict[Any, Any] = {table.c[key]: cast(changed.c[key], table.c[key].type)
                                   for key in keys}
    condition = table.c.id == changed.c.id
    if versioned:
        assignments[table.c.version] = table.c.version + 1
        condition = condition & (table.c.version == changed.c.version)
    return update(table).where(condition).values(assignments).returning(table.c.id)


__all__ = ["BATCHED", "batch_row_updates", "changed_columns", "update_rows", "write_rows"]
