"""The measured path: CUDA-event timing of every public case, phi from the driver and the static
profile. Runs only on a GPU node, inside the sandbox child; h comes from a later ncu pass."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelband.problem.model import Case, KernelProblem
from kernelband.profile.archs import ARCH_LIMITS, resolve_target
from kernelband.profile.estimate import estimate_case
from kernelband.profile.features import Features, build_features
from kernelband.profile.measure import Measurement, capture_case
from kernelband.profile.ncu_pass import NcuCase
from kernelband.profile.static import static_profile
from kernelband.profile.timing import (
    CudaDevice,
    Prepare,
    TimingConfig,
    TimingStats,
    measure,
    measure_paired,
)


def _prepare(runtime: Any, case: Case, fresh_inputs: bool) -> Callable[[], Callable[[], Any]]:
    """A factory of timed runs; inputs are rebuilt per run when the kernel writes in place."""
    shared = None if fresh_inputs else runtime.inputs(case, 0)

    def prepare() -> Callable[[], Any]:
        args = runtime.inputs(case, 0) if fresh_inputs else shared
        return lambda: runtime.candidate(args)

    return prepare


def _device_cc(device: CudaDevice) -> int:
    cc = device.capability[0] * 10 + device.capability[1]
    return cc if cc in ARCH_LIMITS else min(ARCH_LIMITS, key=lambda known: abs(known - cc))


def gpu_features(
    problem: KernelProblem, runtime: Any, device: CudaDevice, target: str, slowest: int,
    time_ms: float,
) -> tuple[Features, NcuCase]:
    """phi from the driver-reported registers and the static profile; h the roofline estimate
    (labelled `estimate`) until an Nsight Compute pass of the returned case replaces it."""
    case = problem.cases[slowest]
    records = capture_case(runtime, case, execute=True)
    cc = _device_cc(device)
    pairs = [(r, static_profile(r, cc)) for r in records]
    estimate = estimate_case(pairs, resolve_target(target if target != "cpu" else "h100"))
    times = [e.time_ms for e in estimate.launches]
    record, profile = pairs[times.index(max(times))]
    registers = getattr(record.compiled, "n_regs", None)
    launch = estimate.dominant()
    h = (launch.sm_pct, launch.dram_pct, launch.l2_pct) if launch else (0.0, 0.0, 0.0)
    features = build_features(time_ms, "driver", profile, h, "estimate", registers)
    return features, NcuCase(slowest, tuple(sorted({r.kernel_name for r in records})))


def measure_on_gpu(
    problem: KernelProblem, editable: str | None, target: str, *,
    parent_editable: str | None = None, config: TimingConfig | None = None,
) -> tuple[Measurement, Features, NcuCase]:
    """Time every public case with CUDA events (paired with the parent when given).

    h is the labelled estimate; the returned case is what an Nsight Compute pass should profile
    (kernelband/profile/ncu_pass.py), in another process: this one has a CUDA context.
    """
    with tempfile.TemporaryDirectory(prefix="kb-measure-") as workdir:
        return _measure_in(problem, editable, target, parent_editable, config, Path(workdir))


def _measure_in(
    problem: KernelProblem, editable: str | None, target: str, parent_editable: str | None,
    config: TimingConfig | None, workdir: Path,
) -> tuple[Measurement, Features, NcuCase]:
    from kernelband.problem.runtime import load_runtime

    device = CudaDevice()
    runtime = load_runtime(problem, editable, "cuda", workdir=workdir)
    parent = None
    if parent_editable is not None:
        parent = load_runtime(problem, parent_editable, "cuda", workdir=workdir)
    timed, how = timed_cases(problem, runtime, workdir, "child")
    parent_timed = timed_cases(problem, parent, workdir, "parent")[0] if parent else None
    stats: list[TimingStats] = []
    weighted_ratio, parent_sum = 0.0, 0.0
    noisy = False
    for i, (_, child) in enumerate(timed):
        if parent_timed is None:
            stats.append(measure(device, child, config))
            continue
        paired = measure_paired(device, parent_timed[i][1], child, config)
        stats.append(paired.child)
        noisy |= paired.noisy
        weighted_ratio += paired.parent.median_ms * paired.ratio
        parent_sum += paired.parent.median_ms
    case_times = {name: s.median_ms for (name, _), s in zip(timed, stats, strict=True)}
    total = sum(case_times.values())
    method = f"{how}; cuda events, L2 flushed, median" + (", paired A/B" if parent else "")
    measurement = Measurement(
        "measured", method, device.name, target, total, case_times,
        cv=max(s.cv for s in stats), noisy=noisy or any(s.noisy for s in stats),
        paired_ratio=weighted_ratio / parent_sum if parent_sum > 0 else None,
    )
    slowest = max(range(len(stats)), key=lambda i: stats[i].median_ms)
    slowest = slowest if len(timed) == len(problem.cases) else 0  # harness inputs are not cases
    return (measurement, *gpu_features(problem, runtime, device, target, slowest, total))


def timed_cases(problem: KernelProblem, runtime: Any, workdir: Path,
                role: str) -> tuple[list[tuple[str, Prepare]], str]:
    """What is timed, and how to say it: the performance harness's inputs (call_op alone),
    a TritonBench test's calls into the region, or each public case of the entry function."""
    from kernelband.profile.perf_harness import harness_prepares, load_harness, region_prepare

    if problem.perf_source:
        harness = load_harness(problem.perf_source, runtime.candidate_module, workdir, role)
        return harness_prepares(harness), "perf harness, call_op alone"
    if problem.format == "tritonbench":
        prepare = region_prepare(problem, runtime, "candidate", "cuda")
        return [("region_calls", prepare)], "region calls only, inputs untimed"
    fresh = bool(problem.inplace_outputs)
    return [(c.name, _prepare(runtime, c, fresh)) for c in problem.cases], "public cases"
