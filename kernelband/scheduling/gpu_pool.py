"""The embedded dispatcher's pool for one GPU queue: candidates ahead of originals' baselines.

A job's first GPU task is its original's baseline: the original's runner started and its
autotune picks made, a static report, calibration. That takes 20-100 s on a TritonBench-G
problem, nearly all of it loads and compiles that leave the GPU's exclusive turn idle, while a
candidate's profile step spends a large share of its time in timed rounds. A suite starts many
jobs at once, so in plain arrival order every slot of the queue holds a baseline for the first
minute or two and the first candidates, though ready, wait behind baselines queued before
them (an H200 30-problem suite: a candidate made 22 s in started 96 s later).

So a slot takes a waiting candidate (any task that is not an original's baseline) before a
baseline, in arrival order within each kind, and at most `slots - 1` baselines run at once
(one slot stays for candidates; with one slot, that slot takes either). A baseline that has
waited `patience_s` goes first all the same, so a long job whose candidates keep the queue full
cannot hold another job's start back for longer than that.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

IDLE_EXIT_S = 1.0  # an idle worker thread ends after this; the next task starts another
BASELINE_PATIENCE_S = 60.0

CANDIDATE, BASELINE = 0, 1


def urgency(payload: dict[str, Any]) -> int:
    """BASELINE for an original's baseline measurement (its attempt says `original`), else
    CANDIDATE; lower runs first."""
    return BASELINE if payload.get("original") else CANDIDATE


class GpuQueuePool:
    """`slots` worker threads for one GPU queue, taking the most urgent waiting task first."""

    def __init__(self, slots: int, name: str, patience_s: float = BASELINE_PATIENCE_S) -> None:
        if slots < 1:
            raise ValueError(f"a GPU queue needs at least 1 slot, got {slots}")
        self.slots = slots
        self.baseline_places = max(1, slots - 1)
        self.patience_s = patience_s
        self._name = name
        self._cond = threading.Condition()
        # per level, (when queued, work), oldest first
        self._waiting: dict[int, deque[tuple[float, Callable[[], None]]]] = {
            CANDIDATE: deque(), BASELINE: deque()}
        self._threads = 0  # live worker threads
        self._idle = 0  # of them, waiting for work
        self._baselines = 0  # baselines running
        self._closed = False

    def submit(self, level: int, work: Callable[[], None]) -> None:
        """Queue `work` at `level` (CANDIDATE or BASELINE)."""
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._waiting[level].append((time.monotonic(), work))
            if self._count() > self._idle and self._threads < self.slots:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"kb-{self._name}-{self._threads}").start()
            self._cond.notify_all()

    def _take(self) -> tuple[int, Callable[[], None]] | None:
        """The next task this thread may start; None once closed or idle for IDLE_EXIT_S."""
        with self._cond:
            while not self._closed:
                found = self._startable()
                if found is not None:
                    return found
                self._idle += 1
                woken = self._cond.wait(IDLE_EXIT_S)
                self._idle -= 1
                if not woken and not self._count():
                    break
            self._threads -= 1
            return None

    def _startable(self) -> tuple[int, Callable[[], None]] | None:
        """Pop the first candidate, else the first baseline while a baseline place is free
        (first of all when it has waited `patience_s`)."""
        candidates, baselines = self._waiting[CANDIDATE], self._waiting[BASELINE]
        if baselines and self._baselines < self.baseline_places and (
                not candidates or time.monotonic() - baselines[0][0] >= self.patience_s):
            self._baselines += 1
            return BASELINE, baselines.popleft()[1]
        if candidates:
            return CANDIDATE, candidates.popleft()[1]
        return None

    def _serve(self) -> None:
        while (taken := self._take()) is not None:
            level, work = taken
            try:
                work()
            finally:
                with self._cond:
                    if level == BASELINE:
                        self._baselines -= 1
                    self._cond.notify_all()

    def waiting(self) -> int:
        with self._cond:
            return self._count()

    def _count(self) -> int:
        """Tasks waiting (the caller holds the lock)."""
        return sum(len(queued) for queued in self._waiting.values())

    def shutdown(self) -> None:
        """Drop the waiting tasks and take no more; running ones finish."""
        with self._cond:
            self._closed = True
            for queued in self._waiting.values():
                queued.clear()
            self._cond.notify_all()


__all__ = ["BASELINE", "CANDIDATE", "GpuQueuePool", "urgency"]
