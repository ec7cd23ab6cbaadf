"""A task written as a Redis entry directly is the message `send_task` writes for it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from kernelband.config import Settings
from kernelband.scheduling.dispatch import TaskMessage
from services.scheduler.dispatcher import CeleryDispatcher
from services.worker.queues import TASK_QUEUES
from services.worker.tasks import TASK_NAMES
from tests.utils.processes import redis_db_url


@pytest.fixture
def broker() -> Iterator[str]:
    with redis_db_url() as url:
        yield url


def _without_tag(raw: bytes | str) -> dict:
    entry = json.loads(raw)
    assert entry["properties"].pop("delivery_tag")
    return dict(entry)


@pytest.mark.parametrize("kind", sorted(TASK_NAMES))
def test_the_direct_entry_equals_what_send_task_writes(broker: str, kind: str) -> None:
    dispatcher = CeleryDispatcher(Settings(broker_url=broker, result_backend_url=broker))
    queue = "gpu.h100" if kind in ("profile", "verify") else TASK_QUEUES[0]
    task = TaskMessage(41, kind, queue, {"editable": "x = 1\n", "turn": 2}, f"kb-41-{kind}")
    try:
        assert dispatcher.submit_many([task, task]) == 0  # the first by send_task, the second direct
        client = redis.Redis.from_url(broker)
        by_send_task, direct = client.lrange(queue, 0, -1)[::-1]
        assert _without_tag(direct) == _without_tag(by_send_task)
        assert dispatcher.submitted == {kind: 2}
        client.close()
    finally:
        dispatcher.close()


def test_a_queue_the_app_does_not_know_is_refused_not_created(broker: str) -> None:
    dispatcher = CeleryDispatcher(Settings(broker_url=broker, result_backend_url=broker))
    task = TaskMessage(1, "compile", "no-such-queue", {}, "kb-1-1")
    try:
        assert dispatcher.submit_many([task, task]) == 2  # left to their leases
        assert not redis.Redis.from_url(broker).exists("no-such-queue")
    finally:
        dispatcher.close()


def test_a_pass_of_tasks_lands_in_each_queue_in_the_order_sent(broker: str) -> None:
    dispatcher = CeleryDispatcher(Settings(broker_url=broker, result_backend_url=broker))
    queues = ("gpu.h100", TASK_QUEUES[0])
    tasks = [TaskMessage(i, "profile" if i % 2 else "compile", queues[i % 2], {"n": i},
                         f"kb-{i}-1") for i in range(8)]
    try:
        assert dispatcher.submit_many(tasks) == 0
        client = redis.Redis.from_url(broker)
        for queue in queues:  # RPOP order (a worker's): oldest first
            taken = [json.loads(raw)["headers"]["id"] for raw in client.lrange(queue, 0, -1)[::-1]]
            assert taken == [task.task_id for task in tasks if task.queue == queue]
        client.close()
    finally:
        dispatcher.close()
