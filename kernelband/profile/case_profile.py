"""One case of a candidate, profiled without timing: its Triton launches, their static
profiles, the cost model's estimate, and phi and h taken from those (labelled estimate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelband.problem.model import Case
from kernelband.profile.archs import GpuSpec
from kernelband.profile.estimate import CaseEstimate, estimate_case
from kernelband.profile.features import Features, build_features
from kernelband.profile.launches import LaunchRecord, capture_launches
from kernelband.profile.measurement import MeasureError
from kernelband.profile.static import StaticProfile, static_profile


@dataclass
class CaseProfile:
    """Launches, static profiles and the estimate of one case."""

    case: Case
    pairs: list[tuple[LaunchRecord, StaticProfile]]
    estimate: CaseEstimate

    def dominant_profile(self) -> StaticProfile:
        """The static profile of the launch with the largest estimated time."""
        times = [e.time_ms for e in self.estimate.launches]
        return self.pairs[times.index(max(times))][1]


def capture_case(runtime: Any, case: Case, execute: bool, seed: int = 0) -> list[LaunchRecord]:
    """Run the candidate on one case and return its Triton launches."""
    args = runtime.inputs(case, seed)
    with capture_launches(execute=execute) as records:
        runtime.candidate(args)
    # An @triton.autotune times every config first; the profile is of the launches that count.
    records = [r for r in records if not r.autotune_benchmark] or records
    if not records:
        raise MeasureError(
            f"case {case.name}: the candidate launched no Triton kernel; the entry function must "
            "call a @triton.jit kernel"
        )
    return records


def profile_case(records: list[LaunchRecord], case: Case, gpu: GpuSpec) -> CaseProfile:
    """Static profiles for `gpu`'s architecture and the estimate of one case."""
    pairs = [(record, static_profile(record, gpu.cc)) for record in records]
    return CaseProfile(case, pairs, estimate_case(pairs, gpu))


def estimate_label(target: str, gpu: GpuSpec) -> str:
    """The method text of an estimate; says which GPU the `cpu` target stands for."""
    if target == "cpu":
        return f"cost model (target cpu: estimated for reference GPU {gpu.name})"
    return f"cost model for {gpu.name}"


def features_from_estimate(profiles: list[CaseProfile], time_ms: float) -> Features:
    """phi from the slowest case's dominant kernel; h from the cost model (labelled estimate)."""
    slowest = max(profiles, key=lambda p: p.estimate.time_ms)
    launch = slowest.estimate.dominant()
    h = (launch.sm_pct, launch.dram_pct, launch.l2_pct) if launch else (0.0, 0.0, 0.0)
    return build_features(time_ms, "estimate", slowest.dominant_profile(), h, "estimate")
