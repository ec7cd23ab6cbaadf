"""The measured path on a GPU node: paired against the original in two runners, judge-timed.

Runs in the judge (the GPU worker's task process), which never imports submitted code and never
initialises CUDA: the runners do both. The candidate's runner also reports phi and the case an
Nsight Compute pass should profile, as the single-process path did; the physical floors come from
the sizes of the outputs the judge itself loaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kernelband.config import get_settings
from kernelband.evaluate.plausibility import floor_ms
from kernelband.problem.model import KernelProblem
from kernelband.profile.archs import resolve_target
from kernelband.profile.features import Features, reference_features, with_time
from kernelband.profile.measurement import MeasureError, Measurement, UntilChecked
from kernelband.profile.paired_result import measurement_of
from kernelband.profile.paired_runners import PairedConfig, Runner, timed_call
from kernelband.profile.paired_timing import PairedRun, measure_paired_runners
from kernelband.sandbox import SandboxLimits
from kernelband.sandbox.cores import measuring_cores
from kernelband.sandbox.device import detect_device
from kernelband.sandbox.session import SessionError

FEATURES_TIMEOUT_S = 300.0
FEATURES_ERROR_CHARS = 200  # of the runner's own words in a note: enough to say what failed


def config_from_settings(strict: bool = False) -> PairedConfig:
    """The node's paired-timing settings; `strict`: every round's outputs checked."""
    s = get_settings()
    config = PairedConfig(rounds=s.measure_rounds, min_rounds=min(s.measure_min_rounds, s.measure_rounds),
                          settle_width=s.measure_settle_width, batch_ms=s.measure_batch_ms,
                          graphs=s.measure_graphs, cores=measuring_cores(s.measure_cores, detect_device()),
                          max_cases=s.measure_max_cases, compile_before_tuning=s.measure_compile_before_tuning,
                          inputs_on_device=s.measure_inputs_on_device)
    return replace(config, verify_fraction=1.0) if strict else config


def gpu_name(target: str) -> str:
    """This node's GPU name from nvidia-smi (no CUDA context here); the target's GPU otherwise."""
    smi = shutil.which("nvidia-smi")
    if smi:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        command = [smi, "--query-gpu=name", "--format=csv,noheader"] + (["-i", visible] if visible else [])
        try:
            names = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            names = []
        if names and names[0].strip():
            return names[0].strip()
    return f"{resolve_target(target).name} (name not read: nvidia-smi unavailable)"


TIME_ONLY_NOTE = "not measured: this measurement reads only the time (registers and h were not taken)"
STATIC_NOTE = ("estimated: phi's registers, shared memory, block size and occupancy and h come from the "
               "compile step's static profile for this target; the time is measured")


def _candidate_medians(run: PairedRun) -> dict[str, float]:
    """The candidate's median ms per call of each timed case."""
    return {c: sorted(run.case_candidate_ms[c])[len(run.case_candidate_ms[c]) // 2] for c in run.cases}


def _features_of_run(run: PairedRun, static: Features | None = None) -> dict[str, Any]:
    """No features pass in the candidate's runner (and no GPU turn to wait for): phi holds the
    measured time alone, labelled, or, given the compile step's static features, those with the
    measured time; no Nsight Compute case either way."""
    time_ms = sum(_candidate_medians(run).values())
    if static is not None:
        return {"features": with_time(static, time_ms, "driver", STATIC_NOTE).to_dict()}
    return _time_only(time_ms, TIME_ONLY_NOTE)


def _time_only(time_ms: float, note: str) -> dict[str, Any]:
    return {"features": replace(reference_features(time_ms, "driver"), h_note=note).to_dict()}


def _features_after(target: str, placeholder: bool) -> Any:
    """The candidate runner's features command; the PyTorch placeholder of a KernelBench file
    launches no Triton kernel, so it gets the reference's features (its time only)."""
    def after(candidate: Runner, run: PairedRun) -> dict[str, Any]:
        medians = _candidate_medians(run)
        if placeholder:
            return {"features": reference_features(sum(medians.values()), "driver").to_dict()}
        # the runner indexes all its cases; the timed ones may be a subset of them
        slowest = candidate.cases.index(max(run.cases, key=lambda c: medians[c]))
        try:
            reply = candidate.session.request({"cmd": "features", "target": target, "slowest": slowest,
                                               "time_ms": sum(medians.values())}, FEATURES_TIMEOUT_S)
        except SessionError as exc:
            raise MeasureError(f"the candidate's runner failed while profiling ({exc.reason}): {exc}") from exc
        if not reply.value.get("ok"):
            # the time is the judge's and stands without them: phi holds it alone, labelled
            return _time_only(sum(medians.values()), "not measured: the runner's features pass failed ("
                              f"{str(reply.value.get('error'))[:FEATURES_ERROR_CHARS]})")
        return reply.value
    return after


def _static_or_runner_pass(later: Callable[[], Features | None], runner_pass: Any) -> Any:
    """Features from a static report made beside the measurement, else the runner's pass."""
    def after(candidate: Runner, run: PairedRun) -> dict[str, Any]:
        static = later()
        return _features_of_run(run, static) if static is not None else runner_pass(candidate, run)
    return after


def measure_paired_on_gpu(
    problem: KernelProblem, editable: str | None, target: str, *, config: PairedConfig | None = None,
    strict: bool = False, limits: Any = None, baseline_ms: float | None = None, features: bool = True,
    static: Features | Callable[[], Features | None] | None = None, until_checked: UntilChecked | None = None,
) -> tuple[Measurement, Features, dict[str, Any] | None]:
    """(Measurement with its paired speedup, Features, the Nsight Compute case) for `editable`.

    Raises TimingRejected when a timed call breaks a rule, MeasureError when nothing usable came
    back. `strict` (the implausibility gate's re-measure): fresh runners, every round checked.
    `features=False` (a re-measure, an A/A run): no features pass, the time alone. `static`: the
    compile step's static features for this target, taken with the measured time instead of a
    features pass (no Nsight Compute case then); or a call that returns them once made beside this
    measurement (None: the runner's features pass after all). `until_checked`: see
    `measure_paired_runners`."""
    config = config or config_from_settings(strict)
    limits = limits or SandboxLimits.from_settings()
    if strict:
        limits = replace(limits, warm=False)
    later = static if callable(static) else None
    known = None if callable(static) else static
    after = None
    if features and (static is None or later is not None):
        after = _features_after(target, timed_call(problem, editable) == "reference")
        if later is not None:
            after = _static_or_runner_pass(later, after)
    run = measure_paired_runners(problem, editable, "cuda", config, limits=limits, keep_original=not strict,
                                 after=after, until_checked=until_checked)
    if after is None:
        run.extras = _features_of_run(run, known if features else None)
    measurement = measurement_of(problem, run, device_name=gpu_name(target), target=target, config=config,
                                 baseline_ms=baseline_ms)
    gpu = resolve_target(target if target != "cpu" else "h100")
    share = run.extras.get("triton_share")
    measurement = replace(
        measurement, floors_ms={c: floor_ms(n, gpu) for c, n in run.output_bytes.items()},
        triton_share=float(share) if isinstance(share, int | float) else None,
        checks={**measurement.checks, "strict": strict},
    )
    return measurement, Features.from_dict(run.extras["features"]), run.extras.get("ncu_case")
