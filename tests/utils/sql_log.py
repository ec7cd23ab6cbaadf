"""The SQL statements an engine sends while a block runs (SQLAlchemy cursor events)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event


@contextmanager
def sent_statements(engine: Engine, starting: str = "") -> Iterator[list[str]]:
    """Every statement sent inside the block whose text starts with `starting`."""
    sent: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *rest: object) -> None:
        if statement.startswith(starting):
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)
