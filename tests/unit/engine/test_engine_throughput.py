"""Scheduler throughput changes: the parsed-state cache and the finish pre-filter."""

from __future__ import annotations

import pytest
from engine_fakes import FAKE_TASKS, decisions, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import FrontierRow, Job, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.dispatch import InlineDispatcher
from kernelband.engine import EngineContext, job_is_finished, jobs_needing_finish, step
from kernelband.engine_state import cached_state, clear_cache
from kernelband.engine_support import load_state, policy_for, save_state


def context(factory: sessionmaker[Session]) -> EngineContext:
    return EngineContext(factory, InlineDispatcher(FAKE_TASKS), Settings())


def run(ctx: EngineContext, job_id: int, cold: bool) -> None:
    for _ in range(300):
        if cold:
            clear_cache()  # every load parses the stored JSON, as after a restart
        step(ctx)
        if job_is_finished(ctx.factory, job_id):
            return
    raise AssertionError(f"job {job_id} did not finish")


def test_cached_and_parsed_states_give_identical_decisions(
    sqlite_factory: sessionmaker[Session],
) -> None:
    warm = make_job(sqlite_factory, budget_iterations=8, parallelism=2, seed=3)
    run(context(sqlite_factory), warm, cold=False)
    cold = make_job(sqlite_factory, budget_iterations=8, parallelism=2, seed=3)
    run(context(sqlite_factory), cold, cold=True)
    with session_scope(sqlite_factory) as session:
        assert decisions(session, warm) == decisions(session, cold)
        assert len(decisions(session, warm)) == 8


def running_track(factory: sessionmaker[Session]) -> int:
    job_id = make_job(factory, budget_iterations=50, parallelism=2)
    ctx = context(factory)
    for _ in range(4):
        step(ctx)
    with session_scope(factory) as session:
        return session.scalars(select(Track.id).where(Track.job_id == job_id)).one()


def test_cache_holds_only_committed_states(sqlite_factory: sessionmaker[Session]) -> None:
    track_id = running_track(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        track = session.get_one(Track, track_id)
        hit = cached_state(session, track)
        assert hit is not None  # the scheduler's last commit cached it
        committed = hit.to_dict()
        clear_cache()
        assert load_state(track).to_dict() == committed  # parsed from the stored rows
    with pytest.raises(RuntimeError), session_scope(sqlite_factory) as session:
        track = session.get_one(Track, track_id)
        state = load_state(track)
        job = session.get_one(Job, track.job_id)
        _, changed = policy_for(job).select(state)
        save_state(session, track, changed)
        assert load_state(track).to_dict() == changed.to_dict()  # unflushed write wins
        raise RuntimeError("roll back")
    with session_scope(sqlite_factory) as session:
        assert load_state(session.get_one(Track, track_id)).to_dict() == committed


def test_finish_examines_only_jobs_that_can_change(sqlite_factory: sessionmaker[Session]) -> None:
    track_id = running_track(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        job = session.get_one(Job, session.get_one(Track, track_id).job_id)
        assert jobs_needing_finish(session, utcnow()) == []  # searching, nothing to decide
        job.cancel_requested = True
        session.flush()
        assert [j.id for j in jobs_needing_finish(session, utcnow())] == [job.id]
        job.cancel_requested, job.budget_tokens, job.tokens_used = False, 10, 10
        session.flush()
        assert [j.id for j in jobs_needing_finish(session, utcnow())] == [job.id]


def test_frontier_is_stored_as_rows_and_only_appended(
    sqlite_factory: sessionmaker[Session],
) -> None:
    job_id = make_job(sqlite_factory, budget_iterations=6, parallelism=2)
    run(context(sqlite_factory), job_id, cold=False)
    with session_scope(sqlite_factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        track_id = track.id
        state = load_state(track)
        rows = session.scalars(select(FrontierRow.entry).where(FrontierRow.track_id == track_id)
                               .order_by(FrontierRow.position)).all()
        assert track.policy_state is not None and "frontier" not in track.policy_state
        assert track.frontier_size == len(rows) == len(state.frontier) >= 2
        assert list(rows) == [e.to_dict() for e in state.frontier]
        shorter = state.copy()
        shorter.frontier = shorter.frontier[:-1]
        with pytest.raises(RuntimeError, match="only append"):
            save_state(session, track, shorter)
