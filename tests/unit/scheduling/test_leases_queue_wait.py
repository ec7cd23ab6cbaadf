"""Queue time is not lost time: an untaken try in a busy queue keeps its place, no re-send."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from scheduling_fakes import make_job
from sqlalchemy.orm import Session, sessionmaker
from test_leases import Clock, HeldGenerates, generate_attempt

from kernelband.config import Settings
from kernelband.scheduling.dispatch import EmbeddedDispatcher, TaskMessage
from kernelband.scheduling.pipeline import EngineContext, step


class Backlog(HeldGenerates):
    """Held generate tasks sit in a queue whose depth the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.depth: int | None = 5

    def waiting(self, queue: str) -> int | None:
        return self.depth if queue == "llm" else 0


def started(settings: Settings, factory: sessionmaker[Session]) -> tuple[Backlog, Clock, EngineContext]:
    make_job(factory, budget_iterations=1)
    dispatcher, clock = Backlog(), Clock()
    ctx = EngineContext(factory, dispatcher, settings, clock=clock)
    step(ctx)
    step(ctx)  # the baseline is measured and the pull's generate waits in the llm queue
    assert len(dispatcher.held) == 1
    return dispatcher, clock, ctx


def test_a_waiting_try_keeps_its_lease_without_a_resend(db_factory: sessionmaker[Session]) -> None:
    dispatcher, clock, ctx = started(Settings(lease_s=60, max_tries=2), db_factory)
    for _ in range(10):  # 10 lease periods of plain waiting: more than max_tries would allow
        clock.now += timedelta(seconds=61)
        assert step(ctx).expired == 0
    attempt = generate_attempt(db_factory)
    assert (attempt.state, attempt.tries, attempt.started_at) == ("dispatched", 1, None)
    assert len(dispatcher.held) == 1  # nothing sent twice
    task = dispatcher.held[0]
    dispatcher.deliver(task.attempt_id, {"heartbeat": True, "task_id": task.task_id})
    step(ctx)  # a worker took it: from now on the lease measures its run
    assert generate_attempt(db_factory).started_at is not None
    clock.now += timedelta(seconds=61)  # ... and that worker went silent
    assert step(ctx).expired == 1
    attempt = generate_attempt(db_factory)
    assert (attempt.state, attempt.tries, attempt.started_at) == ("dispatched", 2, None)
    assert len(dispatcher.held) == 2


def test_an_empty_queue_or_unknown_depth_means_the_try_was_lost(
        db_factory: sessionmaker[Session]) -> None:
    dispatcher, clock, ctx = started(Settings(lease_s=60, max_tries=3), db_factory)
    dispatcher.depth = 0  # nothing waits, nobody beat: the message is gone
    clock.now += timedelta(seconds=61)
    assert step(ctx).expired == 1 and len(dispatcher.held) == 2
    dispatcher.depth = None  # the broker cannot say
    clock.now += timedelta(seconds=61)
    assert step(ctx).expired == 1 and len(dispatcher.held) == 3


def test_waiting_longer_than_the_queue_timeout_is_resent(db_factory: sessionmaker[Session]) -> None:
    settings = Settings(lease_s=60, max_tries=3, queue_timeout_s=150)
    dispatcher, clock, ctx = started(settings, db_factory)
    expired = []
    for _ in range(4):
        clock.now += timedelta(seconds=61)
        expired.append(step(ctx).expired)
    assert expired == [0, 0, 1, 0]  # renewed at 61 s and 122 s, re-sent at 183 s (> 150 s)
    assert generate_attempt(db_factory).tries == 2


def test_embedded_dispatcher_counts_waiting_tasks_and_beats_on_start() -> None:
    gate = threading.Event()

    def blocked(payload: dict) -> dict:
        gate.wait(10)
        return {"ok": True}

    dispatcher = EmbeddedDispatcher(max_workers=1, functions={"generate": blocked})
    try:
        for attempt_id in (1, 2, 3):
            dispatcher.submit(TaskMessage(attempt_id, "generate", "llm", {}, f"kb-{attempt_id}-1"))
        deadline = time.monotonic() + 10
        while dispatcher.waiting("llm") != 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dispatcher.waiting("llm") == 2 and dispatcher.waiting("cpu") == 0
        (beat,) = dispatcher.drain(timeout_s=5)
        assert beat.attempt_id == 1 and beat.result == {"heartbeat": True, "task_id": "kb-1-1"}
        gate.set()
        results = []
        while len(results) < 5 and time.monotonic() < deadline:
            results += dispatcher.drain(timeout_s=1)
        assert dispatcher.waiting("llm") == 0
        finals = sorted(r.attempt_id for r in results if not r.result.get("heartbeat"))
        assert finals == [1, 2, 3]
    finally:
        gate.set()
        dispatcher.close()
