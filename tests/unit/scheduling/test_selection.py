"""Selection: free slots come from the track's pull counters, which match its open attempts."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from kernelband.config import Settings
from kernelband.db.models import Attempt, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.dispatch import InboxDispatcher, InlineDispatcher, TaskMessage
from kernelband.scheduling.ingest_batch import apply_batch
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, dispatch_pending, fenced, step
from kernelband.scheduling.selection import (
    read_running,
    select_pulls,
    track_value,
    tracks_with_free_slots,
)
from kernelband.scheduling.state import as_rows
from tests.utils.faults import assert_consistent, reward_ledger


class FaultyDispatcher(InboxDispatcher):
    """Loses every 5th task, answers every 7th twice, crashes every 4th compile and garbles
    every 6th profile; the rest run inline. The pattern is fixed, so runs repeat."""

    def __init__(self) -> None:
        super().__init__()
        self.count = itertools.count(1)

    def submit(self, task: TaskMessage) -> str:
        n = next(self.count)
        if n % 5 == 0:
            return task.task_id  # a dead worker: the lease expires, the task is sent again
        result: dict[str, Any]
        if task.kind == "compile" and n % 4 == 0:
            result = {"ok": False, "reason": "task_error:OSError", "message": "disk full"}
        elif task.kind == "profile" and n % 6 == 0 and not task.payload.get("original"):
            result = {"ok": True, "measurement": {"label": "estimated"}}  # keys missing
        else:
            result = FAKE_TASKS[task.kind](task.payload)
        self.deliver(task.attempt_id, result)
        if n % 7 == 0:
            self.deliver(task.attempt_id, result)  # a duplicate delivery
        return task.task_id


def open_pulls(session: Session) -> dict[int, int]:
    """Open attempts of pulls per track, counted from the attempts themselves."""
    query = (select(Attempt.track_id, func.count(Attempt.id))
             .where(Attempt.decision_id.is_not(None), Attempt.state.in_(ACTIVE_ATTEMPT_STATES))
             .group_by(Attempt.track_id))
    return {int(track): int(count) for track, count in session.execute(query).all()}


def test_pull_counters_match_open_attempts_through_faults(
        db_factory: sessionmaker[Session]) -> None:
    job_ids = [make_job(db_factory, budget_iterations=12, parallelism=3, seed=seed)
               for seed in (1, 2)]
    now = [utcnow()]

    def clock() -> datetime:
        return now[0]

    ctx = EngineContext(db_factory, FaultyDispatcher(), Settings(max_tries=3, lease_s=30),
                        clock=clock)
    checked = 0
    for _ in range(400):
        step(ctx)
        now[0] += timedelta(seconds=31)  # every lost task's lease runs out by the next pass
        with session_scope(db_factory) as session:
            counted = open_pulls(session)
            for track in session.scalars(select(Track).where(Track.status == "running")):
                assert track.iterations_dispatched - track.iterations_done == counted.get(
                    track.id, 0), f"track {track.id}"
                checked += 1
            for row in tracks_with_free_slots(session):
                assert row.pulls == counted.get(row.track_id, 0)
        if all(job_is_finished(db_factory, job_id) for job_id in job_ids):
            break
    assert all(job_is_finished(db_factory, job_id) for job_id in job_ids)
    assert checked > 20
    with session_scope(db_factory) as session:  # the faults did happen
        reasons = {reason for reason in session.scalars(select(Attempt.reason)) if reason}
        tries = session.scalar(select(func.max(Attempt.tries)))
    assert "malformed_result:measurement" in reasons and tries and tries >= 2
    assert any(reason.startswith("lost:") for reason in reasons)


def test_a_selection_after_results_in_its_own_transaction_continues_their_states(
        db_factory: sessionmaker[Session]) -> None:
    """Results applied and pulls selected in one transaction: the selection starts from the
    states the results left (held by this transaction, not yet committed), so no decision is
    made twice and every reward is counted once."""
    job_id = make_job(db_factory, budget_iterations=12, parallelism=2)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings(),
                        state_writeback_s=3600.0)
    for _ in range(80):
        step(ctx)  # housekeeping and a pass of its own; the answers wait in the inbox
        items = ctx.dispatcher.drain()
        with fenced(ctx) as session:
            apply_batch(session, items, ctx.clock(), ctx.settings.lease_s, ctx.settings.max_tries)
            select_pulls(session, ctx.clock())
        dispatch_pending(ctx)  # the pulls selected there
        if job_is_finished(db_factory, job_id):
            break
    assert job_is_finished(db_factory, job_id)
    assert_consistent(reward_ledger(db_factory, job_id))


def test_a_track_read_as_a_value_is_written_back_only_at_the_version_it_was_read(
        db_factory: sessionmaker[Session]) -> None:
    """A selection reads its tracks as values; writing a state back loads the row, and a row
    whose version moved since the read fails the transaction rather than overwrite it."""
    make_job(db_factory, budget_iterations=12, parallelism=2)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    step(ctx)  # the job starts; its baseline is answered
    step(ctx)  # the baseline is applied: the track runs
    with session_scope(db_factory) as session:
        running, hot = read_running(session)
        value = track_value(running[0])
        assert as_rows(session, [(value, hot[value.id][0])])[0][0].version == value.version
    stale = track_value(running[0]._replace(version=running[0].version - 1))
    with session_scope(db_factory) as session, pytest.raises(StaleDataError):
        as_rows(session, [(stale, hot[stale.id][0])])
