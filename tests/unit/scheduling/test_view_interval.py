"""Arm/cluster views: rewritten at most once per interval while a track runs, final when it stops."""

from __future__ import annotations

import pytest
from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import ArmStat, Cluster, Job, Track, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling import views
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, step
from kernelband.scheduling.state import load_state
from kernelband.scheduling.view_cache import clear_cache


def _view_writes(factory: sessionmaker[Session], job_id: int, table: str = "ARM_STATS") -> int:
    """Scheduler passes until the job finishes; returns the statements that wrote `table`."""
    ctx = EngineContext(factory, InlineDispatcher(FAKE_TASKS), Settings())
    written: list[str] = []

    def record(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if statement.lstrip().upper().startswith(f"INSERT INTO {table}"):
            written.append(statement)

    engine = factory.kw["bind"]
    event.listen(engine, "before_cursor_execute", record)
    try:
        for _ in range(300):
            step(ctx)
            if job_is_finished(factory, job_id):
                return len(written)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    raise AssertionError(f"job {job_id} did not finish")


def _stored_matches_state(factory: sessionmaker[Session], job_id: int) -> None:
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        state = load_state(track)
        stored = {(a.cluster, a.strategy): a.pulls for a in
                  session.scalars(select(ArmStat).where(ArmStat.track_id == track.id))}
        expected = {(r["cluster"], r["strategy"]): r["pulls"]
                    for r in views.arm_rows(job, track, state, utcnow())}
        assert stored == expected
        sizes = sum(c.size for c in
                    session.scalars(select(Cluster).where(Cluster.track_id == track.id)))
        assert sizes == len(state.frontier)


def test_a_running_track_rewrites_its_view_at_most_once_per_interval(
        sqlite_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    monkeypatch.setattr(views, "VIEW_INTERVAL_S", 3600.0)
    job_id = make_job(sqlite_factory, budget_iterations=8, parallelism=2)
    # The baseline's first view, then nothing until the track stops: its final view.
    assert _view_writes(sqlite_factory, job_id) == 2
    _stored_matches_state(sqlite_factory, job_id)  # the stopped track shows every reward


def test_without_an_interval_every_reward_is_shown(
        sqlite_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    monkeypatch.setattr(views, "VIEW_INTERVAL_S", 0.0)
    job_id = make_job(sqlite_factory, budget_iterations=8, parallelism=2)
    assert _view_writes(sqlite_factory, job_id) > 2
    _stored_matches_state(sqlite_factory, job_id)


def test_cluster_members_are_rewritten_at_most_once_per_cluster_interval(
        sqlite_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    monkeypatch.setattr(views, "VIEW_INTERVAL_S", 0.0)
    monkeypatch.setattr(views, "CLUSTER_INTERVAL_S", 3600.0)
    job_id = make_job(sqlite_factory, budget_iterations=8, parallelism=2)
    # The baseline's first clusters, then nothing until the track stops: its final clusters.
    assert _view_writes(sqlite_factory, job_id, "CLUSTERS") == 2
    _stored_matches_state(sqlite_factory, job_id)  # every member shown once it stopped


def test_an_arm_row_is_rewritten_only_when_its_counts_or_mask_change(
        db_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    """A reward changes one arm's pulls and mean; the other arms' rows (whose UCB scores moved
    a little with ln t) are not rewritten (the carried score: tests/unit/db/test_db_upsert)."""
    clear_cache()
    monkeypatch.setattr(views, "VIEW_INTERVAL_S", 0.0)
    job_id = make_job(db_factory, budget_iterations=8, parallelism=1)
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    rewrites: list[int] = []
    previous: dict[tuple[int, str], tuple[object, ...]] = {}
    for _ in range(300):
        step(ctx)
        with session_scope(db_factory) as session:
            track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
            current = {(a.cluster, a.strategy): (a.pulls, a.mean_reward, a.ucb_score, a.updated_at)
                       for a in session.scalars(select(ArmStat).where(ArmStat.track_id == track.id))}
        if previous and current != previous:
            rewrites.append(sum(current[key] != previous.get(key) for key in current))
        previous = current
        if job_is_finished(db_factory, job_id):
            break
    # Most rewrites touch the rewarded arm only; a re-clustering or a new mask touches more.
    assert len(rewrites) >= 8 and sorted(rewrites)[len(rewrites) // 2] == 1 < len(previous)
    _stored_matches_state(db_factory, job_id)
