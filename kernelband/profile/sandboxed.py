"""Entry points for the worker, CLI and API: they run the profile code in a sandbox child."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from dataclasses import replace
from textwrap import shorten
from typing import Any

from kernelband.problem.model import KernelProblem
from kernelband.profile import ncu
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, resolve_target
from kernelband.profile.features import Features
from kernelband.profile.measurement import MeasureError, Measurement, TimingCheckError, UntilChecked
from kernelband.profile.ncu_pass import NCU_TIMEOUT_S
from kernelband.profile.specialize import StaticProfileError
from kernelband.sandbox import SandboxLimits, run_sandboxed
from kernelband.sandbox.device import detect_device
from kernelband.sandbox.jail import isolation_setting

MEASURE_TARGET = "kernelband.profile.measure:measure_candidate_task"
NCU_TARGET = "kernelband.profile.ncu_pass:ncu_pass_task"
GPU_MEASURE_WALL_S = 300.0  # timing every case and paired runs take longer than a check
REPORT_TARGET = "kernelband.profile.report:profile_report_task"
NOTE_CHARS = 400  # h_note: one readable line on the job page
log = logging.getLogger(__name__)


def _run(
    target: str, payload: dict[str, Any], interpret: bool, limits: Any, min_wall_s: float = 0.0
) -> dict[str, Any]:
    limits = limits or SandboxLimits.from_settings()
    limits = replace(limits, interpret=interpret, wall_s=max(limits.wall_s, min_wall_s))
    result = run_sandboxed(target, payload, limits)
    if not result.ok or not isinstance(result.value, dict):
        first = result.message.strip().splitlines()[0] if result.message.strip() else ""
        raise MeasureError(f"profiling failed in the sandbox ({result.reason}): {first}".rstrip(": "))
    return result.value


def _on_gpu(target: str) -> bool:
    return target != "cpu" and detect_device().startswith("cuda")


def measure_candidate(
    problem: KernelProblem, editable: str | None, target: str, *,
    parent_editable: str | None = None, limits: Any = None, hardware_signature: bool = True,
    timings: dict[str, float] | None = None, strict: bool = False,
    paired: bool = True, baseline_ms: float | None = None, paired_config: Any = None,
    features: bool = True, static_features: dict[str, Any] | None = None,
    until_checked: UntilChecked | None = None,
) -> tuple[Measurement, Features]:
    """Measured on this node's GPU, else the labelled estimate; candidate code runs sandboxed.

    On a GPU the candidate is timed against the problem's original in two live runners, in
    interleaved rounds, by the judge's clock (kernelband/profile/paired_timing.py): the result
    carries `speedup` (original / candidate, 95% interval) and its `time_ms` is `baseline_ms`
    (default: the original's time in this run) divided by the speedup, so every time the bandit
    compares is paired against the same original (`parent_editable` is not used there: the
    baseline is always the original; for a KernelBench file still in PyTorch, its Model).
    `paired=False` keeps the single-process CUDA-event path, whose times are unpaired.
    A second sandboxed run measures h with Nsight Compute (its wall seconds go to
    `timings["signature"]`); `hardware_signature=False` skips it and h stays the estimate.
    `strict`: fresh runners, every timed call verified (the implausibility gate's protocol).
    `features=False` (paired path): the time alone, no features pass in the candidate's runner.
    `static_features` (the compile step's, for this target): when no Nsight Compute pass will
    run, phi and the estimated h come from them with the measured time, and the candidate's
    runner makes no features pass; without them (an original has no compile step) a static
    profile report is made here first, in a sandbox on the CPU (`timings["measure_static"]`).
    A timed call that breaks a rule raises `TimingCheckError` with its reason. `until_checked`
    (the candidate's correctness check, running beside this measurement): called before anything
    is timed; it raises CandidateRefused for a candidate that must not be.
    """
    resolve_target(target)  # fail fast, in this process, on an unknown target
    on_gpu = _on_gpu(target)
    skipped = _signature_skipped(hardware_signature, limits) if on_gpu else ""
    static = None  # phi and h from a static profile: only where no runner features pass is needed
    beside: StaticBeside | None = None
    if on_gpu and paired and features and skipped:
        placeholder = editable is None and problem.needs_translation  # no Triton kernel to profile
        if static_features:
            static = Features.from_dict(static_features)
        elif not placeholder:
            beside = StaticBeside(problem, editable, target, limits, timings)
    if on_gpu and paired:
        measurement, found, case = _measure_paired(problem, editable, target, strict, limits, baseline_ms,
                                                   paired_config, timings, features, beside or static,
                                                   until_checked)
        static = beside() if beside is not None else static
    else:
        if until_checked is not None:
            until_checked()
        measurement, found, case = _measure_in_child(problem, editable, target, parent_editable,
                                                     strict, limits, on_gpu)
    if static is not None:
        found = replace(found, h_note=shorten(f"{found.h_note}; no Nsight Compute pass: {skipped}", NOTE_CHARS))
    elif case and not hardware_signature:
        found = replace(found, h_note="not measured: the job's policy does not read h")
    elif case:
        start = time.perf_counter()
        found = _with_ncu_signature(problem, editable, found, case, limits)
        if timings is not None:
            timings["signature"] = time.perf_counter() - start
    return measurement, found


class StaticBeside:
    """phi and the estimated h from a static profile report (a sandbox run on the CPU, no GPU
    turn: cheaper than a features pass in the runner), made in a thread beside the measurement,
    which asks for it once the timing is done (`beside()`: None when it could not be built;
    the runner's features pass then takes over). An original has no compile step to make it
    ahead, and its measurement starts its runner and tunes meanwhile; its own seconds go to
    `timings["measure_static"]`."""

    def __init__(self, problem: KernelProblem, editable: str | None, target: str, limits: Any,
                 timings: dict[str, float] | None) -> None:
        self.found: Features | None = None
        args = (problem, editable, target, limits, timings)
        # the job's limits live in a context variable: the thread runs in a copy of this context
        context = contextvars.copy_context()
        self.thread = threading.Thread(target=context.run, args=(self._make, *args), name="static-profile",
                                       daemon=True)
        self.thread.start()

    def _make(self, problem: KernelProblem, editable: str | None, target: str, limits: Any,
              timings: dict[str, float] | None) -> None:
        start = time.perf_counter()
        try:
            found = static_profile_candidate(problem, editable, target, limits=limits).get("features")
        except (MeasureError, StaticProfileError) as exc:
            log.info("no static features, the candidate's runner takes them: %s", exc)
            found = None
        if timings is not None:
            timings["measure_static"] = time.perf_counter() - start
        self.found = Features.from_dict(found) if isinstance(found, dict) else None

    def __call__(self) -> Features | None:
        self.thread.join()
        return self.found


def _signature_skipped(hardware_signature: bool, limits: Any) -> str:
    """Why no Nsight Compute pass would run for this measurement ("" when one would)."""
    if not hardware_signature:
        return "not measured: the job's policy does not read h"
    if ncu.find_ncu() is None:
        return "ncu not found on this GPU node: install Nsight Compute"
    return ncu_refused_by_jail(limits)


def _measure_in_child(problem: KernelProblem, editable: str | None, target: str, parent_editable: str | None,
                      strict: bool, limits: Any, on_gpu: bool) -> tuple[Measurement, Features, Any]:
    """One sandbox child measures (CUDA events, unpaired) or estimates."""
    payload = {"problem": problem.to_dict(), "editable": editable, "target": target,
               "parent_editable": parent_editable, "strict": strict}
    if strict:
        limits = replace(limits or SandboxLimits.from_settings(), warm=False)
    value = _run(MEASURE_TARGET, payload, not on_gpu, limits, GPU_MEASURE_WALL_S if on_gpu else 0.0)
    if rejected := value.get("rejected"):
        raise TimingCheckError(str(rejected["reason"]), str(rejected["message"]))
    measurement, features = Measurement.from_dict(value["measurement"]), Features.from_dict(value["features"])
    return measurement, features, value.get("ncu_case")  # the case: set on a GPU only


def _measure_paired(problem: KernelProblem, editable: str | None, target: str, strict: bool, limits: Any,
                    baseline_ms: float | None, config: Any, timings: dict[str, float] | None,
                    features: bool = True, static: Features | StaticBeside | None = None,
                    until_checked: UntilChecked | None = None) -> tuple[Measurement, Features, Any]:
    """Two live runners, judge-timed (kernelband/profile/paired_gpu.py); parts into `timings`."""
    # both load torch, which importing this package must not: only the GPU path needs them
    from kernelband.evaluate.verified_timing import TimingRejected
    from kernelband.profile.paired_gpu import measure_paired_on_gpu

    try:
        measurement, found, case = measure_paired_on_gpu(
            problem, editable, target, config=config, strict=strict, limits=limits, baseline_ms=baseline_ms,
            features=features, static=static, until_checked=until_checked)
    except TimingRejected as rej:
        raise TimingCheckError(rej.reason, f"{rej.reason}: {rej.message}") from rej
    if timings is not None:
        for part, seconds in (measurement.checks.get("parts_s") or {}).items():
            timings[f"measure_{part}"] = float(seconds)
    return measurement, found, case


NCU_JAIL_NOTE = ("not measured: Nsight Compute passes run outside the jail and this node "
                 "requires one for submitted code (KERNELBAND_NCU_UNJAILED=true accepts weaker "
                 "isolation for them)")


def ncu_refused_by_jail(limits: Any = None) -> str:
    """Why a node that must jail submitted code runs no Nsight Compute pass ("" when it may)."""
    # the settings load pydantic, which sandbox children importing this package never need
    from kernelband.config import get_settings

    isolation = getattr(limits, "isolation", "") or ""
    if isolation_setting(isolation) != "jail" or get_settings().ncu_unjailed:
        return ""
    return NCU_JAIL_NOTE


def _with_ncu_signature(problem: KernelProblem, editable: str | None, features: Features,
                        case: dict[str, Any], limits: Any) -> Features:
    """`features` with h from an Nsight Compute pass; when it fails, h stays the estimate and
    `h_note` says why."""
    if ncu.find_ncu() is None:  # no pass to run: no sandbox child either
        return replace(features, h_note="ncu not found on this GPU node: install Nsight Compute")
    if (note := ncu_refused_by_jail(limits)):
        return replace(features, h_note=note)
    # The pass's own child runs only trusted code; the process that runs the candidate
    # installs the audit guard itself.
    limits = replace(limits or SandboxLimits.from_settings(), profiled=True, audit=False)
    payload = {"problem": problem.to_dict(), "editable": editable, "case": case,
               "timeout_s": NCU_TIMEOUT_S}
    try:
        value = _run(NCU_TARGET, payload, False, limits, NCU_TIMEOUT_S + 30.0)
    except MeasureError as exc:
        log.warning("Nsight Compute pass failed, h stays estimated: %s", exc)
        return replace(features, h_note=shorten(f"the Nsight Compute pass failed: {exc}", NOTE_CHARS))
    outcome = ncu.NcuOutcome.from_dict(value["outcome"])
    h = ncu.signature(outcome)
    log.info("Nsight Compute pass (%s) took %.2fs: %s", value.get("mode"),
             float(value.get("seconds", 0.0)), "ok" if h else f"{outcome.reason} {outcome.message}")
    if h is None:
        return replace(features, h_note=shorten(f"ncu {outcome.reason}: {outcome.message}", NOTE_CHARS))
    return replace(features, h=h, h_sources=("ncu",) * 3, h_note="")



def static_profile_candidate(
    problem: KernelProblem, editable: str | None, target: str, *,
    reference_gpu: str = DEFAULT_REFERENCE_GPU, limits: Any = None,
) -> dict[str, Any]:
    """The profile report (static profile, estimate, phi, h; each labelled) without a GPU."""
    resolve_target(target, reference_gpu)
    payload = {"problem": problem.to_dict(), "editable": editable, "target": target,
               "reference_gpu": reference_gpu}
    return _run(REPORT_TARGET, payload, True, limits)
