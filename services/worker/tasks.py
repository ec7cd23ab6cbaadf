"""Celery task wrappers: run a kernelband.scheduling.tasks body and send its result to the scheduler.

Each task takes the whole message (attempt id, kind, payload) and returns nothing: the result
goes back on the `results` queue, never through the Celery result backend.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from kernelband.config import get_settings
from kernelband.scheduling.dispatch import TaskFunction, task_error_result, task_function
from services.worker import messages
from services.worker.app import TIME_LIMITS, app

log = logging.getLogger(__name__)

# Only broker trouble while sending the result is worth a retry; a failing task body answers
# the attempt with a reason instead, because re-running it would fail the same way.
RETRYABLE = (KombuOperationalError, RedisConnectionError, ConnectionError)
TASK_NAMES: dict[str, str] = {kind: f"kernelband.{kind}" for kind in TIME_LIMITS}


def task_body(kind: str) -> TaskFunction:
    """The kernelband.scheduling.tasks function for `kind`, imported here (in the pool child, not the parent)."""
    return task_function(kind)


def run_body(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run the body; a timeout or a bug becomes a failed result with a reason."""
    try:
        return task_body(kind)(payload)
    except SoftTimeLimitExceeded:
        soft = TIME_LIMITS[kind][0]
        return {"ok": False, "reason": "timeout:task_soft_limit",
                "message": f"{kind} task exceeded its {soft}s soft time limit"}
    except Exception as exc:  # every attempt must get an answer, even from a buggy body
        log.exception("%s task body failed", kind)
        return task_error_result(kind, exc)


def execute(task: Task, kind: str, message: dict[str, Any]) -> None:
    """Run one attempt, heartbeating its lease meanwhile, and publish its result message."""
    started = time.monotonic()
    attempt_id = int(message["attempt_id"])
    worker = str(task.request.hostname or socket.gethostname())

    def send(result: dict[str, Any]) -> None:
        reply = messages.ResultMessage(attempt_id=attempt_id, kind=kind, result=result,
                                       worker=worker, wall_s=round(time.monotonic() - started, 4))
        with task.app.connection_for_write() as connection:
            messages.publish(connection, reply)

    beat = {"heartbeat": True, "task_id": str(message.get("task_id") or "")}
    with lease_heartbeats(lambda: send(beat), heartbeat_interval_s()):
        result = run_body(kind, dict(message.get("payload", {})))
    send(result)


def heartbeat_interval_s() -> float:
    """A third of the scheduler's lease, so two lost beats still leave the lease alive."""
    return max(get_settings().lease_s / 3.0, 1.0)


@contextmanager
def lease_heartbeats(beat: Callable[[], None], interval_s: float) -> Iterator[None]:
    """Beat once now (the task left the queue), then every `interval_s` until the body ends."""
    stop = threading.Event()

    def safe_beat() -> None:
        try:
            beat()
        except Exception as exc:  # a missed beat only risks a re-send; the task goes on
            log.warning("lease heartbeat not sent: %s", exc)

    def loop() -> None:
        while not stop.wait(interval_s):
            safe_beat()

    safe_beat()
    thread = threading.Thread(target=loop, name="kb-lease-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5.0)


def _register(kind: str) -> Task:
    soft, hard = TIME_LIMITS[kind]

    @app.task(name=TASK_NAMES[kind], bind=True, soft_time_limit=soft, time_limit=hard,
              autoretry_for=RETRYABLE, retry_backoff=True, retry_backoff_max=60,
              max_retries=5, acks_late=True, reject_on_worker_lost=True)
    def run_attempt(self: Task, message: dict[str, Any]) -> None:
        execute(self, kind, message)

    return run_attempt  # type: ignore[no-any-return]


generate = _register("generate")
compile_task = _register("compile")
profile = _register("profile")
verify = _register("verify")
