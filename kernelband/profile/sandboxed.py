"""Entry points for the worker, CLI and API: they run the profile code in a sandbox child."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernelband.problem.model import KernelProblem
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, resolve_target
from kernelband.profile.features import Features
from kernelband.profile.measure import MeasureError, Measurement

MEASURE_TARGET = "kernelband.profile.measure:measure_candidate_task"
GPU_MEASURE_WALL_S = 300.0  # timing every case, paired runs and an ncu pass take longer than a check
REPORT_TARGET = "kernelband.profile.report:profile_report_task"


def _run(
    target: str, payload: dict[str, Any], interpret: bool, limits: Any, min_wall_s: float = 0.0
) -> dict[str, Any]:
    from kernelband.sandbox import SandboxLimits, run_sandboxed

    limits = limits or SandboxLimits.from_settings()
    limits = replace(limits, interpret=interpret, wall_s=max(limits.wall_s, min_wall_s))
    result = run_sandboxed(target, payload, limits)
    if not result.ok or not isinstance(result.value, dict):
        first = result.message.strip().splitlines()[0] if result.message.strip() else ""
        raise MeasureError(f"profiling failed in the sandbox ({result.reason}): {first}".rstrip(": "))
    return result.value


def _on_gpu(target: str) -> bool:
    from kernelband.sandbox.device import detect_device

    return target != "cpu" and detect_device().startswith("cuda")


def measure_candidate(
    problem: KernelProblem, editable: str | None, target: str, *,
    parent_editable: str | None = None, limits: Any = None,
) -> tuple[Measurement, Features]:
    """Measured on this node's GPU, else the labelled estimate; candidate code runs sandboxed."""
    resolve_target(target)  # fail fast, in this process, on an unknown target
    payload = {"problem": problem.to_dict(), "editable": editable, "target": target,
               "parent_editable": parent_editable}
    on_gpu = _on_gpu(target)
    value = _run(MEASURE_TARGET, payload, not on_gpu, limits, GPU_MEASURE_WALL_S if on_gpu else 0.0)
    return Measurement.from_dict(value["measurement"]), Features.from_dict(value["features"])


def static_profile_candidate(
    problem: KernelProblem, editable: str | None, target: str, *,
    reference_gpu: str = DEFAULT_REFERENCE_GPU, limits: Any = None,
) -> dict[str, Any]:
    """The profile report (static profile, estimate, phi, h; each labelled) without a GPU."""
    resolve_target(target, reference_gpu)
    payload = {"problem": problem.to_dict(), "editable": editable, "target": target,
               "reference_gpu": reference_gpu}
    return _run(REPORT_TARGET, payload, True, limits)
