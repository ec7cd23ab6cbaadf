"""The measured path: CUDA-event timing of every public case, phi from the driver and the static
profile. Runs only on a GPU node, inside the sandbox child; h comes from a later ncu pass."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelband.evaluate.gpu_share import triton_share
from kernelband.evaluate.integrity import TimerSeal
from kernelband.evaluate.plausibility import floor_ms
from kernelband.evaluate.verified_timing import STRICT, VerifiedRuns, VerifyConfig
from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.archs import ARCH_LIMITS, resolve_target
from kernelband.profile.case_profile import capture_case
from kernelband.profile.estimate import estimate_case
from kernelband.profile.features import Features, build_features, reference_features
from kernelband.profile.measurement import Measurement
from kernelband.profile.ncu_pass import NcuCase
from kernelband.profile.perf_harness import harness_prepares, load_harness, region_prepare
from kernelband.profile.static import static_profile
from kernelband.profile.timing import (
    HARNESS_TIMING,
    KERNELBENCH_METHOD,
    KERNELBENCH_TIMING,
    CudaDevice,
    Prepare,
    TimingConfig,
    TimingStats,
    measure,
    measure_paired,
)


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
    parent_editable: str | None = None, config: TimingConfig | None = None, strict: bool = False,
) -> tuple[Measurement, Features, NcuCase | None]:
    """Time every public case with CUDA events (paired with the parent when given).

    Every timed call runs on rotating, salted input sets and a sample of the calls (all of them
    when `strict`) is checked against the reference (`kernelband.evaluate.verified_timing`); a
    wrong timed call raises `TimingRejected`. h is the labelled estimate; the returned case is
    what an Nsight Compute pass should profile (kernelband/profile/ncu_pass.py), in another
    process: this one has a CUDA context. KernelBench problems are timed as KernelBench's
    harness times them (KERNELBENCH_TIMING, mean); the PyTorch placeholder of a published
    KernelBench file is timed the same way and returns no case for Nsight Compute.
    """
    with tempfile.TemporaryDirectory(prefix="kb-measure-") as workdir:
        return _measure_in(problem, editable, target, parent_editable, config, Path(workdir), strict)


def _measure_in(
    problem: KernelProblem, editable: str | None, target: str, parent_editable: str | None,
    config: TimingConfig | None, workdir: Path, strict: bool = False,
) -> tuple[Measurement, Features, NcuCase | None]:
    seal = TimerSeal()  # before candidate code runs: checked after every verified call
    device = CudaDevice()
    runtime = load_runtime(problem, editable, "cuda", workdir=workdir)
    parent = None
    if parent_editable is not None:
        parent = load_runtime(problem, parent_editable, "cuda", workdir=workdir)
    if problem.perf_source or problem.format == "tritonbench":
        return _measure_harness(problem, runtime, parent, device, target, config, workdir)
    kernelbench = problem.format == "kernelbench"  # timed as KernelBench's harness times
    config = config or (KERNELBENCH_TIMING if kernelbench else None)
    timed = _time_cases(problem, runtime, parent, device, config, STRICT if strict else VerifyConfig(), seal)
    stats = timed.stats
    case_times = {c.name: s.mean_ms if kernelbench else s.median_ms
                  for c, s in zip(problem.cases, stats, strict=True)}
    total = sum(case_times.values())
    how = KERNELBENCH_METHOD if kernelbench else "cuda events, L2 flushed per run, median"
    method = (f"{how}, timed calls verified"
              + (" (every call)" if strict else " (sampled)") + (", paired A/B with parent" if parent else ""))
    gpu = resolve_target(target if target != "cpu" else "h100")
    slowest = max(range(len(stats)), key=lambda i: stats[i].median_ms)
    placeholder = editable is None and problem.needs_translation  # the PyTorch reference itself
    measurement = Measurement(
        "measured", method, device.name, target, total, case_times,
        cv=max(s.cv for s in stats), noisy=timed.noisy or any(s.noisy for s in stats),
        paired_ratio=timed.weighted_ratio / timed.parent_sum if timed.parent_sum > 0 else None,
        floors_ms={name: floor_ms(n, gpu) for name, n in timed.output_bytes.items()},
        checks={"calls": sum(c["calls"] for c in timed.checks),
                "verified_calls": sum(c["verified_calls"] for c in timed.checks),
                "verify_s": round(sum(c["verify_s"] for c in timed.checks), 4), "strict": strict},
        triton_share=None if placeholder else triton_share(runtime, problem.cases[slowest]),
    )
    if placeholder:
        return measurement, reference_features(total, "driver"), None
    return (measurement, *gpu_features(problem, runtime, device, target, slowest, total))


@dataclass
class _Timed:
    stats: list[TimingStats] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    output_bytes: dict[str, int] = field(default_factory=dict)
    weighted_ratio: float = 0.0
    parent_sum: float = 0.0
    noisy: bool = False


def _time_cases(problem: KernelProblem, runtime: Any, parent: Any, device: CudaDevice,
                config: TimingConfig | None, verify: Any, seal: Any) -> _Timed:
    timed = _Timed()
    for case in problem.cases:
        child = VerifiedRuns(runtime, problem, case, verify, seal=seal)
        if parent is None:
            timed.stats.append(measure(device, child.prepare, config))
        else:
            # the parent is fed the same way (fair), but its checks never reject the child
            parent_runs = VerifiedRuns(parent, problem, case, verify, seal=seal, lenient=True)
            paired = measure_paired(device, parent_runs.prepare, child.prepare, config)
            parent_runs.finish()
            timed.stats.append(paired.child)
            timed.noisy |= paired.noisy
            timed.weighted_ratio += paired.parent.median_ms * paired.ratio
            timed.parent_sum += paired.parent.median_ms
        timed.checks.append(child.finish())
        timed.output_bytes[case.name] = child.output_bytes
    return timed


def _measure_harness(
    problem: KernelProblem, runtime: Any, parent: Any, device: CudaDevice, target: str,
    config: TimingConfig | None, workdir: Path,
) -> tuple[Measurement, Features, NcuCase]:
    """TritonBench-G timing as its authors time it: the performance harness's inputs (call_op
    alone), or without a harness only the test's calls into the region (inputs untimed).

    These calls are not verified one by one as the public cases are: their correctness rests on
    the evaluator's check of the same candidate and on the implausibility gate."""
    config = config or HARNESS_TIMING
    timed, how, harness = harness_cases(problem, runtime, workdir, "child")
    parent_timed = (harness_cases(problem, parent, workdir, "parent", inputs_from=harness)[0]
                    if parent else None)
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
    method = (f"{how}; cuda events, L2 flushed, median, timed calls not verified"
              + (", paired A/B with parent" if parent else ""))
    measurement = Measurement(
        "measured", method, device.name, target, total, case_times,
        cv=max(s.cv for s in stats), noisy=noisy or any(s.noisy for s in stats),
        paired_ratio=weighted_ratio / parent_sum if parent_sum > 0 else None,
        triton_share=triton_share(runtime, problem.cases[0]),
    )
    return (measurement, *gpu_features(problem, runtime, device, target, 0, total))


def harness_cases(problem: KernelProblem, runtime: Any, workdir: Path, role: str,
                  inputs_from: Any = None) -> tuple[list[tuple[str, Prepare]], str, Any]:
    """What a TritonBench-G problem times, how to say it, and the harness (None without one):
    the performance harness's inputs (call_op alone; the same host inputs as `inputs_from`
    when given), or the test's calls into the region."""
    if problem.perf_source:
        harness = load_harness(problem.perf_source, runtime.candidate_module, workdir, role)
        return (harness_prepares(harness, inputs_from=inputs_from),
                "perf harness, call_op alone", harness)
    prepare = region_prepare(problem, runtime, "candidate", "cuda")
    return [("region_calls", prepare)], "region calls only, inputs untimed", None
