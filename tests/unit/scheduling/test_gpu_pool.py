"""A GPU queue's pool in the embedded dispatcher: candidates before originals' baselines, one
slot kept for candidates, a baseline's patience, every task run, nothing taken after shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from kernelband.scheduling.gpu_pool import BASELINE, CANDIDATE, GpuQueuePool, urgency


def _until(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


class _Log:
    """Tasks that note when they start and hold until released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.done: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def task(self, name: str, hold: bool = False) -> Callable[[], None]:
        gate = self.gates.setdefault(name, threading.Event())
        if not hold:
            gate.set()

        def work() -> None:
            with self._lock:
                self.started.append(name)
            gate.wait(10)
            with self._lock:
                self.done.append(name)
        return work


def test_a_waiting_candidate_starts_before_baselines_queued_earlier() -> None:
    log, pool = _Log(), GpuQueuePool(1, "gpu.test")
    try:
        pool.submit(BASELINE, log.task("b1", hold=True))
        assert _until(lambda: log.started == ["b1"])
        for level, name in ((BASELINE, "b2"), (CANDIDATE, "c1"), (BASELINE, "b3"), (CANDIDATE, "c2")):
            pool.submit(level, log.task(name))
        log.gates["b1"].set()
        assert _until(lambda: len(log.done) == 5)
        assert log.started == ["b1", "c1", "c2", "b2", "b3"]
    finally:
        pool.shutdown()


def test_one_slot_of_three_stays_for_candidates() -> None:
    log, pool = _Log(), GpuQueuePool(3, "gpu.test")
    try:
        for name in ("b1", "b2", "b3"):
            pool.submit(BASELINE, log.task(name, hold=True))
        assert _until(lambda: len(log.started) == 2)
        time.sleep(0.1)
        assert log.started == ["b1", "b2"]  # the third baseline waits for a baseline place
        pool.submit(CANDIDATE, log.task("c1"))
        assert _until(lambda: "c1" in log.done)  # taken at once, beside two baselines
        assert "b3" not in log.started
        log.gates["b1"].set()
        assert _until(lambda: "b3" in log.started)
    finally:
        for gate in log.gates.values():
            gate.set()
        pool.shutdown()


def test_a_baseline_that_waited_its_patience_goes_before_candidates() -> None:
    log, pool = _Log(), GpuQueuePool(1, "gpu.test", patience_s=0.2)
    try:
        pool.submit(CANDIDATE, log.task("c1", hold=True))
        assert _until(lambda: log.started == ["c1"])
        pool.submit(BASELINE, log.task("b1"))
        pool.submit(CANDIDATE, log.task("c2"))
        time.sleep(0.3)
        log.gates["c1"].set()
        assert _until(lambda: len(log.done) == 3)
        assert log.started == ["c1", "b1", "c2"]
    finally:
        pool.shutdown()


def test_idle_threads_end_and_a_later_task_still_runs() -> None:
    log, pool = _Log(), GpuQueuePool(2, "gpu.test")
    try:
        pool.submit(CANDIDATE, log.task("c1"))
        assert _until(lambda: log.done == ["c1"])
        assert _until(lambda: not [t for t in threading.enumerate() if t.name.startswith("kb-gpu.test")],
                      timeout_s=3.0)
        pool.submit(BASELINE, log.task("b1"))
        assert _until(lambda: log.done == ["c1", "b1"])
    finally:
        pool.shutdown()


def test_shutdown_drops_the_waiting_and_refuses_new_tasks() -> None:
    log, pool = _Log(), GpuQueuePool(1, "gpu.test")
    pool.submit(CANDIDATE, log.task("c1", hold=True))
    assert _until(lambda: log.started == ["c1"])
    pool.submit(CANDIDATE, log.task("c2"))
    pool.shutdown()
    log.gates["c1"].set()
    assert _until(lambda: log.done == ["c1"])
    time.sleep(0.1)
    assert log.started == ["c1"] and pool.waiting() == 0
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(CANDIDATE, log.task("c3"))
    with pytest.raises(ValueError, match="at least 1 slot"):
        GpuQueuePool(0, "gpu.test")


def test_only_an_originals_baseline_waits_behind_candidates() -> None:
    assert urgency({"original": True}) == BASELINE
    assert urgency({}) == urgency({"original": False}) == urgency({"editable": "x"}) == CANDIDATE
