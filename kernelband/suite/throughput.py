"""What a suite cost its measuring workers: candidates judged per worker-hour, and how busy.

A GPU-hour is what the service spends; candidates judged per GPU-hour is what it sells. From
the suite's attempts: `judged` counts profile attempts a worker finished (a candidate accepted
or refused on the target), the active window runs from the first attempt a worker started to
the last it finished, and `busy_s` is the time at least one profile or verify attempt of the
target was running (the union of their intervals, so two at once count once). In embedded
mode a target has one device, so per hour of the window is per device-hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

DEVICE_KINDS = ("profile", "verify")  # the steps that run on the target's device
# the exclusive GPU turns of a paired measurement (its tuning pass and its timing), measured as
# held (kernelband/sandbox/gpu_lock.py)
HELD_PART = "measure_held_alone"
# results kept before HELD_PART was recorded: the parts then read as the exclusive turn's (their
# prepare includes the first inputs' shared turn, so the share read from them is an upper bound)
TIMED_PARTS = ("measure_calibrate", "measure_prepare", "measure_timed_rounds", "measure_verify")


@dataclass(frozen=True)
class TargetThroughput:
    target: str
    judged: int
    window_s: float
    busy_s: float  # summed over the devices, each device's the union of its attempt intervals
    devices: int = 1  # distinct workers that ran the target's profile or verify attempts

    @property
    def device_s(self) -> float:
        """Device-seconds on offer: devices x the active window."""
        return self.devices * self.window_s

    @property
    def per_hour(self) -> float:
        return self.judged * 3600.0 / self.device_s if self.device_s > 0 else 0.0

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_s / self.device_s if self.device_s > 0 else 0.0

    @property
    def estimated(self) -> bool:
        """cpu timings are cost-model estimates: no GPU ran, the figures are per worker-hour."""
        return self.target == "cpu"

    @property
    def unit(self) -> Literal["GPU-hour", "worker-hour"]:
        return "worker-hour" if self.estimated else "GPU-hour"

    def describe(self) -> str:
        unit = "worker-hour (cpu: estimated timings, no GPU)" if self.estimated else "GPU-hour"
        device = "worker" if self.estimated else "GPU"
        served = "" if self.devices == 1 else f" on {self.devices} {device}s"
        # busy: some profile or verify task running, which with several at once on one device
        # is not how hard it works (timed_share below is the GPU held alone)
        return (f"{self.target}: {self.per_hour:.0f} candidates judged per {unit}; {self.judged} in an "
                f"active window of {self.window_s:.0f} s{served}, {device} busy with a profile or "
                f"verify task {self.busy_pct:.0f}% of it")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_hour": self.per_hour, "busy_pct": self.busy_pct}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TargetThroughput:
        return cls(str(data["target"]), int(data["judged"]), float(data["window_s"]), float(data["busy_s"]),
                   int(data.get("devices", 1)))  # reports kept before devices were counted: one


def timed_share(parts_total_s: Sequence[dict[str, float]], device_s: float) -> float:
    """Percent of `device_s` the GPU was held alone for paired measurements, from the summed
    parts of the profile and verify steps (`StageTime.parts_total_s`)."""
    held = sum(parts[HELD_PART] if HELD_PART in parts else sum(parts.get(name, 0.0) for name in TIMED_PARTS)
               for parts in parts_total_s)
    return 100.0 * held / device_s if device_s > 0 else 0.0


@dataclass(frozen=True)
class AttemptSpan:
    """One attempt a worker started and finished: its target and kind, when, and which worker
    answered it (None: not recorded, e.g. in-process; those count as one device)."""

    target: str
    kind: str
    started_at: datetime
    finished_at: datetime
    worker: str | None = None


def by_target(attempts: Sequence[AttemptSpan],
              since: datetime | None = None) -> tuple[TargetThroughput, ...]:
    """Per target of `attempts`: profile attempts judged, the active window (the first start to
    the last finish of any attempt, shared by every target), its devices and their busy seconds.

    `since` clips starts: an attempt that began before a recent window counts only its part
    inside it, so neither the window nor a device's busy time reaches back past `since`.
    """
    if not attempts:
        return ()
    spans = [(a, a.started_at if since is None else max(a.started_at, since), a.finished_at)
             for a in attempts]
    window = seconds_between(min(start for _, start, _ in spans), max(stop for _, _, stop in spans))
    out = []
    for target in sorted({a.target for a in attempts}):
        per_device: dict[str | None, list[tuple[datetime, datetime]]] = {}
        for a, start, stop in spans:
            if a.target == target and a.kind in DEVICE_KINDS:
                per_device.setdefault(a.worker, []).append((start, stop))
        judged = sum(1 for a in attempts if a.target == target and a.kind == "profile")
        busy = sum(union_s(device) for device in per_device.values())
        out.append(TargetThroughput(target, judged, window, busy, len(per_device)))
    return tuple(out)


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
