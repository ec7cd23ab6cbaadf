"""The scheduler's state cache, the finish pre-filter and frontier rows: what a pass keeps."""

from __future__ import annotations

import pytest
from scheduling_fakes import FAKE_TASKS, decisions, make_job
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt, FrontierRow, Job, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling import state_cache
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished, jobs_needing_finish
from kernelband.scheduling.pipeline import (
    EngineContext,
    step,
)
from kernelband.scheduling.state import load_state, policy_for, save_state
from kernelband.scheduling.state_cache import cached_state, clear_cache


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


def test_a_cache_lookup_reads_only_the_state_columns_history(
        sqlite_factory: sessionmaker[Session]) -> None:
    """A hit needs no per-column view of the row (`inspect(track).attrs`: an object per column
    in reference cycles, left to the garbage collector after every pass); a policy state set in
    this transaction and not flushed is still no hit."""
    track_id = running_track(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        track = session.get_one(Track, track_id)
        assert cached_state(session, track) is not None
        assert "attrs" not in vars(inspect(track))  # the memoized per-column view never built
        track.policy_state = {**(track.policy_state or {}), "next_decision": -1}
        assert cached_state(session, track) is None  # written here, not flushed: not current


def test_cache_keeps_only_each_tracks_newest_committed_version(
        sqlite_factory: sessionmaker[Session]) -> None:
    track_id = running_track(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        old = session.get_one(Track, track_id)
        old_version = old.version
        session.expunge(old)  # a row read before the next write, kept aside
    with session_scope(sqlite_factory) as session:
        track = session.get_one(Track, track_id)
        job = session.get_one(Job, track.job_id)
        _, changed = policy_for(job).select(load_state(track))
        save_state(session, track, changed)
    cache = state_cache._CACHES[sqlite_factory.kw["bind"]]
    assert [version for key, (version, _) in cache.items() if key[0] == track_id] == [
        old_version + 1]  # one entry per track: the superseded state is gone
    with session_scope(sqlite_factory) as session:
        assert cached_state(session, session.get_one(Track, track_id)) is not None
        stale = session.merge(old, load=False)  # still says the old version
        assert stale.version == old_version and cached_state(session, stale) is None


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


def test_a_track_out_of_iterations_finishes_once_no_pull_is_open(
        sqlite_factory: sessionmaker[Session]) -> None:
    track_id = running_track(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        track = session.get_one(Track, track_id)
        job = session.get_one(Job, track.job_id)
        job.budget_iterations = track.iterations_dispatched = 2
        session.flush()
        open_pulls = session.scalars(select(Attempt).where(
            Attempt.track_id == track_id, Attempt.decision_id.is_not(None),
            Attempt.state.in_(ACTIVE_ATTEMPT_STATES))).all()
        assert open_pulls, "the running track has pulls in flight"
        assert jobs_needing_finish(session, utcnow()) == []
        for attempt in open_pulls:
            attempt.state = "done"
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
