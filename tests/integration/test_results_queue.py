"""The results queue read and acknowledged in bulk, in kombu's own unacked bookkeeping."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from kernelband.config import Settings
from kernelband.scheduling.dispatch import TaskMessage
from services.scheduler.dispatcher import RESULTS_UNACKED_KEYS, CeleryDispatcher
from services.worker.messages import ResultMessage, publish
from services.worker.queues import RESULTS_QUEUE

pytestmark = pytest.mark.integration
UNACKED, INDEX = RESULTS_UNACKED_KEYS["unacked_key"], RESULTS_UNACKED_KEYS["unacked_index_key"]


@pytest.fixture
def client(broker_url: str) -> Iterator[redis.Redis]:
    made = redis.Redis.from_url(broker_url)
    made.delete(RESULTS_QUEUE, *RESULTS_UNACKED_KEYS.values())
    yield made
    made.delete(RESULTS_QUEUE, *RESULTS_UNACKED_KEYS.values())
    made.close()


def send_results(dispatcher: CeleryDispatcher, attempt_ids: range) -> None:
    with dispatcher._app.connection_for_write() as connection:
        for attempt_id in attempt_ids:
            publish(connection, ResultMessage(attempt_id=attempt_id, kind="compile",
                                              result={"ok": True}))


def test_drained_results_stay_unacknowledged_until_acked_in_one_call(
        dispatcher_settings: Settings, client: redis.Redis) -> None:
    dispatcher = CeleryDispatcher(dispatcher_settings)
    try:
        send_results(dispatcher, range(1, 8))
        drained = dispatcher.drain(timeout_s=5)
        assert [r.attempt_id for r in drained] == list(range(1, 8))  # in the order sent
        assert client.llen(RESULTS_QUEUE) == 0
        assert client.zcard(INDEX) == client.hlen(UNACKED) == 7  # kombu's format, per delivery
        message, exchange, routing_key = json.loads(next(iter(client.hvals(UNACKED))))
        assert (exchange, routing_key) == (RESULTS_QUEUE, RESULTS_QUEUE)
        assert message["properties"]["delivery_tag"] in {
            tag.decode() for tag in client.hkeys(UNACKED)}
        dispatcher.ack(drained[:3])
        assert client.zcard(INDEX) == client.hlen(UNACKED) == 4
        assert dispatcher.ack_drained() == 4
        assert client.zcard(INDEX) == client.hlen(UNACKED) == 0
    finally:
        dispatcher.close()


def test_a_drain_takes_at_most_max_items_and_leaves_the_rest_queued(
        dispatcher_settings: Settings, client: redis.Redis) -> None:
    dispatcher = CeleryDispatcher(dispatcher_settings)
    try:
        send_results(dispatcher, range(10, 15))
        assert [r.attempt_id for r in dispatcher.drain(max_items=2)] == [10, 11]
        assert client.llen(RESULTS_QUEUE) == 3 and client.hlen(UNACKED) == 2
        assert [r.attempt_id for r in dispatcher.drain()] == [12, 13, 14]
        dispatcher.ack_drained()
        assert dispatcher.drain(timeout_s=0.1) == []
    finally:
        dispatcher.close()


def test_results_drained_but_not_acknowledged_go_back_when_the_dispatcher_closes(
        dispatcher_settings: Settings, client: redis.Redis) -> None:
    dispatcher = CeleryDispatcher(dispatcher_settings)
    send_results(dispatcher, range(20, 23))
    assert len(dispatcher.drain(timeout_s=5)) == 3
    dispatcher.close()  # a step failed or the leader stopped: nothing was committed
    assert client.llen(RESULTS_QUEUE) == 3 and client.hlen(UNACKED) == 0
    successor = CeleryDispatcher(dispatcher_settings)
    try:
        assert sorted(r.attempt_id for r in successor.drain(timeout_s=5)) == [20, 21, 22]
        successor.ack_drained()
    finally:
        successor.close()


def test_submit_many_sends_every_attempt_in_order(
        dispatcher_settings: Settings, client: redis.Redis) -> None:
    """gpu.a100 has no consumer in this run: the sent tasks wait there, oldest first."""
    client.delete("gpu.a100")
    dispatcher = CeleryDispatcher(dispatcher_settings)
    try:
        tasks = [TaskMessage(i, "profile", "gpu.a100", {}, f"kb-{i}-1") for i in range(30, 36)]
        assert dispatcher.submit_many(tasks) == 0
        assert dispatcher.waiting("gpu.a100") == 6
        queued = [json.loads(raw)["headers"]["id"] for raw in client.lrange("gpu.a100", 0, -1)]
        assert queued[::-1] == [task.task_id for task in tasks]  # LPUSH: the oldest at the right
        assert dispatcher.submitted == {"profile": 6}
    finally:
        client.delete("gpu.a100")
        dispatcher.close()
