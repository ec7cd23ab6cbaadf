"""Measure a candidate: CUDA timing on a GPU node, the labelled cost-model estimate elsewhere.

Both paths execute candidate code, so the functions here run in the sandbox child;
`kernelband.profile.sandboxed` starts that child (`measure_candidate_task` is its target).
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelband.problem.model import Case, KernelProblem
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, GpuSpec, resolve_target
from kernelband.profile.estimate import CaseEstimate, estimate_case
from kernelband.profile.features import Features, build_features
from kernelband.profile.launches import LaunchRecord, capture_launches
from kernelband.profile.ncu_pass import NcuCase
from kernelband.profile.paired import PairedSpeedup
from kernelband.profile.static import StaticProfile, static_profile


class MeasureError(RuntimeError):
    """A candidate that cannot be measured; the message says why and what to change."""


class TimingCheckError(MeasureError):
    """A timed call broke a rule (wrong result, tampering); `reason` names it (issue 18)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Measurement:
    """A time for a candidate, always labelled `measured` (GPU, method) or `estimated`."""

    label: str  # measured | estimated
    method: str
    device: str
    target: str
    time_ms: float  # sum over public cases
    case_times_ms: dict[str, float] = field(default_factory=dict)
    cv: float = 0.0
    noisy: bool = False
    paired_ratio: float | None = None  # child / parent time, when a parent was given
    # issue 18 (measured only): physical floor per case, what verified timing checked, and the
    # share of GPU time spent in the candidate's Triton kernels (torch.profiler)
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


def _estimate_all(problem: KernelProblem, editable: str | None, gpu: GpuSpec) -> list[CaseProfile]:
    from kernelband.problem.runtime import load_runtime

    with tempfile.TemporaryDirectory(prefix="kb-estimate-") as workdir:
        runtime = load_runtime(problem, editable, "cpu", workdir=workdir)
        return [profile_case(capture_case(runtime, case, execute=False), case, gpu) for case in problem.cases]


def features_from_estimate(profiles: list[CaseProfile], time_ms: float) -> Features:
    """phi from the slowest case's dominant kernel; h from the cost model (labelled estimate)."""
    slowest = max(profiles, key=lambda p: p.estimate.time_ms)
    launch = slowest.estimate.dominant()
    h = (launch.sm_pct, launch.dram_pct, launch.l2_pct) if launch else (0.0, 0.0, 0.0)
    return build_features(time_ms, "estimate", slowest.dominant_profile(), h, "estimate")


def estimate_candidate(
    problem: KernelProblem,
    editable: str | None,
    target: str,
    *,
    parent_editable: str | None = None,
    reference_gpu: str = DEFAULT_REFERENCE_GPU,
) -> tuple[Measurement, Features]:
    """The cost-model estimate for `target` (no GPU needed); every figure labelled estimated."""
    gpu = resolve_target(target, reference_gpu)
    profiles = _estimate_all(problem, editable, gpu)
    case_times = {p.case.name: p.estimate.time_ms for p in profiles}
    total = sum(case_times.values())
    ratio = None
    if parent_editable is not None and problem.needs_translation and parent_editable == problem.editable:
        from kernelband.profile.reference import estimate_reference  # the parent is PyTorch

        parent_total = estimate_reference(problem, target, reference_gpu)[0].time_ms
        ratio = total / parent_total if parent_total > 0 else None
    elif parent_editable is not None:
        parent_total = sum(p.estimate.time_ms for p in _estimate_all(problem, parent_editable, gpu))
        ratio = total / parent_total if parent_total > 0 else None
    measurement = Measurement("estimated", estimate_label(target, gpu), f"{gpu.name} (not run)", target,
                              total, case_times, paired_ratio=ratio)
    return measurement, features_from_estimate(profiles, total)


def measure_candidate_local(
    problem: KernelProblem, editable: str | None, target: str, *,
    parent_editable: str | None = None, strict: bool = False,
) -> tuple[Measurement, Features, NcuCase | None]:
    """In this process (the sandbox child): measure on the GPU if there is one, else estimate.

    On a GPU, h is the estimate and the case is what an Nsight Compute pass should profile.
    """
    import torch

    if target != "cpu" and torch.cuda.is_available():
        from kernelband.profile.gpu import measure_on_gpu

        return measure_on_gpu(problem, editable, target, parent_editable=parent_editable, strict=strict)
    if editable is None and problem.needs_translation:  # the PyTorch reference: no Triton launch
        from kernelband.profile.reference import estimate_reference

        return (*estimate_reference(problem, target), None)
    return (*estimate_candidate(problem, editable, target, parent_editable=parent_editable), None)


def measure_candidate_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, target, parent_editable, strict}` ->
    `{measurement, features, ncu_case}` (`ncu_case` None without a GPU), or `{rejected}`."""
    from kernelband.evaluate.verified_timing import TimingRejected

    problem = KernelProblem.from_dict(payload["problem"])
    try:
        measurement, features, case = measure_candidate_local(
            problem, payload.get("editable"), payload["target"],
            parent_editable=payload.get("parent_editable"), strict=bool(payload.get("strict")),
        )
    except TimingRejected as rej:  # issue 18: a wrong timed call rejects, with its reason
        return {"rejected": {"reason": rej.reason, "message": f"{rej.reason}: {rej.message}"}}
    return {"measurement": measurement.to_dict(), "features": features.to_dict(),
            "ncu_case": case.to_dict() if case else None}
