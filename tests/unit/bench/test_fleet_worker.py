"""The simulated fleet answers with the entries a real worker's publish leaves in Redis."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection

from bench.fleet_worker import answer_all
from bench.sim_tasks import sim_compile
from services.scheduler.dispatcher import results_connection
from services.worker.messages import RESULTS, ResultMessage, parse_message, publish
from services.worker.queues import RESULTS_QUEUE
from tests.utils.processes import redis_db_url


@pytest.fixture
def broker() -> Iterator[str]:
    with redis_db_url() as url:
        yield url


def _entries(client: redis.Redis) -> list[dict]:
    return [json.loads(raw) for raw in client.lrange(RESULTS_QUEUE, 0, -1)]


def _body(entry: dict) -> dict:
    assert entry["properties"]["body_encoding"] == "base64"
    return dict(json.loads(base64.b64decode(entry["body"])))


def test_a_simulated_answer_is_the_entry_kombu_writes_for_a_published_result(broker: str) -> None:
    client = redis.Redis.from_url(broker)
    with Connection(broker) as connection:
        RESULTS(connection.default_channel).declare()
        publish(connection, ResultMessage(attempt_id=7, kind="compile", result=sim_compile({}),
                                          worker="simulated", wall_s=0.0))
    answer_all(client, [({"attempt_id": 7, "kind": "compile", "payload": {}}, 0.0)])
    kombu_entry, ours = _entries(client)[::-1]
    for entry in (kombu_entry, ours):
        entry["properties"].pop("delivery_tag")
    kombu_body, our_body = _body(kombu_entry), _body(ours)
    assert abs(kombu_body.pop("sent_at") - our_body.pop("sent_at")) < 60
    assert our_body == kombu_body
    kombu_entry.pop("body"), ours.pop("body")
    assert ours == kombu_entry
    client.close()


def test_the_scheduler_reads_the_simulated_answers(broker: str) -> None:
    client = redis.Redis.from_url(broker)
    answer_all(client, [({"attempt_id": i, "kind": "compile", "payload": {}}, 0.5)
                        for i in range(3)])
    with results_connection(broker) as connection:
        queue = RESULTS(connection.default_channel)
        queue.declare()
        seen = []
        while (message := queue.get()) is not None:
            seen.append(parse_message(message.decode()))
            message.ack()
    assert sorted(m.attempt_id for m in seen) == [0, 1, 2]  # type: ignore[union-attr]
    assert {m.wall_s for m in seen} == {0.5}  # type: ignore[union-attr]
    client.close()
