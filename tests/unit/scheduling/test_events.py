"""The job event log: each job's numbers continue its own sequence, read from the database once
and then counted on in memory by the process that appends them."""

from __future__ import annotations

import pytest
from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Event
from kernelband.db.session import ConflictError, session_scope
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.events import (
    append_event,
    forget_event_counters,
    hold_event_counters,
)
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.pipeline import EngineContext, step
from kernelband.scheduling.state_cache import clear_cache
from tests.utils.sql_log import sent_statements


def seqs(factory: sessionmaker[Session], job_id: int) -> list[int]:
    with session_scope(factory) as session:
        return list(session.scalars(select(Event.seq).where(Event.job_id == job_id)
                                    .order_by(Event.seq)))


def test_numbers_held_for_a_selections_jobs_continue_each_jobs_events_including_one_without(
        db_factory: sessionmaker[Session]) -> None:
    busy, quiet = make_job(db_factory, seed=1), make_job(db_factory, seed=2)
    with session_scope(db_factory) as session:
        start_queued_jobs(session)  # one track each
        session.execute(delete(Event).where(Event.job_id == quiet))  # a job without events
        started = session.scalar(select(func.max(Event.seq)).where(Event.job_id == busy)) or 0
    forget_event_counters()  # events deleted behind the counters' back: read them afresh
    with session_scope(db_factory) as session:
        for _ in range(3):
            append_event(session, busy, "note", {})
    with session_scope(db_factory) as session:
        hold_event_counters(session, {busy, quiet})  # as a selection does for the jobs it serves
        assert append_event(session, busy, "note", {}) == started + 4
        assert append_event(session, quiet, "note", {}) == 1


def test_a_scheduler_pass_reads_no_event_once_it_has_counted_its_jobs(
        db_factory: sessionmaker[Session]) -> None:
    # The last number per job was a backward probe of the events index for every attempt a
    # batch locked and every track a pass loaded, each pass: a read that deepens with the log.
    for seed in range(3):
        make_job(db_factory, budget_iterations=40, parallelism=2, seed=seed)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    for _ in range(3):
        step(ctx)
    with sent_statements(db_factory.kw["bind"]) as sent:
        for _ in range(5):
            step(ctx)
    reads = [s for s in sent if "events" in s and not s.lstrip().upper().startswith("INSERT")]
    assert any(s.lstrip().upper().startswith("INSERT INTO EVENTS") for s in sent)
    assert reads == []
    for job_id in range(1, 4):
        assert seqs(db_factory, job_id) == list(range(1, len(seqs(db_factory, job_id)) + 1))


def test_a_rolled_back_transaction_takes_back_its_numbers(
        db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory)
    with session_scope(db_factory) as session:
        append_event(session, job_id, "note", {})
    with pytest.raises(RuntimeError), session_scope(db_factory) as session:
        append_event(session, job_id, "note", {})
        raise RuntimeError("the pass failed before its commit")
    with session_scope(db_factory) as session:
        assert append_event(session, job_id, "note", {}) == 2
    assert seqs(db_factory, job_id) == [1, 2]


def test_numbers_appended_by_another_leader_are_continued_after_a_takeover_or_a_conflict(
        db_factory: sessionmaker[Session]) -> None:
    job_id = make_job(db_factory)
    with session_scope(db_factory) as session:
        append_event(session, job_id, "note", {})  # held by this process: 1
    # another leader (here: rows written around this process's counters) appends 2 and 3
    with session_scope(db_factory) as session:
        session.add_all([Event(job_id=job_id, seq=n, kind="note", payload={}) for n in (2, 3)])
    # a number counted from the stale one conflicts, and that transaction forgets them all
    with pytest.raises(ConflictError), session_scope(db_factory) as session:
        append_event(session, job_id, "note", {})
    with session_scope(db_factory) as session:
        assert append_event(session, job_id, "note", {}) == 4
    # taking the lead forgets them before any conflict
    with session_scope(db_factory) as session:
        session.add(Event(job_id=job_id, seq=5, kind="note", payload={}))
    clear_cache()
    with session_scope(db_factory) as session:
        assert append_event(session, job_id, "note", {}) == 6
    assert seqs(db_factory, job_id) == [1, 2, 3, 4, 5, 6]
