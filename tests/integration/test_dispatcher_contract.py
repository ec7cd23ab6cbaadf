"""One contract, every dispatcher: the embedded thread pool and Celery over real Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from kernelband.config import Settings
from kernelband.scheduling.dispatch import Dispatcher, EmbeddedDispatcher, TaskMessage, TaskResult
from services.scheduler.dispatcher import RESULTS_UNACKED_KEYS, CeleryDispatcher
from services.worker.messages import ResultMessage, publish
from services.worker.queues import RESULTS_QUEUE

pytestmark = pytest.mark.integration
# An empty payload makes every task body fail fast and deterministically: the transport,
# not the kernel work, is under test here.
def broken(attempt_id: int) -> TaskMessage:
    return TaskMessage(attempt_id=attempt_id, kind="compile", queue="cpu", payload={})


@pytest.fixture(params=["embedded", "celery"])
def dispatcher(request: pytest.FixtureRequest, dispatcher_settings: Settings,
               broker_url: str) -> Iterator[Dispatcher]:
    if request.param == "embedded":
        made: Dispatcher = EmbeddedDispatcher(max_workers=2)
    else:
        request.getfixturevalue("workers")  # real worker processes consume the cpu queue
        redis.Redis.from_url(broker_url).delete(RESULTS_QUEUE, *RESULTS_UNACKED_KEYS.values())
        made = CeleryDispatcher(dispatcher_settings)
    yield made
    made.close()


def collect(dispatcher: Dispatcher, count: int, timeout_s: float = 60.0) -> list[TaskResult]:
    """Final results only: lease heartbeats ({"heartbeat": True}) may come first from a worker."""
    results: list[TaskResult] = []
    deadline = time.monotonic() + timeout_s
    while len(results) < count and time.monotonic() < deadline:
        drained = dispatcher.drain(timeout_s=0.5)
        ack = getattr(dispatcher, "ack", None)
        if ack is not None:
            ack(drained)
        results += [r for r in drained if not r.result.get("heartbeat")]
    return results


def test_a_submitted_task_comes_back_once_with_its_attempt_id(dispatcher: Dispatcher) -> None:
    task_id = dispatcher.submit(broken(101))
    assert isinstance(task_id, str) and task_id
    (result,) = collect(dispatcher, 1)
    assert result.attempt_id == 101
    assert result.result["ok"] is False and result.result["reason"]  # a reason, never silence
    assert collect(dispatcher, 1, timeout_s=1.0) == []


def test_drain_waits_at_most_its_timeout_when_idle(dispatcher: Dispatcher) -> None:
    started = time.monotonic()
    assert dispatcher.drain(timeout_s=0.3) == []
    assert time.monotonic() - started < 10.0  # returns, does not block on an empty queue


def test_many_tasks_all_come_back(dispatcher: Dispatcher) -> None:
    for attempt_id in range(200, 206):
        dispatcher.submit(broken(attempt_id))
    results = collect(dispatcher, 6)
    assert sorted(r.attempt_id for r in results) == list(range(200, 206))


def test_many_tasks_sent_together_all_come_back(dispatcher: Dispatcher) -> None:
    assert dispatcher.submit_many([broken(attempt_id) for attempt_id in range(300, 306)]) == 0
    results = collect(dispatcher, 6)
    assert sorted(r.attempt_id for r in results) == list(range(300, 306))


def test_an_unknown_queue_is_refused(dispatcher_settings: Settings) -> None:
    dispatcher = CeleryDispatcher(dispatcher_settings)
    try:
        with pytest.raises(Exception, match="gpu.nope"):
            dispatcher.submit(TaskMessage(1, "profile", "gpu.nope", {}))
    finally:
        dispatcher.close()


def test_unacknowledged_results_survive_a_scheduler_crash(
        dispatcher_settings: Settings, broker_url: str) -> None:
    client = redis.Redis.from_url(broker_url)
    client.delete(RESULTS_QUEUE, *RESULTS_UNACKED_KEYS.values())
    crashed = CeleryDispatcher(dispatcher_settings)
    with crashed._app.connection_for_write() as connection:
        publish(connection, ResultMessage(attempt_id=77, kind="compile", result={"ok": True}))
    assert [r.attempt_id for r in crashed.drain(timeout_s=5)] == [77]
    # The process "dies" here: no ack, no close. A new leader recovers the result at takeover.
    successor = CeleryDispatcher(dispatcher_settings)
    assert successor.drain(timeout_s=0.2) == []  # still held by the dead consumer
    assert successor.recover_unacked() == 1
    redelivered = successor.drain(timeout_s=5)
    assert [r.attempt_id for r in redelivered] == [77]
    successor.ack(redelivered)
    assert client.zcard(RESULTS_UNACKED_KEYS["unacked_index_key"]) == 0
    assert client.llen(RESULTS_QUEUE) == 0
    successor.close()
    client.close()



def test_celery_dispatcher_reads_how_many_tasks_wait_in_a_queue(
        dispatcher_settings: Settings, broker_url: str) -> None:
    """No worker of this run consumes gpu.a100: tasks sent there wait, and Redis says how many."""
    client = redis.Redis.from_url(broker_url)
    client.delete("gpu.a100")
    made = CeleryDispatcher(dispatcher_settings)
    try:
        assert made.waiting("gpu.a100") == 0  # an empty queue, not an error
        for attempt_id in (201, 202, 203):
            made.submit(TaskMessage(attempt_id, "profile", "gpu.a100", {}, f"kb-{attempt_id}-1"))
        assert made.waiting("gpu.a100") == 3
    finally:
        client.delete("gpu.a100")
        made.close()
