"""A gone worker's tries are sent again at once, never a try another worker now holds, and a
late result of the old try still applies at most once."""

from __future__ import annotations

from scheduling_fakes import FAKE_TASKS, make_job
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt, Event
from kernelband.db.session import session_scope
from kernelband.scheduling.dispatch import InboxDispatcher, TaskMessage, TaskResult
from kernelband.scheduling.leases import resend_tries
from kernelband.scheduling.pipeline import (
    EngineContext,
    dispatch_pending,
    fenced,
    ingest_batch,
    step,
)


class Holding(InboxDispatcher):
    """Keeps every task, as a queue whose worker took it and went silent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[TaskMessage] = []

    def submit(self, task: TaskMessage) -> str:
        self.sent.append(task)
        return task.task_id


def test_a_gone_workers_try_is_sent_again_once_and_its_late_result_counts_once(
        db_factory: sessionmaker[Session]) -> None:
    dispatcher = Holding()
    ctx = EngineContext(db_factory, dispatcher, Settings())
    make_job(db_factory, budget_iterations=1, parallelism=1)
    step(ctx)  # the baseline profile attempt goes out and stays with its worker
    (held,) = dispatcher.sent
    with fenced(ctx) as session:
        assert resend_tries(session, {held.attempt_id: "another-try"}, 3, "worker gone") == []
        given_up = resend_tries(session, {held.attempt_id: held.task_id}, 3, "worker gone")
    assert given_up == [held.task_id]
    assert dispatch_pending(ctx) == 1
    again = dispatcher.sent[-1]
    assert again.attempt_id == held.attempt_id and again.task_id != held.task_id
    with fenced(ctx) as session:  # the new try's worker is alive: nothing to send again
        assert resend_tries(session, {held.attempt_id: held.task_id}, 3, "worker gone") == []
    result = FAKE_TASKS["profile"](held.payload)
    assert ingest_batch(ctx, [TaskResult(again.attempt_id, result)]) == (1, 0)
    assert ingest_batch(ctx, [TaskResult(held.attempt_id, result)]) == (0, 1)  # the old try, late
    with session_scope(db_factory) as session:
        attempt = session.get_one(Attempt, held.attempt_id)
        retries = session.scalars(select(Event.payload).where(Event.kind == "attempt_retry")).all()
        assert attempt.state == "done" and attempt.tries == 2
        assert [p["attempt"] for p in retries] == [held.attempt_id]

