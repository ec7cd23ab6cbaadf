"""The task wrapper heartbeats an attempt's lease through a real Redis results queue."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kernelband.config import Settings
from kernelband.scheduling.dispatch import TaskResult
from services.scheduler.dispatcher import CeleryDispatcher
from services.worker import tasks
from services.worker.app import make_app


@pytest.fixture
def broker(redis_url: str) -> str:
    """The test's own Redis database (see tests/conftest.py)."""
    return redis_url


@pytest.fixture
def dispatcher(broker: str) -> Iterator[CeleryDispatcher]:
    scheduler_side = CeleryDispatcher(Settings(broker_url=broker))
    yield scheduler_side
    scheduler_side.close()


def slow_body(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(payload["sleep_s"]))
    return {"ok": True, "value": 42}


def run_wrapper(monkeypatch: pytest.MonkeyPatch, broker: str, sleep_s: float) -> None:
    """Run `execute` as a worker would, with a slow body and a 0.1 s heartbeat interval."""
    monkeypatch.setattr(tasks, "task_body", lambda kind: slow_body)
    monkeypatch.setattr(tasks, "heartbeat_interval_s", lambda: 0.1)
    worker_task = SimpleNamespace(request=SimpleNamespace(hostname="w1@test"),
                                  app=make_app(Settings(broker_url=broker)))
    message = {"attempt_id": 7, "kind": "profile", "task_id": "kb-7-2",
               "payload": {"sleep_s": sleep_s}}
    tasks.execute(worker_task, "profile", message)  # type: ignore[arg-type]


def drain_all(dispatcher: CeleryDispatcher) -> list[TaskResult]:
    results = dispatcher.drain(timeout_s=2.0)
    dispatcher.ack_drained()
    return results


def test_heartbeats_precede_the_one_final_result(dispatcher: CeleryDispatcher, broker: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run_wrapper(monkeypatch, broker, sleep_s=0.45)
    results = drain_all(dispatcher)
    assert all(r.attempt_id == 7 for r in results)
    beats = [r.result for r in results if r.result.get("heartbeat")]
    finals = [r.result for r in results if not r.result.get("heartbeat")]
    assert len(beats) >= 3  # one on start, then about every 0.1 s of the 0.45 s body
    assert all(b["task_id"] == "kb-7-2" for b in beats)
    assert len(finals) == 1 and finals[0]["value"] == 42 and finals[0]["_worker"]["name"] == "w1@test"
    assert not results[-1].result.get("heartbeat")  # the thread stops before the result goes


def test_a_quick_task_sends_one_start_beat(dispatcher: CeleryDispatcher, broker: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run_wrapper(monkeypatch, broker, sleep_s=0.0)
    results = drain_all(dispatcher)
    assert [bool(r.result.get("heartbeat")) for r in results] == [True, False]
    time.sleep(0.25)  # no beat may follow once the task has answered
    assert dispatcher.drain(timeout_s=0.0) == []
