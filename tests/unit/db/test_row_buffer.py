"""Buffered rows: inserted one statement per table, before any ORM statement and at commit."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Event, utcnow
from kernelband.db.row_buffer import add_row, buffered_rows, write_rows
from kernelband.db.session import session_scope
from tests.utils.db_rows import new_job
from tests.utils.sql_log import sent_statements


def _job(factory: sessionmaker[Session]) -> int:
    with session_scope(factory) as session:
        return new_job(session, "buffer-team").id


def _event(job_id: int, seq: int) -> dict[str, object]:
    return {"job_id": job_id, "seq": seq, "kind": "probe", "payload": {"n": seq},
            "created_at": utcnow()}


def test_rows_go_out_in_one_insert_at_commit(db_factory: sessionmaker[Session]) -> None:
    job_id = _job(db_factory)
    with (sent_statements(db_factory.kw["bind"], "INSERT INTO events") as statements,
          session_scope(db_factory) as session):
        for seq in range(1, 6):
            add_row(session, Event, _event(job_id, seq))
        assert len(buffered_rows(session, Event)) == 5
        assert statements == []  # nothing sent before the transaction needs it
    assert len(statements) == 1
    with session_scope(db_factory) as session:
        payloads = session.scalars(select(Event.payload).where(Event.job_id == job_id)
                                   .order_by(Event.seq)).all()
    assert payloads == [{"n": seq} for seq in range(1, 6)]


def test_a_query_in_the_same_transaction_sees_buffered_rows(
        db_factory: sessionmaker[Session]) -> None:
    job_id = _job(db_factory)
    with session_scope(db_factory) as session:
        add_row(session, Event, _event(job_id, 1))
        add_row(session, Event, _event(job_id, 2))
        count = session.scalar(select(func.count(Event.id)).where(Event.job_id == job_id))
        assert count == 2
        assert buffered_rows(session, Event) == []  # written once, not again at commit
    with session_scope(db_factory) as session:
        assert session.scalar(select(func.count(Event.id))) == 2


def test_a_rollback_drops_the_buffer(db_factory: sessionmaker[Session]) -> None:
    job_id = _job(db_factory)
    session = db_factory()
    try:
        add_row(session, Event, _event(job_id, 1))
        session.rollback()
        assert buffered_rows(session, Event) == []
        write_rows(session)  # a new transaction: nothing of the old one is left to write
        session.commit()
    finally:
        session.close()
    with session_scope(db_factory) as session:
        assert session.scalar(select(func.count(Event.id))) == 0
