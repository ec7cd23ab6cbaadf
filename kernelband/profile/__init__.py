"""Hardware-aware measurement: launches, static profile, occupancy, timing, ncu, estimate.

Importing this package is cheap: triton and torch are imported by the functions that need them.
"""

from typing import Any

from kernelband.profile.archs import GPUS, TARGETS, UnknownTargetError, resolve_target
from kernelband.profile.features import Features
from kernelband.profile.launches import LaunchRecord, capture_launches
from kernelband.profile.measurement import CandidateRefused, MeasureError, Measurement
from kernelband.profile.occupancy import Occupancy, theoretical_occupancy
from kernelband.profile.paired import PairedSpeedup
from kernelband.profile.sandboxed import measure_candidate, static_profile_candidate
from kernelband.profile.specialize import StaticProfileError
from kernelband.profile.static import StaticProfile, static_profile


def __getattr__(name: str) -> Any:
    if name == "measure_candidate_local":
        # it imports torch and the GPU path; importing the package stays cheap without it
        from kernelband.profile.measure import measure_candidate_local

        return measure_candidate_local
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GPUS",
    "TARGETS",
    "CandidateRefused",
    "Features",
    "LaunchRecord",
    "MeasureError",
    "Measurement",
    "Occupancy",
    "PairedSpeedup",
    "StaticProfile",
    "StaticProfileError",
    "UnknownTargetError",
    "capture_launches",
    "measure_candidate",
    "measure_candidate_local",
    "resolve_target",
    "static_profile",
    "static_profile_candidate",
    "theoretical_occupancy",
]
