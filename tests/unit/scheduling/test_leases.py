"""Leases: heartbeats extend only the current try, the result applies once, a new leader
resends at once the tries that were never sent, and each expiry looks only at the leases that
ended since the last."""

from __future__ import annotations

from datetime import timedelta

from scheduling_fakes import FAKE_TASKS, Clock, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt
from kernelband.db.session import session_scope
from kernelband.scheduling.budgets import as_utc
from kernelband.scheduling.dispatch import InboxDispatcher, TaskMessage
from kernelband.scheduling.leases import expire_leases, recheck_untaken
from kernelband.scheduling.pipeline import EngineContext, fenced, step
from kernelband.scheduling.results import GenerateResult


class HeldGenerates(InboxDispatcher):
    """Keeps generate tasks (a busy LLM queue) and answers the rest at once."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[TaskMessage] = []

    def submit(self, task: TaskMessage) -> str:
        if task.kind == "generate":
            self.held.append(task)
        else:
            self.deliver(task.attempt_id, FAKE_TASKS[task.kind](task.payload))
        return task.task_id


def generate_attempt(factory: sessionmaker[Session]) -> Attempt:
    with session_scope(factory) as session:
        attempt = session.scalars(select(Attempt).where(Attempt.kind == "generate")).one()
        session.expunge(attempt)
        return attempt


def one_held_pull(factory: sessionmaker[Session], lease_s: float,
                  max_tries: int) -> tuple[EngineContext, HeldGenerates, Clock]:
    """A one-pull job stepped until its baseline is measured and its generate try is held."""
    make_job(factory, budget_iterations=1)
    dispatcher, clock = HeldGenerates(), Clock()
    ctx = EngineContext(factory, dispatcher, Settings(lease_s=lease_s, max_tries=max_tries),
                        clock=clock)
    step(ctx)
    step(ctx)
    return ctx, dispatcher, clock


def test_heartbeats_extend_then_the_result_applies_once(
        db_factory: sessionmaker[Session]) -> None:
    ctx, dispatcher, clock = one_held_pull(db_factory, lease_s=60, max_tries=1)
    task = dispatcher.held[0]
    for _ in range(4):  # 200 s in all, far beyond the 60 s lease
        clock.now += timedelta(seconds=50)
        dispatcher.deliver(task.attempt_id, {"heartbeat": True, "task_id": task.task_id})
        report = step(ctx)
        assert (report.ingested, report.ignored, report.expired) == (0, 1, 0)
    attempt = generate_attempt(db_factory)
    assert attempt.state == "dispatched" and attempt.tries == 1
    assert as_utc(attempt.lease_expires_at) == clock.now + timedelta(seconds=60)  # type: ignore[arg-type]
    result = FAKE_TASKS["generate"](task.payload)
    for _ in range(2):  # at-most-once: a redelivered result is ignored
        dispatcher.deliver(task.attempt_id, result)
    dispatcher.deliver(task.attempt_id, {"heartbeat": True, "task_id": task.task_id})
    report = step(ctx)
    assert (report.ingested, report.ignored) == (1, 2)
    attempt = generate_attempt(db_factory)
    assert attempt.state == "done"
    assert attempt.result == GenerateResult.from_dict(result).without_transcript()


def test_a_superseded_try_cannot_extend_the_lease(db_factory: sessionmaker[Session]) -> None:
    ctx, dispatcher, clock = one_held_pull(db_factory, lease_s=60, max_tries=3)
    clock.now += timedelta(seconds=61)
    step(ctx)  # lease expired: the attempt is re-sent as try 2
    first, second = dispatcher.held[0], dispatcher.held[-1]
    assert second.task_id != first.task_id and second.attempt_id == first.attempt_id
    deadline = generate_attempt(db_factory).lease_expires_at
    clock.now += timedelta(seconds=30)
    dispatcher.deliver(first.attempt_id, {"heartbeat": True, "task_id": first.task_id})
    step(ctx)
    assert generate_attempt(db_factory).lease_expires_at == deadline
    dispatcher.deliver(second.attempt_id, {"heartbeat": True, "task_id": second.task_id})
    step(ctx)
    assert as_utc(generate_attempt(db_factory).lease_expires_at) == clock.now + timedelta(seconds=60)  # type: ignore[arg-type]


def test_a_new_leader_resends_untaken_tries_that_no_queue_holds(
        db_factory: sessionmaker[Session]) -> None:
    """The previous leader committed the try and died before sending it: no lease wait."""
    ctx, dispatcher, clock = one_held_pull(db_factory, lease_s=300, max_tries=3)
    # the held message stands for one never sent
    depth = {"llm": 1}
    with fenced(ctx) as session:  # a message waits in its queue: queue time is not lost time
        assert recheck_untaken(session, clock.now, 10.0, depth.get) == 0
    with fenced(ctx) as session:  # the broker cannot say: keep the lease
        assert recheck_untaken(session, clock.now, 10.0, lambda queue: None) == 0
    depth["llm"] = 0
    with fenced(ctx) as session:
        assert recheck_untaken(session, clock.now, 10.0, depth.get) == 1
    assert as_utc(generate_attempt(db_factory).lease_expires_at) == clock.now + timedelta(seconds=10)  # type: ignore[arg-type]
    clock.now += timedelta(seconds=11)  # no worker reported it within the grace
    step(ctx)
    attempt = generate_attempt(db_factory)
    assert attempt.state == "dispatched" and attempt.tries == 2  # sent again, 289 s early
    assert dispatcher.held[-1].task_id != dispatcher.held[0].task_id


def test_a_reported_try_keeps_its_lease_after_a_takeover(db_factory: sessionmaker[Session]) -> None:
    ctx, dispatcher, clock = one_held_pull(db_factory, lease_s=300, max_tries=3)
    task = dispatcher.held[0]
    dispatcher.deliver(task.attempt_id, {"heartbeat": True, "task_id": task.task_id})
    step(ctx)  # a worker took it
    with fenced(ctx) as session:
        assert recheck_untaken(session, clock.now, 10.0, lambda queue: 0) == 0
    clock.now += timedelta(seconds=11)
    step(ctx)
    attempt = generate_attempt(db_factory)
    assert attempt.state == "dispatched" and attempt.tries == 1


def test_an_expiry_looks_only_at_leases_that_ended_since_the_last_one(
        db_factory: sessionmaker[Session]) -> None:
    ctx, _, clock = one_held_pull(db_factory, lease_s=60, max_tries=3)
    ends = as_utc(generate_attempt(db_factory).lease_expires_at)  # type: ignore[arg-type]
    later = ends + timedelta(seconds=30)
    with fenced(ctx) as session:  # the last look was after it ended: it was seen then
        assert expire_leases(session, later, 3, 60, since=ends + timedelta(seconds=1)) == 0
    with fenced(ctx) as session:
        assert expire_leases(session, later, 3, 60, since=ends) == 1
    assert generate_attempt(db_factory).state == "expired"


def test_steps_expire_a_lease_that_ends_between_them_and_after_the_clock_is_set_back(
        db_factory: sessionmaker[Session]) -> None:
    ctx, dispatcher, clock = one_held_pull(db_factory, lease_s=60, max_tries=3)
    assert ctx.leases_seen_to == clock.now  # each step's housekeeping looked
    clock.now += timedelta(seconds=61)
    assert step(ctx).expired == 1
    # The clock ran an hour ahead at the last look and is set back: leases written since end
    # before that look, so the next one reads them all.
    ctx.leases_seen_to = clock.now + timedelta(hours=1)
    clock.now += timedelta(seconds=61)
    assert step(ctx).expired == 1
    assert generate_attempt(db_factory).tries == 3  # sent a second and a third time
    assert ctx.leases_seen_to == clock.now
