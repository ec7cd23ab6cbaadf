"""Tests read the database by the row ids behind the public ids the API answers with."""

from __future__ import annotations

from sqlalchemy import Connection
from sqlalchemy.orm import Session, sessionmaker

from kernelband.public_ids import for_session


def row_id(db: Session | sessionmaker[Session] | Connection, public_id: str) -> int:
    """The row id behind `public_id` (job_..., cand_...) in the database `db` reads."""
    kind = public_id.partition("_")[0]
    if isinstance(db, Connection):
        db = Session(bind=db)
    if isinstance(db, Session):
        value = for_session(db).decode(kind, public_id)
    else:
        with db() as session:
            value = for_session(session).decode(kind, public_id)
    assert value is not None, f"{public_id} is not an id of this database"
    return value


def public_id(db: Session | sessionmaker[Session], kind: str, row: int) -> str:
    """The public id of row `row` of `kind` in the database `db` reads."""
    if isinstance(db, Session):
        return for_session(db).encode(kind, row)
    with db() as session:
        return for_session(session).encode(kind, row)
