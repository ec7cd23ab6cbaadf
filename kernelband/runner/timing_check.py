"""Verified timing as a sandbox target: every public case timed with its calls checked.

`timing_check_task` runs in a sandbox child (it loads the problem runtime). On a GPU it times
with CUDA events; on the CPU with the host clock (`HostDevice`, times labelled `host timer`:
they show that the checks work, they are not kernel timings). `check_timing` starts that child
from trusted code; the tests use it. The service's own measurement path wires the same
`VerifiedRuns` into `kernelband.profile.gpu`.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, replace
from typing import Any

from kernelband.evaluate.integrity import TimerSeal
from kernelband.evaluate.verified_timing import STRICT, TimingRejected, VerifiedRuns, VerifyConfig
from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.timing import CudaDevice, DeviceLayer, Event, TimingConfig, measure
from kernelband.sandbox import SandboxLimits, run_sandboxed

TARGET = "kernelband.runner.timing_check:timing_check_task"
# The CPU interpreter is slow: a short run still exercises warm-up, repetitions and checks.
HOST_CONFIG = TimingConfig(warmup=3, min_reps=12, max_reps=12, budget_ms=0.0, flush_l2=False)


class _HostEvent:
    def __init__(self) -> None:
        self.stamp = 0.0

    def record(self) -> None:
        self.stamp = time.perf_counter()

    def elapsed_ms(self, end: Event) -> float:
        return (end.stamp - self.stamp) * 1e3  # type: ignore[attr-defined]


class HostDevice:
    """`DeviceLayer` on the host clock (CPU interpreter runs; no L2 to flush)."""

    name = "host timer (cpu)"

    def event(self) -> Event:
        return _HostEvent()

    def synchronize(self) -> None:
        return None

    def flush_l2(self) -> None:
        return None


def _device_layer(device: str) -> DeviceLayer:
    if device.startswith("cuda"):
        return CudaDevice()
    return HostDevice()


def time_cases_verified(problem: KernelProblem, runtime: Any, layer: DeviceLayer, config: TimingConfig,
                        verify: VerifyConfig) -> dict[str, Any]:
    """Median ms per public case, every case's timed calls checked; raises TimingRejected."""
    times, checks = {}, []
    for case in problem.cases:
        runs = VerifiedRuns(runtime, problem, case, verify)
        stats = measure(layer, runs.prepare, config)
        checks.append(runs.finish())
        times[case.name] = stats.median_ms
    return {"case_times_ms": times, "checks": checks}


def timing_check_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, device, strict}` -> `{ok, reason, message, ...}`."""
    problem = KernelProblem.from_dict(payload["problem"])
    device = str(payload.get("device") or "cpu")
    verify = STRICT if payload.get("strict") else VerifyConfig()
    config = TimingConfig(**payload["timing"]) if payload.get("timing") else (
        HOST_CONFIG if not device.startswith("cuda") else TimingConfig())
    seal = TimerSeal()
    with tempfile.TemporaryDirectory(prefix="kb-timing-") as workdir:
        runtime = load_runtime(problem, payload.get("editable"), device, workdir=workdir)
        layer = _device_layer(device)
        try:
            result = time_cases_verified(problem, runtime, layer, config, verify)
        except TimingRejected as rej:
            return {"ok": False, "reason": rej.reason, "message": f"{rej.reason}: {rej.message}"}
    if broken := seal.broken():
        return {"ok": False, "reason": "timer_tampered", "message": f"timer_tampered: {broken} was replaced"}
    return {"ok": True, "reason": "ok", "message": "", "timer": layer.name, **result}


def check_timing(problem: KernelProblem, editable: str | None, *, device: str = "cpu",
                 strict: bool = False, limits: Any = None, timing: TimingConfig | None = None) -> dict[str, Any]:
    """Run `timing_check_task` in a sandbox child (a fresh interpreter when `strict`)."""
    limits = limits or SandboxLimits.from_settings()
    limits = replace(limits, interpret=not device.startswith("cuda"), warm=limits.warm and not strict)
    payload = {"problem": problem.to_dict(), "editable": editable, "device": device, "strict": strict,
               "timing": asdict(timing) if timing else None}
    result = run_sandboxed(TARGET, payload, limits)
    if result.ok and isinstance(result.value, dict):
        return result.value
    first = result.message.strip().splitlines()[0] if result.message.strip() else result.reason
    return {"ok": False, "reason": result.reason, "message": f"{result.reason}: {first}"}
