"""Usage quotas at dispatch: a team that used up a daily quota gets no new pulls, checked once
per housekeeping interval, and gets them again once within its quotas."""

from __future__ import annotations

from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Event, Job, Team
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.pipeline import EngineContext, step


def other_team_job(factory: sessionmaker[Session]) -> int:
    with session_scope(factory) as session:
        team = repository.get_or_create_team(session, "team-b")
        problem = repository.get_or_create_problem(
            session, team.id, "toy", "native", "ORIGINAL", {"editable": "ORIGINAL"}, "h" * 64)
        return repository.create_job(session, team.id, problem.id, ("cpu",), seed=3,
                                     budget_iterations=6, parallelism=1).id


def pulls(factory: sessionmaker[Session], job_id: int) -> int:
    with session_scope(factory) as session:
        return len(session.scalars(select(Event.id).where(
            Event.job_id == job_id, Event.kind == "pull_selected")).all())


def set_usd_quota(factory: sessionmaker[Session], job_id: int, usd: float | None) -> None:
    with session_scope(factory) as session:
        team = session.get_one(Team, session.get_one(Job, job_id).team_id)
        team.quota_usd_per_day = usd


def test_a_team_over_its_daily_quota_gets_no_new_pulls_until_within_it(
        db_factory: sessionmaker[Session]) -> None:
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings())
    capped = make_job(db_factory, budget_iterations=20, parallelism=1)
    free = other_team_job(db_factory)
    set_usd_quota(db_factory, capped, 0.0015)  # a fake generation costs $0.001: two use it up
    for _ in range(12):
        step(ctx)
    assert ctx.over_quota
    stopped_at, free_at = pulls(db_factory, capped), pulls(db_factory, free)
    for _ in range(9):
        step(ctx)
    assert pulls(db_factory, capped) == stopped_at and pulls(db_factory, free) > free_at
    set_usd_quota(db_factory, capped, None)
    for _ in range(4):
        step(ctx)
    assert not ctx.over_quota and pulls(db_factory, capped) > stopped_at


def test_the_quota_is_read_once_per_housekeeping_interval(
        db_factory: sessionmaker[Session]) -> None:
    ctx = EngineContext(db_factory, InlineDispatcher(FAKE_TASKS), Settings(),
                        housekeeping_s=3600.0)
    capped = make_job(db_factory, budget_iterations=6, parallelism=1)
    step(ctx)  # the first pass does its housekeeping: the team is within its quotas
    set_usd_quota(db_factory, capped, 1e-9)
    for _ in range(4):
        step(ctx)
    assert not ctx.over_quota and pulls(db_factory, capped) > 0  # not asked again yet
