"""One measurement at a time per GPU, and nothing else on that GPU while it is timed.

A node's workers run several tasks at once (an embedded suite runs
KERNELBAND_GPU_TASKS_PER_DEVICE per GPU, 3 by default, beside its compiles; a GPU worker may
run more). Correctness runs, runner start-ups and feature passes may share a GPU with each
other, but a paired measurement's timed rounds must have the GPU to themselves, or one
candidate's compile or check would enter another's time. A shared lock is held around every
sandboxed run that uses the GPU, an exclusive one around timed rounds: `flock` on a file per
GPU, so the rule holds across the worker processes of one node too.

With KERNELBAND_GPU_PREEMPT_SHARED on (the default), an exclusive turn does not wait for the shared turns
already running: it stops their sandboxed processes for its length instead
(kernelband/sandbox/preempt.py).
"""

from __future__ import annotations

import fcntl
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernelband.sandbox import preempt


def _lock_path(suffix: str = "") -> Path:
    return Path(tempfile.gettempdir()) / f"kernelband-gpu-{preempt.gpu_key()}{suffix}.lock"


@contextmanager
def gpu_turn(device: str, *, exclusive: bool, own: tuple[int, ...] = (),
             settle_later: bool = False) -> Iterator[dict[str, float]]:
    """Hold this node's GPU shared or exclusive while the block runs (nothing on a CPU
    device). Yields {"waited_s": ..., "preempted": ...}: how long the turn took to come and how
    many sandboxed process groups an exclusive turn stopped (`own`: the process groups of the
    runners it times, never stopped).

    An exclusive turn that stopped groups lets the GPU work they had queued finish
    (`preempt.SETTLE_S`) before its block runs; with `settle_later` it does not wait: the block
    must call `settle(turn)` before anything it times, and can run untimed GPU work (a warm-up)
    meanwhile.

    `flock` grants a new shared lock while others hold one, even with an exclusive request
    waiting, so with several tasks checking and compiling on a node the timed rounds could
    wait for a gap that never comes. A second file orders the arrivals: a shared holder passes
    through it (held shared only until its turn comes), an exclusive one holds it while it
    waits, so once timed rounds are waiting no new shared turn starts. Turns never nest: a
    shared turn asked for inside another would wait behind the timed rounds that wait for it."""
    waited = {"waited_s": 0.0, "preempted": 0.0}
    if not device.startswith("cuda"):
        yield waited
        return
    if getattr(_held, "turn", False):
        raise RuntimeError("a GPU turn was asked for while this thread holds one: turns never nest")
    _held.turn = True
    try:
        preempting = exclusive and preempt.enabled()
        with _preempting_turn(own, settle_later) if preempting else _turn(exclusive) as waited:
            yield waited
    finally:
        _held.turn = False


_held = threading.local()  # whether this thread holds a turn


def settle(turn: dict[str, float]) -> None:
    """Wait until the work the turn stopped had the time to finish on the GPU (see `gpu_turn`)."""
    time.sleep(max(0.0, turn.get("settle_until", 0.0) - time.monotonic()))


@contextmanager
def _preempting_turn(own: tuple[int, ...], settle_later: bool) -> Iterator[dict[str, float]]:
    """Exclusive turns one after another (their own file), each holding the queue for its
    length, so no shared turn starts; the shared turns already running are stopped."""
    waited = {"waited_s": 0.0, "preempted": 0.0}
    with open(_lock_path("-exclusive"), "a+") as alone, open(_lock_path("-queue"), "a+") as queue:
        start = time.perf_counter()
        fcntl.flock(alone, fcntl.LOCK_EX)
        try:
            fcntl.flock(queue, fcntl.LOCK_EX)
            try:
                preempt.recover()
                with preempt.preempting(own, 0.0 if settle_later else preempt.SETTLE_S) as stopped:
                    waited["waited_s"] = time.perf_counter() - start
                    waited["preempted"] = float(stopped)
                    if settle_later and stopped:
                        waited["settle_until"] = time.monotonic() + preempt.SETTLE_S
                    yield waited
            finally:
                fcntl.flock(queue, fcntl.LOCK_UN)
        finally:
            fcntl.flock(alone, fcntl.LOCK_UN)


@contextmanager
def _turn(exclusive: bool) -> Iterator[dict[str, float]]:
    waited = {"waited_s": 0.0, "preempted": 0.0}
    # each holder opens its own file descriptions: flock then orders threads of one process too
    with open(_lock_path("-queue"), "a+") as queue, open(_lock_path(), "a+") as handle:
        start = time.perf_counter()
        fcntl.flock(queue, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            preempt.recover()
            fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(queue, fcntl.LOCK_UN)
        waited["waited_s"] = time.perf_counter() - start
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
