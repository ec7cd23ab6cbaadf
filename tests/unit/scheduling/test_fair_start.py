"""Queued jobs start fairly between teams, and a per-team cap bounds attempts in flight."""

from __future__ import annotations

from typing import Any

from scheduling_fakes import FAKE_TASKS
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Attempt, Job, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InboxDispatcher, TaskMessage
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.pipeline import EngineContext, step
from kernelband.scheduling.selection import in_flight_by_team, select_pulls


class ProfileOnlyDispatcher(InboxDispatcher):
    """Answers baselines at once and keeps every other task in flight (a busy fleet)."""

    def submit(self, task: TaskMessage) -> str:
        if task.kind == "profile":
            self.deliver(task.attempt_id, FAKE_TASKS["profile"](task.payload))
        return task.task_id


def queue_jobs(factory: sessionmaker[Session], team: str, count: int, **options: Any) -> list[int]:
    """`count` queued jobs of one team (one problem), in submission order."""
    with session_scope(factory) as session:
        row = repository.get_or_create_team(session, team)
        problem = repository.get_or_create_problem(
            session, row.id, "toy", "native", "ORIGINAL", {"editable": "ORIGINAL"},
            team[0] * 64)
        options.setdefault("budget_iterations", 6)
        return [repository.create_job(session, row.id, problem.id, ("cpu",), **options).id
                for _ in range(count)]


def running(factory: sessionmaker[Session]) -> list[int]:
    with session_scope(factory) as session:
        return list(session.scalars(select(Job.id).where(Job.status == "running")
                                    .order_by(Job.id)))


def test_a_big_suite_does_not_start_ahead_of_another_team(
        db_factory: sessionmaker[Session]) -> None:
    suite = queue_jobs(db_factory, "big-suite", 10)
    other = queue_jobs(db_factory, "other", 2)  # submitted after the whole suite
    with session_scope(db_factory) as session:
        assert start_queued_jobs(session, per_team=3) == 5
    assert running(db_factory) == [*suite[:3], *other]
    with session_scope(db_factory) as session:
        assert start_queued_jobs(session, per_team=3) == 3  # only the suite still waits
    assert running(db_factory) == [*suite[:6], *other]


def test_no_start_for_a_team_at_its_in_flight_cap(db_factory: sessionmaker[Session]) -> None:
    first = queue_jobs(db_factory, "alpha", 4)
    with session_scope(db_factory) as session:
        assert start_queued_jobs(session, per_team=2, cap=2) == 2  # two baselines open now
        assert start_queued_jobs(session, per_team=2, cap=2) == 0
    assert running(db_factory) == first[:2]


def test_without_bounds_every_queued_job_starts(db_factory: sessionmaker[Session]) -> None:
    jobs = queue_jobs(db_factory, "alpha", 3) + queue_jobs(db_factory, "beta", 2)
    with session_scope(db_factory) as session:
        assert start_queued_jobs(session) == 5
    assert running(db_factory) == jobs


def test_select_pulls_caps_each_team_and_shares_between_its_jobs(
        db_factory: sessionmaker[Session]) -> None:
    busy = queue_jobs(db_factory, "busy", 2, parallelism=4)
    calm = queue_jobs(db_factory, "calm", 1, parallelism=2)
    settings = Settings(max_in_flight_per_team=0)  # steps start and measure, select nothing
    ctx = EngineContext(db_factory, ProfileOnlyDispatcher(), settings, clock=utcnow)
    step(ctx)
    step(ctx)  # baselines measured: every track is running with no pull in flight
    with session_scope(db_factory) as session:
        assert select_pulls(session, utcnow(), cap=3) == 3 + 2
        teams = {job.id: job.team_id for job in session.scalars(select(Job))}
        assert in_flight_by_team(session) == {teams[busy[0]]: 3, teams[calm[0]]: 2}
        per_job: dict[int, int] = {}
        for attempt in session.scalars(select(Attempt).where(Attempt.kind == "generate")):
            per_job[attempt.job_id] = per_job.get(attempt.job_id, 0) + 1
    assert per_job == {busy[0]: 2, busy[1]: 1, calm[0]: 2}  # round-robin inside the team


def test_step_applies_the_settings_cap(db_factory: sessionmaker[Session]) -> None:
    queue_jobs(db_factory, "busy", 3, parallelism=4)
    settings = Settings(max_in_flight_per_team=5, max_job_starts_per_team=2)
    ctx = EngineContext(db_factory, ProfileOnlyDispatcher(), settings, clock=utcnow)
    assert step(ctx).started_jobs == 2
    for _ in range(3):
        step(ctx)
    with session_scope(db_factory) as session:
        assert list(in_flight_by_team(session).values()) == [5]  # 12 free slots, cap 5


def test_a_team_runs_at_most_its_running_cap_and_the_next_starts_when_one_ends(
        db_factory: sessionmaker[Session]) -> None:
    suite = queue_jobs(db_factory, "capped-suite", 5)
    other = queue_jobs(db_factory, "uncapped-other", 1)
    with session_scope(db_factory) as session:
        assert start_queued_jobs(session, running_cap=2) == 3  # two of the suite, the other team's one
        assert start_queued_jobs(session, running_cap=2) == 0  # both teams at the cap
    assert running(db_factory) == [*suite[:2], *other]
    with session_scope(db_factory) as session:
        session.get_one(Job, suite[0]).status = "completed"
    with session_scope(db_factory) as session:
        assert start_queued_jobs(session, running_cap=2) == 1
    assert running(db_factory) == [suite[1], suite[2], *other]


def test_the_step_takes_the_running_cap_from_the_settings(db_factory: sessionmaker[Session]) -> None:
    suite = queue_jobs(db_factory, "settings-suite", 4)
    ctx = EngineContext(db_factory, ProfileOnlyDispatcher(), Settings(max_running_jobs_per_team=3))
    step(ctx)
    assert running(db_factory) == suite[:3]
