"""Measure a candidate: CUDA timing on a GPU node, the labelled cost-model estimate elsewhere.

Both paths execute candidate code, so the functions here run in the sandbox child;
`kernelband.profile.sandboxed` starts that child (`measure_candidate_task` is its target).
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, GpuSpec, resolve_target
from kernelband.profile.case_profile import (
    CaseProfile,
    capture_case,
    estimate_label,
    features_from_estimate,
    profile_case,
)
from kernelband.profile.features import Features
from kernelband.profile.gpu import measure_on_gpu
from kernelband.profile.measurement import Measurement
from kernelband.profile.ncu_pass import NcuCase
from kernelband.profile.reference import estimate_reference


def _estimate_all(problem: KernelProblem, editable: str | None, gpu: GpuSpec) -> list[CaseProfile]:
    with tempfile.TemporaryDirectory(prefix="kb-estimate-") as workdir:
        runtime = load_runtime(problem, editable, "cpu", workdir=workdir)
        return [profile_case(capture_case(runtime, case, execute=False), case, gpu) for case in problem.cases]


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
        # the parent is the PyTorch reference: no Triton launch for the cost model
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
    if target != "cpu" and torch.cuda.is_available():
        return measure_on_gpu(problem, editable, target, parent_editable=parent_editable, strict=strict)
    if editable is None and problem.needs_translation:  # the PyTorch reference: no Triton launch
        return (*estimate_reference(problem, target), None)
    return (*estimate_candidate(problem, editable, target, parent_editable=parent_editable), None)


def measure_candidate_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, target, parent_editable, strict}` ->
    `{measurement, features, ncu_case}` (`ncu_case` None without a GPU), or `{rejected}`."""
    problem = KernelProblem.from_dict(payload["problem"])
    try:
        measurement, features, case = measure_candidate_local(
            problem, payload.get("editable"), payload["target"],
            parent_editable=payload.get("parent_editable"), strict=bool(payload.get("strict")),
        )
    except TimingRejected as rej:  # a wrong timed call is the candidate's rejection, with its reason
        return {"rejected": {"reason": rej.reason, "message": f"{rej.reason}: {rej.message}"}}
    return {"measurement": measurement.to_dict(), "features": features.to_dict(),
            "ncu_case": case.to_dict() if case else None}
