"""Which workers the leader hears from, which attempts each holds, and which went silent.

Every message on the results queue proves its sender alive: a worker's periodic heartbeat
(its main process, every `interval_s`), a lease beat (a task taken or still running) and a
result. A worker silent for `missed_beats` of its intervals is gone: the attempts it holds
are sent again at once (`leases.resend_tries`), not when their leases run out. A gone worker
that speaks again is alive again; anything it still reports late is applied at most once.

What a worker holds is learnt from its lease beats, kept in the leader's memory only: a new
leader learns it from the next beats (every third of a lease), and until then a worker that
dies is noticed by its attempts' leases as before. A worker killed between taking a task and
its first lease beat holds a delivery nobody reported: when a worker goes gone, the broker's
deliveries of its queues that stayed unacknowledged that long with no lease beat from any
live worker are sent again too (`CeleryDispatcher.unreported_deliveries`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class WorkerSeen:
    """One worker as the leader last heard it."""

    last_heard: float  # time.monotonic()
    interval_s: float
    queues: tuple[str, ...] = ()  # what it consumes, from its heartbeats
    # attempts it took and has not answered -> the task id of the try it took
    holds: dict[int, str] = field(default_factory=dict)


class Liveness:
    """In-memory liveness of the workers that talk to this leader."""

    def __init__(self, default_interval_s: float, missed_beats: int) -> None:
        self.default_interval_s = default_interval_s
        self.missed_beats = missed_beats
        self.workers: dict[str, WorkerSeen] = {}

    def heard(self, worker: str, interval_s: float = 0.0, now: float | None = None,
              queues: tuple[str, ...] = ()) -> None:
        """A message from `worker` arrived (a heartbeat says its interval and queues)."""
        if not worker:
            return
        seen = self.workers.get(worker)
        at = time.monotonic() if now is None else now
        if seen is None:
            seen = self.workers[worker] = WorkerSeen(at, interval_s or self.default_interval_s)
        seen.last_heard = at
        if interval_s:
            seen.interval_s = interval_s
        if queues:
            seen.queues = queues

    def held_by_live(self) -> set[int]:
        """Attempts some worker not (yet) counted gone reported taking."""
        return {attempt for seen in self.workers.values() for attempt in seen.holds}

    def took(self, worker: str, attempt_id: int, task_id: str, now: float | None = None) -> None:
        """A lease beat: `worker` runs this try (task id) of the attempt."""
        self.heard(worker, now=now)
        if worker:
            self.workers[worker].holds[attempt_id] = task_id

    def answered(self, worker: str, attempt_id: int, now: float | None = None) -> None:
        """A result: the attempt left whichever worker held it."""
        self.heard(worker, now=now)
        for seen in self.workers.values():
            seen.holds.pop(attempt_id, None)

    def take_gone(self, now: float | None = None) -> dict[str, WorkerSeen]:
        """Workers silent for `missed_beats` intervals, with the attempts they held; they are
        forgotten here (a gone worker that speaks again starts afresh)."""
        at = time.monotonic() if now is None else now
        gone = {name: seen for name, seen in self.workers.items()
                if at - seen.last_heard > self.gone_after_s(seen)}
        for name in gone:
            del self.workers[name]
        return gone

    def gone_after_s(self, seen: WorkerSeen) -> float:
        """Silence after which this worker counts as gone."""
        return self.missed_beats * seen.interval_s


__all__ = ["Liveness", "WorkerSeen"]
