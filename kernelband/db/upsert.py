"""Insert-or-update of many rows in one statement, on Postgres and SQLite alike.

The scheduler rewrites small derived tables (arm statistics, clusters) after every reward. A
read-compare-write per row costs a round trip each; one `INSERT ... ON CONFLICT DO UPDATE`
statement does the same, and its WHERE clause leaves rows whose values did not change
untouched, so their `updated_at` keeps meaning "last changed".
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, ColumnElement, Table, Text, cast, false, or_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from kernelband.db.models import Base


def upsert_rows(session: Session, model: type[Base], rows: Sequence[dict[str, Any]],
                keys: Sequence[str], compared: Sequence[str], touched: str | None = None,
                carried: Sequence[str] = ()) -> None:
    """Insert `rows` into `model`'s table; where `keys` exist, update `compared` columns that differ.

    `touched` names a column (a timestamp) and `carried` columns whose own changes do not count
    (a value derived at the time of the change); both are written only together with a real
    change. Every row must carry every key, compared, carried and touched column. The unique constraint on `keys` must
    exist. Nothing is sent for an empty list.
    """
    if not rows:
        return
    table = typing.cast(Table, model.__table__)
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        statement: Any = postgresql.insert(table)
    elif dialect == "sqlite":
        statement = sqlite.insert(table)
    else:
        raise NotImplementedError(f"upsert_rows supports postgresql and sqlite, not {dialect}")
    differs = or_(false(), *(_distinct(table, statement.excluded, name) for name in compared))
    updated = [*compared, *carried, *([touched] if touched else [])]
    statement = statement.on_conflict_do_update(
        index_elements=list(keys), set_={name: statement.excluded[name] for name in updated},
        where=differs)
    session.execute(statement, list(rows))


def _distinct(table: Table, excluded: Any, name: str) -> ColumnElement[bool]:
    """The stored and the offered value differ (NULL-safe; JSON compared as text)."""
    stored, offered = table.c[name], excluded[name]
    if isinstance(stored.type, JSON):  # Postgres `json` has no equality operator
        return cast(stored, Text).is_distinct_from(cast(offered, Text))
    return stored.is_distinct_from(offered)


__all__ = ["upsert_rows"]
