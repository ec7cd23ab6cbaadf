"""The task wrapper heartbeats an attempt's lease through a real Redis results queue."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from kernelband.config import Settings
from kernelband.scheduling.dispatch import TaskResult
from services.scheduler.dispatcher import CeleryDispatcher
from services.worker import tasks
from services.worker.app import make_app

BROKER = "redis://127.0.0.1:6379/12"  # a database of its own: other tests use 3 and 14


@pytest.fixture
def dispatcher() -> Iterator[CeleryDispatcher]:
    client = redis.Redis.from_url(BROKER)
    try:
        client.flushdb()
    except redis.exceptions.ConnectionError:
        pytest.skip("Redis is not running on 127.0.0.1:6379; start it to run this test")
    scheduler_side = CeleryDispatcher(Settings(broker_url=BROKER))
    yield scheduler_side
    scheduler_side.close()
    client.flushdb()


def slow_body(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(payload["sleep_s"]))
    return {"ok": True, "value": 42}


def run_wrapper(monkeypatch: pytest.MonkeyPatch, sleep_s: float) -> None:
    """Run `execute` as a worker would, with a slow body and a 0.1 s heartbeat interval."""
    monkeypatch.setattr(tasks, "task_body", lambda kind: slow_body)
    monkeypatch.setattr(tasks, "heartbeat_interval_s", lambda: 0.1)
    worker_task = SimpleNamespace(request=SimpleNamespace(hostname="w1@test"),
                                  app=make_app(Settings(broker_url=BROKER)))
    message = {"attempt_id": 7, "kind": "profile", "task_id": "kb-7-2",
               "payload": {"sleep_s": sleep_s}}
    tasks.execute(worker_task, "profile", message)  # type: ignore[arg-type]


def drain_all(dispatcher: CeleryDispatcher) -> list[TaskResult]:
    results = dispatcher.drain(timeout_s=2.0)
    dispatcher.ack_drained()
    return results


def test_heartbeats_precede_the_one_final_result(dispatcher: CeleryDispatcher,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run_wrapper(monkeypatch, sleep_s=0.45)
    results = drain_all(dispatcher)
    assert all(r.attempt_id == 7 for r in results)
    beats = [r.result for r in results if r.result.get("heartbeat")]
    finals = [r.result for r in results if not r.result.get("heartbeat")]
    assert len(beats) >= 3  # one on start, then about every 0.1 s of the 0.45 s body
    assert all(b["task_id"] == "kb-7-2" for b in beats)
    assert len(finals) == 1 and finals[0]["value"] == 42 and finals[0]["_worker"]["name"] == "w1@test"
    assert not results[-1].result.get("heartbeat")  # the thread stops before the result goes


def test_a_quick_task_sends_one_start_beat(dispatcher: CeleryDispatcher,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run_wrapper(monkeypatch, sleep_s=0.0)
    results = drain_all(dispatcher)
    assert [bool(r.result.get("heartbeat")) for r in results] == [True, False]
    time.sleep(0.25)  # no beat may follow once the task has answered
    assert dispatcher.drain(timeout_s=0.0) == []
