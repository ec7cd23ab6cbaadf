"""Cancellation, duplicate results, kill -9 restarts, replicas and takeover, on real processes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import repository
from kernelband.db.models import Attempt, Event, LeaderEpoch, Measurement, Track, Worker
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InboxDispatcher, TaskMessage
from kernelband.scheduling.lifecycle import start_queued_jobs
from kernelband.scheduling.pipeline import EngineContext, dispatch_pending, fenced
from services.scheduler.dispatcher import RESULTS_UNACKED_KEYS
from services.worker.app import app as celery_app
from services.worker.messages import ResultMessage, publish
from services.worker.queues import RESULTS_QUEUE
from tests.utils.processes import ManagedProcess, job_status, wait_finished, wait_for

pytestmark = pytest.mark.integration
OPEN = ("pending", "dispatched", "expired")
Factory = sessionmaker[Session]


def count(factory: Factory, model: type, *where: ColumnElement[bool]) -> int:
    with session_scope(factory) as session:
        return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def done_attempts(factory: Factory, job_id: int) -> int:
    return count(factory, Attempt, Attempt.job_id == job_id, Attempt.state == "done")


def leader(factory: Factory) -> tuple[int, str]:
    with session_scope(factory) as session:
        row = session.get(LeaderEpoch, 1)
        return (row.epoch, row.holder) if row else (0, "")


def test_cancel_stops_dispatch(factory: Factory, make_job: Callable[..., int],
                               workers: list[ManagedProcess],
                               schedulers: Callable[[str], ManagedProcess]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=40, parallelism=2)
    scheduler = schedulers("a")
    wait_for(lambda: done_attempts(factory, job_id) >= 2, 90, "the job to make progress",
             processes=(scheduler, *workers))
    with session_scope(factory) as session:
        repository.request_cancel(session, job_id)
    wait_for(lambda: job_status(factory, job_id) == "cancelled", 30, "the job to be cancelled",
             processes=(scheduler,))
    attempts = count(factory, Attempt, Attempt.job_id == job_id)
    time.sleep(3.0)  # many scheduler passes: none may dispatch for this job
    assert count(factory, Attempt, Attempt.job_id == job_id) == attempts
    assert count(factory, Attempt, Attempt.job_id == job_id, Attempt.state.in_(OPEN)) == 0
    with session_scope(factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        assert track.status == "cancelled" and track.iterations_dispatched < 40


def test_a_result_delivered_twice_is_applied_once(
        factory: Factory, make_job: Callable[..., int], broker_url: str,
        workers: list[ManagedProcess], schedulers: Callable[[str], ManagedProcess]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=3, parallelism=2)
    scheduler = schedulers("a")
    assert wait_finished(factory, job_id, (scheduler, *workers)) == "completed"
    with session_scope(factory) as session:
        attempt = session.scalars(select(Attempt).where(
            Attempt.job_id == job_id, Attempt.kind == "profile",
            Attempt.state == "done")).first()
        assert attempt is not None and attempt.result is not None
        replay = ResultMessage(attempt_id=attempt.id, kind="profile", result=attempt.result)
        finished_at = attempt.finished_at
    before = (count(factory, Measurement), count(factory, Event, Event.job_id == job_id))
    client = redis.Redis.from_url(broker_url)
    with celery_app.connection_for_write(broker_url) as connection:
        publish(connection, replay)
        publish(connection, replay)
    wait_for(lambda: client.llen(RESULTS_QUEUE) == 0
             and client.zcard(RESULTS_UNACKED_KEYS["unacked_index_key"]) == 0,
             30, "the scheduler to consume and acknowledge both copies", processes=(scheduler,))
    client.close()
    assert (count(factory, Measurement), count(factory, Event, Event.job_id == job_id)) == before
    with session_scope(factory) as session:
        assert session.get_one(Attempt, replay.attempt_id).finished_at == finished_at


def test_a_scheduler_killed_mid_job_is_continued_by_the_next(
        factory: Factory, make_job: Callable[..., int], workers: list[ManagedProcess],
        schedulers: Callable[[str], ManagedProcess]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=4, parallelism=2)
    first = schedulers("a")
    wait_for(lambda: done_attempts(factory, job_id) >= 3, 90, "the job to make progress",
             processes=(first, *workers))
    first.kill9()
    assert job_status(factory, job_id) == "running"
    second = schedulers("b")
    assert wait_finished(factory, job_id, (second, *workers)) == "completed"
    assert leader(factory)[0] == 2 and leader(factory)[1].endswith("-b")
    assert count(factory, Attempt, Attempt.job_id == job_id, Attempt.state.in_(OPEN)) == 0
    with session_scope(factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_id)).one()
        assert track.iterations_done == 4 and track.held_out == "passed"


def test_two_replicas_one_leader_and_failover(
        factory: Factory, make_job: Callable[..., int], workers: list[ManagedProcess],
        schedulers: Callable[[str], ManagedProcess]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=3, parallelism=2)
    replicas = {"a": schedulers("a"), "b": schedulers("b")}
    assert wait_finished(factory, job_id, (*replicas.values(), *workers)) == "completed"
    epoch, holder = leader(factory)
    assert epoch == 1  # the standby never took over while the leader lived
    with session_scope(factory) as session:
        acting = set(session.scalars(select(Worker.name).where(Worker.queue == "scheduler")))
    assert acting == {holder}  # only the leader wrote anything
    lead_key = holder.rsplit("-", 1)[1]
    replicas[lead_key].terminate()
    wait_for(lambda: leader(factory)[0] == 2, 30, "the standby to take over",
             processes=tuple(replicas.values()))
    assert leader(factory)[1].endswith("-a" if lead_key == "b" else "-b")


class NeverSent(InboxDispatcher):
    """A leader that commits tries as dispatched and dies before sending them."""

    def submit(self, task: TaskMessage) -> str:
        return task.task_id


def test_a_try_committed_but_never_sent_is_resent_soon_after_a_takeover(
        factory: Factory, make_job: Callable[..., int], workers: list[ManagedProcess],
        schedulers: Callable[[str], ManagedProcess]) -> None:
    job_id = make_job("vector_add", ("cpu",), budget_iterations=1, parallelism=1)
    dying = EngineContext(factory, NeverSent(), Settings())
    with fenced(dying) as session:
        start_queued_jobs(session)
    assert dispatch_pending(dying) == 1  # the baseline: dispatched in the database only
    started = time.monotonic()
    scheduler = schedulers("next")
    # The test lease is 120 s: finishing well inside it means the try was not waited out.
    assert wait_finished(factory, job_id, (scheduler, *workers), timeout_s=90) == "completed"
    print(f"\nnever-sent baseline: job finished {time.monotonic() - started:.1f}s after takeover")
    with session_scope(factory) as session:
        baseline = session.scalars(select(Attempt).where(Attempt.job_id == job_id)
                                   .order_by(Attempt.id)).first()
        assert baseline is not None and baseline.kind == "profile" and baseline.tries == 2
    assert "in no queue and no worker reported them" in scheduler.log_tail(20000)
