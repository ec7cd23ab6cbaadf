"""What a suite cost its measuring workers: candidates judged per worker-hour, and how busy.

A GPU-hour is what the service spends; candidates judged per GPU-hour is what it sells. From
the suite's attempts: `judged` counts profile attempts a worker finished (a candidate accepted
or refused on the target), the active window runs from the first attempt a worker started to
the last it finished, and `busy_s` is the time at least one profile or verify attempt of the
target was running (the union of their intervals, so two at once count once). In embedded
mode a target has one device, so per hour of the window is per device-hour.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

DEVICE_KINDS = ("profile", "verify")  # the steps that run on the target's device


@dataclass(frozen=True)
class TargetThroughput:
    target: str
    judged: int
    window_s: float
    busy_s: float

    @property
    def per_hour(self) -> float:
        return self.judged * 3600.0 / self.window_s if self.window_s > 0 else 0.0

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_s / self.window_s if self.window_s > 0 else 0.0

    def describe(self) -> str:
        unit = "worker-hour (cpu: estimated timings, no GPU)" if self.target == "cpu" else "GPU-hour"
        device = "worker" if self.target == "cpu" else "GPU"
        return (f"{self.target}: {self.per_hour:.0f} candidates judged per {unit}; {self.judged} in an "
                f"active window of {self.window_s:.0f} s, {device} busy {self.busy_pct:.0f}% of it")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_hour": self.per_hour, "busy_pct": self.busy_pct}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TargetThroughput:
        return cls(str(data["target"]), int(data["judged"]), float(data["window_s"]), float(data["busy_s"]))


def union_s(spans: list[tuple[datetime, datetime]]) -> float:
    """Seconds covered by at least one span."""
    total, end = 0.0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total += seconds_between(start, stop)
            end = stop
        elif stop > end:
            total += seconds_between(end, stop)
            end = stop
    return total


def seconds_between(start: datetime, stop: datetime) -> float:
    return max(0.0, (stop - start).total_seconds())
