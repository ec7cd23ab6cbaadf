"""How a speedup reaches people: paired with its 95% interval, an estimate labelled, or none.

A measured speedup is only ever the paired one (the candidate and the original interleaved in
one runner session, `kernelband.profile.paired.PairedSpeedup`), stored on measurement rows and
on each track's best. Two times taken at different moments are never divided into a speedup
shown to users: a measured row without a paired result reads "not measured". The cost model's
ratio is shown, labelled `estimated` and without an interval. Pure: no database, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kernelband.profile.paired import PairedSpeedup

NOT_MEASURED = "not measured"
ORIGINAL_METHOD = "the original kernel itself"  # the original as a track's best: 1.0 by definition


@dataclass(frozen=True)
class ShownSpeedup:
    """A speedup as every surface shows it (API, dashboard, report, CLI, suite, exports).

    `source`: `measured` (paired, with its interval), `estimated` (cost model, no interval),
    `original` (the original kernel itself, 1.0 by definition) or `none` (no paired result).
    """

    point: float | None
    low: float | None = None
    high: float | None = None
    method: str | None = None
    source: str = "none"

    @property
    def significant(self) -> bool:
        """Faster with 95% confidence: the interval's lower bound is above 1.0."""
        return self.source == "measured" and self.low is not None and self.low > 1.0

    def text(self) -> str:
        """`1.18x [1.12, 1.24]`, `1.01x [0.97, 1.05], no significant speedup` (the interval
        contains 1.0), `1.30x estimated`, `1.00x original` or `not measured`."""
        if self.point is None:
            return NOT_MEASURED
        if self.source == "measured" and self.low is not None and self.high is not None:
            # One wording everywhere: the measurement's own (PairedSpeedup.describe).
            return PairedSpeedup(self.point, self.low, self.high, 0, self.method or "",
                                 "original").describe()
        if self.source == "original":
            return f"{self.point:.2f}x original"
        return f"{self.point:.2f}x {self.source}"

    def fields(self) -> dict[str, Any]:
        """The API's and exports' fields: speedup, its interval, method and significance."""
        return {"speedup": self.point, "speedup_low": self.low, "speedup_high": self.high,
                "speedup_method": self.method, "significant": self.significant}


NONE = ShownSpeedup(None)
ORIGINAL = ShownSpeedup(1.0, method=ORIGINAL_METHOD, source="original")


class MeasurementRow(Protocol):
    """What `of_measurement` reads of a stored measurement (the ORM row, or a test double)."""

    label: str
    time_ms: float
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    speedup_method: str | None


class TrackRow(Protocol):
    """What `of_track` reads of a stored track."""

    best_candidate_id: int | None
    original_candidate_id: int | None
    best_label: str | None
    best_speedup: float | None
    best_speedup_low: float | None
    best_speedup_high: float | None
    best_speedup_method: str | None


def paired_columns(paired: dict[str, Any] | None) -> dict[str, Any]:
    """Measurement row columns from `PairedSpeedup.to_dict()` (all None without one)."""
    if not paired or paired.get("point") is None:
        return {"speedup": None, "speedup_low": None, "speedup_high": None,
                "speedup_rounds": None, "speedup_method": None, "speedup_baseline": None}
    return {"speedup": float(paired["point"]), "speedup_low": float(paired["low"]),
            "speedup_high": float(paired["high"]), "speedup_rounds": int(paired["rounds"]),
            "speedup_method": str(paired["method"]), "speedup_baseline": str(paired["baseline"])}


def paired(point: float, low: float, high: float, method: str | None) -> ShownSpeedup:
    """A measured, paired speedup with its interval."""
    return ShownSpeedup(point, low, high, method, "measured")


def of_measurement(m: MeasurementRow, original_time_ms: float | None,
                   is_original: bool = False) -> ShownSpeedup:
    """The speedup over the original that one stored measurement supports."""
    if is_original:
        return ORIGINAL
    if m.speedup is not None and m.speedup_low is not None and m.speedup_high is not None:
        return paired(m.speedup, m.speedup_low, m.speedup_high, m.speedup_method)
    if m.label == "estimated" and original_time_ms and m.time_ms > 0:
        return ShownSpeedup(original_time_ms / m.time_ms, method="cost model ratio",
                            source="estimated")
    return NONE  # measured, but never paired against the original: no speedup to show


def of_track(track: TrackRow) -> ShownSpeedup:
    """The speedup of a track's best (the final re-measure once the job's last step ran)."""
    if track.best_candidate_id is not None and track.best_candidate_id == track.original_candidate_id:
        return ORIGINAL
    if (track.best_speedup is not None and track.best_speedup_low is not None
            and track.best_speedup_high is not None):
        return paired(track.best_speedup, track.best_speedup_low, track.best_speedup_high,
                      track.best_speedup_method)
    if track.best_label == "estimated" and track.best_speedup is not None:
        return ShownSpeedup(track.best_speedup, method="cost model ratio", source="estimated")
    return NONE


def best_columns(shown: ShownSpeedup) -> dict[str, Any]:
    """The track columns that store a best's speedup."""
    return {"best_speedup": shown.point, "best_speedup_low": shown.low,
            "best_speedup_high": shown.high, "best_speedup_method": shown.method}
