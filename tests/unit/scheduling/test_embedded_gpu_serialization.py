"""The embedded dispatcher's pools: `gpu_tasks` tasks at once per GPU queue (as a GPU node's
`celery -c <gpu_tasks_per_device>` runs them), and the llm and cpu queues on a pool of their own."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kernelband.scheduling.dispatch import EmbeddedDispatcher, TaskMessage, TaskResult


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


def _finals(dispatcher: EmbeddedDispatcher, count: int) -> dict[int, dict[str, Any]]:
    """The first `count` results (heartbeats left out), by attempt id; 10 s at most."""
    results: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 10
    while len(results) < count and time.monotonic() < deadline:
        items: list[TaskResult] = dispatcher.drain(timeout_s=0.2)
        results.update((r.attempt_id, r.result) for r in items if not r.result.get("heartbeat"))
    return results


def _run_four(queue: str, gpu_tasks: int = 1) -> list[int]:
    body, peaks = _recorder()
    dispatcher = EmbeddedDispatcher(max_workers=4, functions={"profile": body},
                                    gpu_tasks=gpu_tasks)
    try:
        for attempt_id in range(4):
            dispatcher.submit(TaskMessage(attempt_id, "profile", queue, {}))
        assert sorted(_finals(dispatcher, 4)) == [0, 1, 2, 3]
    finally:
        dispatcher.close()
    return peaks


def test_profiles_on_one_gpu_queue_never_overlap_with_one_gpu_task() -> None:
    assert max(_run_four("gpu.h100")) == 1
    assert max(_run_four("gpu.h100", gpu_tasks=1)) == 1


def test_cpu_queue_tasks_run_in_parallel() -> None:
    assert max(_run_four("cpu")) > 1


def test_three_gpu_tasks_run_at_once() -> None:
    # each body passes the barrier only once all three are inside their task at the same time
    barrier = threading.Barrier(3, timeout=5)

    def body(payload: dict[str, Any]) -> dict[str, Any]:
        barrier.wait()
        return {"ok": True}

    dispatcher = EmbeddedDispatcher(max_workers=1, functions={"profile": body}, gpu_tasks=3)
    try:
        for attempt_id in range(3):
            dispatcher.submit(TaskMessage(attempt_id, "profile", "gpu.h100", {}))
        results = _finals(dispatcher, 3)
    finally:
        dispatcher.close()
    assert {a: r.get("ok") for a, r in results.items()} == {0: True, 1: True, 2: True}


def test_a_gpu_task_never_holds_up_a_compile_or_another_gpu() -> None:
    gate = threading.Event()

    def blocked(payload: dict[str, Any]) -> dict[str, Any]:
        gate.wait(10)
        return {"ok": True, "released": gate.is_set()}

    def quick(payload: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "while_blocked": not gate.is_set()}

    # one thread for the cpu queue and one per GPU queue: a shared pool would run them in turn
    dispatcher = EmbeddedDispatcher(max_workers=1, gpu_tasks=1,
                                    functions={"profile": blocked, "compile": quick,
                                               "verify": quick})
    try:
        dispatcher.submit(TaskMessage(1, "profile", "gpu.h100", {}))
        dispatcher.submit(TaskMessage(2, "compile", "cpu", {}))
        dispatcher.submit(TaskMessage(3, "verify", "gpu.a100", {}))
        first = _finals(dispatcher, 2)
        assert first == {2: {"ok": True, "while_blocked": True},
                         3: {"ok": True, "while_blocked": True}}
        gate.set()
        assert _finals(dispatcher, 1) == {1: {"ok": True, "released": True}}
        assert dispatcher.waiting("gpu.h100") == 0 and dispatcher.waiting("cpu") == 0
    finally:
        gate.set()
        dispatcher.close()


def test_close_shuts_every_pool_and_gpu_tasks_must_be_positive() -> None:
    dispatcher = EmbeddedDispatcher(max_workers=1, functions={"profile": lambda p: {"ok": True}})
    dispatcher.submit(TaskMessage(1, "profile", "gpu.h100", {}))
    assert _finals(dispatcher, 1) == {1: {"ok": True}}
    dispatcher.close()
    for queue in ("gpu.h100", "gpu.a100", "cpu"):
        with pytest.raises(RuntimeError, match="after shutdown"):
            dispatcher.submit(TaskMessage(2, "profile", queue, {}))
    with pytest.raises(ValueError, match="gpu_tasks must be at least 1"):
        EmbeddedDispatcher(gpu_tasks=0)


def test_a_gpu_queue_takes_a_waiting_candidate_before_an_originals_baseline() -> None:
    gate, order = threading.Event(), []

    def body(payload: dict[str, Any]) -> dict[str, Any]:
        order.append(payload["name"])
        gate.wait(10)
        return {"ok": True}

    dispatcher = EmbeddedDispatcher(max_workers=1, functions={"profile": body}, gpu_tasks=1)
    try:
        dispatcher.submit(TaskMessage(1, "profile", "gpu.h100", {"name": "baseline-1", "original": True}))
        deadline = time.monotonic() + 5
        while not order and time.monotonic() < deadline:
            time.sleep(0.005)
        dispatcher.submit(TaskMessage(2, "profile", "gpu.h100", {"name": "baseline-2", "original": True}))
        dispatcher.submit(TaskMessage(3, "profile", "gpu.h100", {"name": "candidate"}))
        gate.set()
        assert sorted(_finals(dispatcher, 3)) == [1, 2, 3]
    finally:
        gate.set()
        dispatcher.close()
    assert order == ["baseline-1", "candidate", "baseline-2"]
