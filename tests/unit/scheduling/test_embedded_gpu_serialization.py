"""The embedded dispatcher runs one task at a time per GPU queue, as `celery -c 1` does per GPU."""

from __future__ import annotations

import threading
import time
from typing import Any

from kernelband.scheduling.dispatch import EmbeddedDispatcher, TaskMessage


def _recorder() -> tuple[Any, list[int]]:
    running = [0]
    peaks: list[int] = []
    lock = threading.Lock()

    def body(payload: dict[str, Any]) -> dict[str, Any]:
        with lock:
            running[0] += 1
            peaks.append(running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return {"ok": True}

    return body, peaks


def _run_four(queue: str) -> list[int]:
    body, peaks = _recorder()
    dispatcher = EmbeddedDispatcher(max_workers=4, functions={"profile": body})
    try:
        for attempt_id in range(4):
            dispatcher.submit(TaskMessage(attempt_id, "profile", queue, {}))
        results = []
        deadline = time.monotonic() + 10
        while len(results) < 4 and time.monotonic() < deadline:
            results += dispatcher.drain(timeout_s=0.2)
        assert sorted(r.attempt_id for r in results) == [0, 1, 2, 3]
    finally:
        dispatcher.close()
    return peaks


def test_profiles_on_one_gpu_queue_never_overlap() -> None:
    assert max(_run_four("gpu.h100")) == 1


def test_cpu_queue_tasks_run_in_parallel() -> None:
    assert max(_run_four("cpu")) > 1
