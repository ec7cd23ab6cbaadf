"""The profile report of a candidate for one target: static profile, estimate, phi and h,
each labelled. Runs in the sandbox child (`profile_report_task` is its target)."""

from __future__ import annotations

import tempfile
from typing import Any

from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, resolve_target
from kernelband.profile.case_profile import (
    capture_case,
    estimate_label,
    features_from_estimate,
    profile_case,
)
from kernelband.profile.measurement import Measurement


def profile_report_local(
    problem: KernelProblem, editable: str | None, target: str, reference_gpu: str = DEFAULT_REFERENCE_GPU
) -> dict[str, Any]:
    """Per case and launch: launch parameters, static profile (label static) and estimate."""
    gpu = resolve_target(target, reference_gpu)
    with tempfile.TemporaryDirectory(prefix="kb-report-") as workdir:
        runtime = load_runtime(problem, editable, "cpu", workdir=workdir)
        profiles = [profile_case(capture_case(runtime, c, execute=False), c, gpu) for c in problem.cases]
    cases = []
    for profile in profiles:
        launches = [
            {"launch": record.summary(), "static": static.to_dict(), "estimate": estimate.to_dict()}
            for (record, static), estimate in zip(profile.pairs, profile.estimate.launches, strict=True)
        ]
        cases.append({"case": profile.case.name, "estimated_time_ms": profile.estimate.time_ms,
                      "launches": launches})
    total = sum(p.estimate.time_ms for p in profiles)
    measurement = Measurement("estimated", estimate_label(target, gpu), f"{gpu.name} (not run)", target,
                              total, {p.case.name: p.estimate.time_ms for p in profiles})
    features = features_from_estimate(profiles, total)
    return {
        "target": target, "gpu": gpu.name, "arch": f"sm_{gpu.cc}", "gpu_source": gpu.source,
        "limits_source": gpu.limits.source, "cases": cases,
        "measurement": measurement.to_dict(), "features": features.to_dict(),
        "features_named": features.named(),
    }


def profile_report_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, target, reference_gpu?}` -> the report dict."""
    return profile_report_local(
        KernelProblem.from_dict(payload["problem"]), payload.get("editable"), payload["target"],
        payload.get("reference_gpu") or DEFAULT_REFERENCE_GPU,
    )
