"""Buffered rows: inserted one statement per table, before any ORM statement and at commit."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.attributes import instance_state

from kernelband.db.models import Event, Job, utcnow
from kernelband.db.row_buffer import add_row, buffered_rows, loaded_row, row_value, write_rows
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


def test_a_row_value_carries_its_values_outside_any_session(
        db_factory: sessionmaker[Session]) -> None:
    values = _event(7, 3)
    row = row_value(Event, values)
    assert (row.job_id, row.seq, row.kind, row.payload) == (7, 3, "probe", {"n": 3})
    assert row.id is None and instance_state(row).transient


def test_a_loaded_row_is_persistent_and_its_changes_are_flushed(
        db_factory: sessionmaker[Session]) -> None:
    job_id = _job(db_factory)
    with session_scope(db_factory) as session:
        columns = dict(session.execute(select(Job.__table__).where(Job.id == job_id))
                       .mappings().one())
    with (sent_statements(db_factory.kw["bind"]) as sent,
          session_scope(db_factory) as session):
        job = loaded_row(session, Job, columns)
        assert session.get_one(Job, job_id) is job and not session.dirty and not session.new
        assert job.policy == columns["policy"] and sent == []  # no column read back
        job.status = "cancelled"
    assert [s.split()[0] for s in sent] == ["UPDATE"]
    with session_scope(db_factory) as session:
        assert session.get_one(Job, job_id).status == "cancelled"
