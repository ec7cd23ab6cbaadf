"""The GPU turn: timed rounds exclusive, other GPU work shared, nothing on a CPU device."""

from __future__ import annotations

import threading
import time

import pytest

from kernelband.sandbox.gpu_lock import gpu_turn


@pytest.fixture(autouse=True)
def own_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{time.monotonic_ns()}")


def _holds(exclusive: bool, seconds: float, log: list[tuple[str, float]], name: str) -> None:
    with gpu_turn("cuda", exclusive=exclusive):
        log.append((f"{name}+", time.perf_counter()))
        time.sleep(seconds)
        log.append((f"{name}-", time.perf_counter()))


def test_timed_rounds_wait_for_shared_work_and_shared_work_waits_for_them() -> None:
    log: list[tuple[str, float]] = []
    check = threading.Thread(target=_holds, args=(False, 0.3, log, "check"))
    check.start()
    time.sleep(0.05)
    with gpu_turn("cuda", exclusive=True) as turn:
        log.append(("timed+", time.perf_counter()))
        later = threading.Thread(target=_holds, args=(False, 0.0, log, "later"))
        later.start()
        time.sleep(0.2)
        log.append(("timed-", time.perf_counter()))
    check.join()
    later.join()
    order = [name for name, _ in sorted(log, key=lambda e: e[1])]
    assert order == ["check+", "check-", "timed+", "timed-", "later+", "later-"]
    assert turn["waited_s"] >= 0.2


def test_shared_holders_run_side_by_side() -> None:
    log: list[tuple[str, float]] = []
    threads = [threading.Thread(target=_holds, args=(False, 0.2, log, str(i))) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts = sorted(t for name, t in log if name.endswith("+"))
    ends = sorted(t for name, t in log if name.endswith("-"))
    assert starts[1] < ends[0]  # the second began before the first ended


def test_a_cpu_device_takes_no_turn() -> None:
    with gpu_turn("cpu", exclusive=True) as outer, gpu_turn("cpu", exclusive=True) as inner:
        assert outer["waited_s"] == inner["waited_s"] == 0.0
