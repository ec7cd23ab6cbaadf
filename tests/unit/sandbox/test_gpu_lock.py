"""The GPU turn: timed rounds exclusive, other GPU work shared, nothing on a CPU device."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kernelband.sandbox import load_problem_sandboxed
from kernelband.sandbox.gpu_lock import gpu_turn
from kernelband.sandbox.limits import SandboxLimits


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


def test_loading_a_problem_on_a_gpu_node_waits_for_timed_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    source = (Path(__file__).parents[1] / "profile" / "fixtures" / "paired_problem.py").read_text()
    monkeypatch.setenv("KERNELBAND_DEVICE", "cuda")  # a GPU node, as the loader sees it
    log: list[tuple[str, float]] = []
    timed = threading.Thread(target=_holds, args=(True, 6.0, log, "timed"))  # longer than a load
    timed.start()
    time.sleep(0.1)
    problem = load_problem_sandboxed(source, "native", "paired_double", SandboxLimits.from_settings(interpret=True))
    log.append(("loaded", time.perf_counter()))
    timed.join()
    assert problem.name == "paired_double"
    assert [name for name, _ in sorted(log, key=lambda e: e[1])] == ["timed+", "timed-", "loaded"]


def test_waiting_timed_rounds_stop_new_shared_turns() -> None:
    """Checks that keep overlapping would otherwise hold the shared lock without a gap."""
    log: list[tuple[str, float]] = []
    first = threading.Thread(target=_holds, args=(False, 0.4, log, "first"))
    first.start()
    time.sleep(0.05)
    timed = threading.Thread(target=_holds, args=(True, 0.1, log, "timed"))
    timed.start()
    time.sleep(0.05)  # the timed rounds are waiting for `first` now
    second = threading.Thread(target=_holds, args=(False, 0.4, log, "second"))
    second.start()
    for t in (first, timed, second):
        t.join()
    order = [name for name, _ in sorted(log, key=lambda e: e[1])]
    assert order == ["first+", "first-", "timed+", "timed-", "second+", "second-"]


def test_a_turn_inside_a_turn_is_refused_not_left_to_deadlock() -> None:
    with (gpu_turn("cuda", exclusive=False), pytest.raises(RuntimeError, match="never nest"),
          gpu_turn("cuda", exclusive=False)):
        pass
    with gpu_turn("cuda", exclusive=True) as turn:  # the refused one left nothing held
        assert turn["waited_s"] < 1.0
