"""Insert-or-update of many rows in one statement, on Postgres and SQLite alike.

The scheduler rewrites small derived tables (arm statistics, clusters) after every reward. A
read-compare-write per row costs a round trip each; one `INSERT ... ON CONFLICT DO UPDATE`
statement does the same, and its WHERE clause leaves rows whose values did not change
untouched, so their `updated_at` keeps meaning "last changed". On Postgres the rows go out as
one JSON parameter (`json_rows`), one INSERT for the batch; elsewhere, and for rows holding a
NaN or infinite float, as an executemany of the statement SQLAlchemy builds (built once).
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, ColumnElement, Table, Text, TextClause, cast, false, or_, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from kernelband.db.json_rows import QUOTE, records_param, recordset_insert_sql, rows_portable
from kernelband.db.models import Base


def upsert_rows(session: Session, model: type[Base], rows: Sequence[dict[str, Any]],
                keys: Sequence[str], compared: Sequence[str], touched: str | None = None,
                carried: Sequence[str] = ()) -> None:
    """Insert `rows` into `model`'s table; where `keys` exist, update `compared` columns that differ.

    `touched` names a column (a timestamp) and `carried` columns whose own changes do not count
    (a value derived at the time of the change); both are written only together with a real
    change. Every row must carry every key, compared, carried and touched column, and rows of
    one key count once (the last). The unique constraint on `keys` must exist. Nothing is sent
    for an empty list.
    """
    if not rows:
        return
    if len(rows) > 1:  # one statement may change a row once: the last row of a key wins
        rows = list({tuple(row[key] for key in keys): row for row in rows}.values())
    dialect = session.get_bind().dialect.name
    columns = (tuple(keys), tuple(compared), touched, tuple(carried))
    if dialect == "postgresql" and rows_portable(row.values() for row in rows):
        statement = _recordset_upsert(model, tuple(rows[0]), *columns)
        session.execute(statement, records_param(rows))
        return
    session.execute(_upsert(model, dialect, *columns), list(rows))


@lru_cache(maxsize=64)
def _recordset_upsert(model: type[Base], names: tuple[str, ...], keys: tuple[str, ...],
                      compared: tuple[str, ...], touched: str | None,
                      carried: tuple[str, ...]) -> TextClause:
    """The Postgres statement with every row in one JSON parameter (`json_rows`): one
    statement for the whole batch, where an executemany ran one INSERT per row."""
    table = typing.cast(Table, model.__table__)
    quote, name = QUOTE, QUOTE(table.name)

    def stored(column: str, side: str) -> str:  # `json` has no equality: compare as text
        value = f"{side}.{quote(column)}"
        return f"{value}::text" if isinstance(table.c[column].type, JSON) else value

    differs = " OR ".join(f"{stored(c, name)} IS DISTINCT FROM {stored(c, 'excluded')}"
                          for c in compared) or "false"
    updated = ", ".join(f"{quote(c)} = excluded.{quote(c)}"
                        for c in (*compared, *carried, *([touched] if touched else [])))
    return text(f"{recordset_insert_sql(table.name, names)} "
                f"ON CONFLICT ({', '.join(quote(key) for key in keys)}) "
                f"DO UPDATE SET {updated} WHERE {differs}")


@lru_cache(maxsize=64)
def _upsert(model: type[Base], dialect: str, keys: tuple[str, ...], compared: tuple[str, ...],
            touched: str | None, carried: tuple[str, ...]) -> Any:
    """The statement for one table and set of columns, built once: building it (the conflict
    target, the `excluded` columns, the WHERE) took longer than sending a view's rows."""
    table = typing.cast(Table, model.__table__)
    if dialect == "postgresql":
        statement: Any = postgresql.insert(table)
    elif dialect == "sqlite":
        statement = sqlite.insert(table)
    else:
        raise NotImplementedError(f"upsert_rows supports postgresql and sqlite, not {dialect}")
    differs = or_(false(), *(_distinct(table, statement.excluded, name) for name in compared))
    updated = [*compared, *carried, *([touched] if touched else [])]
    return statement.on_conflict_do_update(
        index_elements=list(keys), set_={name: statement.excluded[name] for name in updated},
        where=differs)


def _distinct(table: Table, excluded: Any, name: str) -> ColumnElement[bool]:
    """The stored and the offered value differ (NULL-safe; JSON compared as text)."""
    stored, offered = table.c[name], excluded[name]
    if isinstance(stored.type, JSON):  # Postgres `json` has no equality operator
        return cast(stored, Text).is_distinct_from(cast(offered, Text))
    return stored.is_distinct_from(offered)


__all__ = ["upsert_rows"]
