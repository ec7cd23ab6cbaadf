"""A batch of results locks and closes its attempts as plain values, not ORM objects."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt
from kernelband.db.session import session_scope
from kernelband.scheduling.attempt_values import lock_attempt_values
from kernelband.scheduling.dispatch import InlineDispatcher, TaskResult
from kernelband.scheduling.ingest_batch import apply_batch
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.pipeline import (
    EngineContext,
    dispatch_pending,
    fenced,
    ingest_batch,
    ingest_safely,
)
from kernelband.scheduling.selection import select_pulls


def _generate_results(factory: sessionmaker[Session], jobs: int = 2) -> tuple[EngineContext,
                                                                               list[TaskResult]]:
    """Running jobs with a pull in each slot dispatched; their generate results, not applied."""
    ctx = EngineContext(factory, InlineDispatcher(FAKE_TASKS), Settings())
    for seed in range(jobs):
        make_job(factory, budget_iterations=50, parallelism=2, seed=seed)
    with fenced(ctx) as session:
        start_queued_jobs(session)
    dispatch_pending(ctx)  # baselines, answered at once
    for item in ctx.dispatcher.drain():
        ingest_safely(ctx, item.attempt_id, item.result)
    with fenced(ctx) as session:
        select_pulls(session, ctx.clock())
    dispatch_pending(ctx)
    return ctx, sorted(ctx.dispatcher.drain(), key=lambda item: item.attempt_id)


@contextmanager
def attempts_loaded(factory: sessionmaker[Session]) -> Iterator[list[int]]:
    """Ids of the Attempt ORM objects loaded from the database meanwhile."""
    loaded: list[int] = []

    def record(target: Attempt, _context: object) -> None:
        loaded.append(target.id)

    event.listen(Attempt, "load", record)
    try:
        yield loaded
    finally:
        event.remove(Attempt, "load", record)


def _states(factory: sessionmaker[Session], ids: list[int]) -> dict[int, str]:
    with session_scope(factory) as session:
        rows = session.execute(select(Attempt.id, Attempt.state).where(Attempt.id.in_(ids)))
        return {attempt_id: state for attempt_id, state in rows}


def test_a_batch_closes_its_attempts_without_loading_them_as_orm_objects(
        db_factory: sessionmaker[Session]) -> None:
    ctx, items = _generate_results(db_factory)
    assert len(items) == 4
    with attempts_loaded(db_factory) as loaded:
        assert ingest_batch(ctx, items) == (4, 0)
    assert loaded == []
    ids = [item.attempt_id for item in items]
    assert set(_states(db_factory, ids).values()) == {"done"}
    with session_scope(db_factory) as session:
        attempts = session.scalars(select(Attempt).where(Attempt.id.in_(ids))).all()
        assert all(a.finished_at is not None and a.reason is None for a in attempts)
        assert all(a.result is not None and a.result["ok"] for a in attempts)


def test_a_read_later_in_the_transaction_sees_the_closed_attempts(
        db_factory: sessionmaker[Session]) -> None:
    ctx, items = _generate_results(db_factory)
    ids = [item.attempt_id for item in items]
    with fenced(ctx) as session:
        assert apply_batch(session, items, ctx.clock(), 60.0, 3) == [True] * 4
        seen = session.execute(select(Attempt.state).where(Attempt.id.in_(ids))).scalars()
        assert set(seen) == {"done"}


def test_a_batch_rolled_back_leaves_its_attempts_open(db_factory: sessionmaker[Session]) -> None:
    ctx, items = _generate_results(db_factory)
    ids = [item.attempt_id for item in items]
    with pytest.raises(RuntimeError), fenced(ctx) as session:
        apply_batch(session, items, ctx.clock(), 60.0, 3)
        raise RuntimeError("the batch fails after applying")
    assert set(_states(db_factory, ids).values()) == {"dispatched"}
    assert ingest_batch(ctx, items) == (4, 0)  # applied once, by the next batch
    assert ingest_batch(ctx, items) == (0, 4)


def test_a_lease_beat_in_a_batch_extends_the_lease(db_factory: sessionmaker[Session]) -> None:
    ctx, items = _generate_results(db_factory)
    first = items[0]
    with session_scope(db_factory) as session:
        attempt = session.get_one(Attempt, first.attempt_id)
        task_id, lease = attempt.task_id, attempt.lease_expires_at
    assert lease is not None
    later = lease + timedelta(seconds=120)
    beat = TaskResult(first.attempt_id, {"heartbeat": True, "task_id": task_id})
    with fenced(ctx) as session:
        assert apply_batch(session, [beat], later, 60.0, 3) == [False]
    with session_scope(db_factory) as session:
        attempt = session.get_one(Attempt, first.attempt_id)
        assert attempt.state == "dispatched"
        assert attempt.lease_expires_at is not None
        assert attempt.lease_expires_at.replace(tzinfo=None) == (
            later + timedelta(seconds=60)).replace(tzinfo=None)
        assert attempt.started_at is not None


def test_the_closing_updates_go_out_once_however_many_reads_follow(
        db_factory: sessionmaker[Session]) -> None:
    ctx, items = _generate_results(db_factory)
    updates: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE ATTEMPTS"):
            updates.append(statement)

    engine = db_factory.kw["bind"]
    event.listen(engine, "before_cursor_execute", record)
    try:
        with fenced(ctx) as session:
            apply_batch(session, items, ctx.clock(), 60.0, 3)
            for _ in range(2):  # each read writes what changed before it
                session.execute(select(Attempt.state).where(Attempt.id == items[0].attempt_id))
    finally:
        event.remove(engine, "before_cursor_execute", record)
    postgres = engine.dialect.name == "postgresql"
    assert len(updates) == (1 if postgres else len(items)), updates  # SQLite: one per row


def test_a_value_changed_again_after_a_write_is_written_again(
        db_factory: sessionmaker[Session]) -> None:
    ctx, items = _generate_results(db_factory)
    attempt_id = items[0].attempt_id
    with fenced(ctx) as session:
        attempt = lock_attempt_values(session, {attempt_id})[attempt_id][0]
        attempt.reason = "first"
        assert session.scalar(select(Attempt.reason).where(Attempt.id == attempt_id)) == "first"
        attempt.reason = "second"
    with session_scope(db_factory) as session:
        assert session.get_one(Attempt, attempt_id).reason == "second"
