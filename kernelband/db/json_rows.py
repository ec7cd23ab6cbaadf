"""Many rows in one statement with one parameter: a JSON array that Postgres reads as records.

An executemany INSERT of N rows makes SQLAlchemy render N x columns bound parameters and run
each value through its type's bind processor, in Python, every time; that cost more than the
database's own work on the scheduler's hot tables. Here the rows go out as one JSON text
(encoded in C by `json_codec`) and Postgres reads it with `json_populate_recordset(NULL::table,
...)`, which gives every field its column's own type (a timestamptz from an ISO text, a json
column's value as it stands). The statement text depends only on the table and the column
names, so SQLAlchemy compiles it once.

Used where rows are plain values (`portable`): a NaN or infinite float would become JSON null,
so such rows, and every database but Postgres, take the ordinary executemany instead. Either
way a None in a JSON column is stored as SQL NULL, as the ORM stores an unset JSON attribute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, Connection, Table, TextClause, insert, null, text
from sqlalchemy.dialects import postgresql

from kernelband.db import json_codec

QUOTE = postgresql.dialect().identifier_preparer.quote  # for names that come from the models


def portable(values: Iterable[Any]) -> bool:
    """No value is a NaN or infinite float (JSON has no such number).

    Their sum is finite only if every one is (a sum of finite floats too large for a float
    counts as not portable: the slower path, never a wrong one); one sum in C costs less than
    a check per value."""
    return math.isfinite(sum([v for v in values if isinstance(v, float)]))


def rows_portable(rows: Iterable[Iterable[Any]]) -> bool:
    """`portable` over every value of every row (rows of values), in one pass."""
    return math.isfinite(sum([v for row in rows for v in row if isinstance(v, float)]))


def records_param(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The `:rows` parameter of a recordset statement."""
    return {"rows": json_codec.dumps(list(rows))}


def insert_rows(connection: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """INSERT `rows` (dicts with the same keys) into `table`: one JSON parameter on Postgres."""
    if not rows:
        return
    if connection.dialect.name == "postgresql" and rows_portable(row.values() for row in rows):
        connection.execute(_insert(table.name, tuple(rows[0])), records_param(rows))
        return
    connection.execute(insert(table), _sql_nulls(table, rows))


def insert_returning_ids(connection: Connection, table: Table,
                         rows: Sequence[dict[str, Any]]) -> list[int]:
    """INSERT `rows` (dicts with the same keys) into `table`, returning each row's new `id`, in
    the order of `rows`: one statement, one JSON parameter on Postgres.

    The rows go in in their order (ORDER BY their position in the array), so their serial ids
    are drawn in that order and ascend with it; the returned ids are sorted for that reason
    (the order RETURNING reports rows in is not promised). This is how SQLAlchemy itself orders
    an INSERT..SELECT's returned keys on Postgres (`sort_by_parameter_order`)."""
    if not rows:
        return []
    if connection.dialect.name == "postgresql" and rows_portable(row.values() for row in rows):
        result = connection.execute(_insert_ids(table.name, tuple(rows[0])), records_param(rows))
        return sorted(result.scalars())
    statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
    return list(connection.execute(statement, _sql_nulls(table, rows)).scalars())


def _sql_nulls(table: Table, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with None in a JSON column as SQL NULL (not the JSON value null)."""
    json_columns = [c.key for c in table.c if isinstance(c.type, JSON) and c.key in rows[0]]
    if not json_columns:
        return list(rows)
    return [{**row, **{key: null() for key in json_columns if row[key] is None}}
            for row in rows]


@lru_cache(maxsize=32)
def _insert_ids(table: str, columns: tuple[str, ...]) -> TextClause:
    names = ", ".join(QUOTE(name) for name in columns)
    return text(f"INSERT INTO {QUOTE(table)} ({names}) SELECT {names} "
                f"FROM json_populate_recordset(NULL::{QUOTE(table)}, :rows) WITH ORDINALITY "
                f"AS given ORDER BY given.ordinality RETURNING {QUOTE(table)}.id")


@lru_cache(maxsize=128)
def _insert(table: str, columns: tuple[str, ...]) -> TextClause:
    return text(recordset_insert_sql(table, columns))


def recordset_insert_sql(table: str, columns: Sequence[str]) -> str:
    """`INSERT INTO table (columns) SELECT columns FROM json_populate_recordset(..., :rows)`
    (Postgres; an upsert appends its ON CONFLICT clause)."""
    names = ", ".join(QUOTE(name) for name in columns)
    return (f"INSERT INTO {QUOTE(table)} ({names}) SELECT {names} "
            f"FROM json_populate_recordset(NULL::{QUOTE(table)}, :rows)")


__all__ = ["QUOTE", "insert_returning_ids", "insert_rows", "portable", "records_param",
           "recordset_insert_sql", "rows_portable"]
