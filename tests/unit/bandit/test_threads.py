"""One native thread for policy fits, from one controller made once."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from kernelband.bandit import threads


def test_one_thread_limits_native_pools_inside_and_restores_them_after() -> None:
    before = {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}
    with threads.one_thread():
        inside = {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}
    after = {pool["filepath"]: pool["num_threads"] for pool in threadpool_info()}
    assert inside and all(n == 1 for n in inside.values())
    assert after == before


def test_the_controller_is_made_once() -> None:
    with threads.one_thread():
        first = threads._controller
    with threads.one_thread():
        assert threads._controller is first is not None
