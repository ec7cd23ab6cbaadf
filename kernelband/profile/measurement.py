"""What a measurement of a candidate is (`Measurement`) and the errors of taking one.

A module of plain values: the parent that starts a sandboxed measurement, the child that takes
it and the judge that pairs two runners all build or read these without loading torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelband.profile.paired import PairedSpeedup


class MeasureError(RuntimeError):
    """A candidate that cannot be measured; the message says why and what to change."""


class TimingCheckError(MeasureError):
    """A timed call broke a rule (wrong result, tampering); `reason` names it."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class CandidateRefused(MeasureError):
    """The candidate's correctness check, run beside its runner's start, refused it before its
    timed rounds: nothing was timed, and the check's verdict is the answer."""


# Called by a measurement once its runners are ready, before its timed rounds: it returns when
# the candidate may be timed and raises CandidateRefused when it may not.
UntilChecked = Callable[[], None]


@dataclass(frozen=True)
class Measurement:
    """A time for a candidate, always labelled `measured` (GPU, method) or `estimated`."""

    label: str  # measured | estimated
    method: str
    device: str
    target: str
    time_ms: float  # sum over the timed cases (a paired measurement times at most measure_max_cases of them)
    case_times_ms: dict[str, float] = field(default_factory=dict)
    cv: float = 0.0
    noisy: bool = False
    paired_ratio: float | None = None  # child / parent time, when a parent was given
    # measured only, the evidence behind the time: the physical floor per case (a time below
    # it is implausible), what verified timing checked, and the share of GPU time spent in the
    # candidate's Triton kernels (torch.profiler)
    floors_ms: dict[str, float] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    triton_share: float | None = None
    # measured only: original / candidate from interleaved rounds in one session, with its 95%
    # interval; None for estimates, which are never paired measurements
    speedup: PairedSpeedup | None = None

    def __post_init__(self) -> None:
        if self.label not in ("measured", "estimated"):
            raise ValueError(f"label must be 'measured' or 'estimated', not {self.label!r}")

    def describe(self) -> str:
        """One line for people, with the label first so an estimate never reads as a measurement."""
        if self.speedup is not None:
            ratio = f", {self.speedup.describe()} against the original"
        else:
            ratio = f", child/parent {self.paired_ratio:.3f}" if self.paired_ratio is not None else ""
        return f"{self.label}: {self.time_ms:.4f} ms on {self.device} ({self.method}{ratio})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if isinstance(fields.get("speedup"), dict):
            fields["speedup"] = PairedSpeedup.from_dict(fields["speedup"])
        return cls(**fields)
