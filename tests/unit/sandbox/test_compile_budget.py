"""Compilation is budgeted apart from run time: each budget stops the run with its own reason."""

from __future__ import annotations

import pytest

from kernelband.sandbox import SandboxLimits, run_sandboxed
from kernelband.sandbox.compile_budget import CompileClock

LIMITS = SandboxLimits(wall_s=1.5, compile_s=4.0, cpu_s=60, audit=False)
TARGET = "kernelband.sandbox.probes:compile_then_run"


def test_long_compilation_within_its_budget_does_not_count_as_run_time() -> None:
    result = run_sandboxed(TARGET, {"compile": 2.5, "run": 0.3}, LIMITS)
    assert result.ok, result
    assert result.value["compile_s"] >= 2.5


@pytest.mark.parametrize(("payload", "reason"), [
    ({"compile": 0.0, "run": 3.0}, "timeout"),
    ({"compile": 5.0, "run": 0.0}, "compile_timeout"),
])
def test_each_budget_stops_the_run_with_its_reason(payload: dict[str, float], reason: str) -> None:
    result = run_sandboxed(TARGET, payload, LIMITS)
    assert not result.ok and result.reason == reason, result
    assert "budget" in result.message or "limit" in result.message


def test_a_run_killed_by_its_budget_timer_past_the_budget_is_a_timeout_and_before_it_a_crash() -> None:
    # code that swallows the budget's exception and resets SIGALRM is killed by the timer's next
    # tick: past the budget that is running out of time, not a crash
    probe = "kernelband.sandbox.probes:sleep_unhandled_alarm"
    late = run_sandboxed(probe, {"after_budget": True}, LIMITS)
    assert not late.ok and late.reason == "timeout" and "wall-clock limit" in late.message, late
    early = run_sandboxed(probe, {"seconds": 5.0}, LIMITS)
    assert not early.ok and early.reason == "crashed:SIGALRM" and early.wall_s < LIMITS.wall_s, early


def test_nested_compile_time_is_counted_once() -> None:
    clock = CompileClock()
    inner = clock.timed(lambda: None)
    clock.timed(lambda: inner())()
    assert clock.depth == 0 and clock.spent < 0.5


def test_a_released_compile_stops_counting_and_its_thread_counts_again_after() -> None:
    import threading
    import time

    clock = CompileClock()
    started, finish = threading.Event(), threading.Event()
    idents: list[int] = []

    def abandoned() -> None:
        idents.append(threading.get_ident())
        started.set()
        finish.wait(5)

    worker = threading.Thread(target=clock.timed(abandoned))
    worker.start()
    started.wait(5)
    time.sleep(0.2)
    clock.release(set(idents))
    spent = clock.now_spent()
    assert spent >= 0.2 and clock.depth == 0
    time.sleep(0.3)
    assert clock.now_spent() == spent  # the abandoned compile runs on, uncounted
    clock.timed(lambda: time.sleep(0.1))()  # another thread's compile still counts
    assert clock.now_spent() >= spent + 0.1
    finish.set()
    worker.join(5)
    after = clock.now_spent()
    clock.timed(lambda: time.sleep(0.1))()
    assert clock.now_spent() >= after + 0.1 and clock.depth == 0
