"""Where a job's time goes: per task kind, the worker time and the queue wait of its attempts.

Read from the attempts table alone (created, dispatched, started and finished times), plus the
`timings` a worker puts in its result (seconds per part of a task, e.g. the correctness check
and the measurement of a profile task). Times are wall-clock seconds on the worker's host.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Attempt
from kernelband.scheduling.budgets import as_utc

KIND_ORDER = ("generate", "compile", "profile", "verify")


@dataclass(frozen=True)
class StageTime:
    """One task kind of a job: how many attempts finished and how long they took.

    `work_*`: started -> finished (the worker's time, from its start beat) or, for an attempt
    without a start beat, dispatched -> finished (queue wait included). `wait_median_s`:
    dispatched -> started, over attempts with a start beat (None: no beat recorded).
    `parts`: median seconds of each part the worker reported in its result's `timings`.
    """

    kind: str
    finished: int
    failed: int
    work_median_s: float
    work_p90_s: float
    work_total_s: float
    wait_median_s: float | None
    parts: dict[str, float] = field(default_factory=dict)
    parts_total_s: dict[str, float] = field(default_factory=dict)  # each part summed over the attempts

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "finished": self.finished, "failed": self.failed,
                "work_median_s": self.work_median_s, "work_p90_s": self.work_p90_s,
                "work_total_s": self.work_total_s, "wait_median_s": self.wait_median_s,
                "parts": dict(self.parts), "parts_total_s": dict(self.parts_total_s)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageTime:
        return cls(str(data["kind"]), int(data["finished"]), int(data["failed"]),
                   float(data["work_median_s"]), float(data["work_p90_s"]), float(data["work_total_s"]),
                   None if data.get("wait_median_s") is None else float(data["wait_median_s"]),
                   {str(k): float(v) for k, v in (data.get("parts") or {}).items()},
                   {str(k): float(v) for k, v in (data.get("parts_total_s") or {}).items()})

    def text(self) -> str:
        """One line, e.g. `profile x12: 2.31 s median, p90 3.02 (check 1.20, measure 1.05)`."""
        parts = ", ".join(f"{name} {s:.2f}" for name, s in self.parts.items())
        return (f"{self.kind} x{self.finished}: {self.work_median_s:.2f} s median, p90 "
                f"{self.work_p90_s:.2f}" + (f" ({parts})" if parts else ""))


def stage_times(session: Session, job_id: int | Sequence[int]) -> list[StageTime]:
    """The finished attempts of a job (or of several together, e.g. a suite's), summarised per
    kind (generate, compile, profile, verify)."""
    job_ids = [job_id] if isinstance(job_id, int) else list(job_id)
    query = (select(Attempt.kind, Attempt.state, Attempt.dispatched_at, Attempt.started_at,
                    Attempt.finished_at, Attempt.result)
             .where(Attempt.job_id.in_(job_ids), Attempt.finished_at.is_not(None)))
    work: dict[str, list[float]] = defaultdict(list)
    waits: dict[str, list[float]] = defaultdict(list)
    parts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, int] = defaultdict(int)
    for kind, state, dispatched, started, finished, result in session.execute(query):
        begin = started or dispatched
        if begin is None:
            continue  # never sent (failed by the scheduler before dispatch): no time to count
        work[kind].append(_seconds(begin, finished))
        if started is not None and dispatched is not None:
            waits[kind].append(_seconds(dispatched, started))
        failed[kind] += state == "failed"
        for name, seconds in result_timings(result).items():
            parts[kind][name].append(seconds)
    kinds = sorted(work, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else 99, k))
    return [StageTime(kind, len(work[kind]), failed[kind], statistics.median(work[kind]),
                      _p90(work[kind]), sum(work[kind]),
                      statistics.median(waits[kind]) if waits[kind] else None,
                      {name: statistics.median(v) for name, v in parts[kind].items()},
                      {name: sum(v) for name, v in parts[kind].items()})
            for kind in kinds]


def _seconds(start: datetime, end: datetime) -> float:
    return max(0.0, (as_utc(end) - as_utc(start)).total_seconds())


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def result_timings(result: Any) -> dict[str, float]:
    """The numeric `timings` of a worker result; anything else is ignored."""
    raw = result.get("timings") if isinstance(result, dict) else None
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0}


__all__ = ["StageTime", "result_timings", "stage_times"]
