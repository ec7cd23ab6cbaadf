"""The tasks that judge a candidate: compile (pre-screen), profile (check and measure) and
verify (held-out acceptance). Candidate code only ever runs inside the sandbox
(evaluate_candidate and measure_candidate start a sandbox child).

Each returns `to_dict()` of its result value (`kernelband.scheduling.results`), with `timings`:
wall seconds per part of the task (`check`: the sandboxed correctness run, `static`: the static
profile, `measure`: timing and features, `signature`: on a GPU, the Nsight Compute pass for h,
`check_wait`: on a GPU, where the check runs beside the measurement's start, the part of
`measure` that waited for its verdict; with the check in the candidate's runner, `check` is part
of `measure`), which `kernelband.scheduling.stages` summarises per job.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from kernelband.config import Settings, get_settings
from kernelband.evaluate import check_source, evaluate_candidate
from kernelband.evaluate.evaluator import ChildRun
from kernelband.evaluate.plausibility import gate
from kernelband.evaluate.verdict import Verdict
from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem.model import KernelProblem
from kernelband.profile import (
    CandidateRefused,
    MeasureError,
    Measurement,
    StaticProfileError,
    measure_candidate,
    static_profile_candidate,
)
from kernelband.profile.measurement import UntilChecked
from kernelband.profile.runner_check import RunnerCheck
from kernelband.sandbox.device import detect_device
from kernelband.scheduling.results import CompileResult, ProfileResult, VerifyResult
from kernelband.scheduling.task_payload import editable_of, problem_of, under_job_limits

T = TypeVar("T")
PRESCREEN_SEEDS = 1  # compile only screens out obvious failures; profile checks thoroughly
CHECK_SEEDS = 3


@dataclass(frozen=True)
class Unmeasured:
    """Why a correct candidate could not be measured (`reason` machine-readable)."""

    reason: str
    message: str


Measured = tuple[Measurement, dict[str, Any]]  # the measurement and Features.to_dict()


@under_job_limits
def compile(payload: dict[str, Any]) -> dict[str, Any]:  # noqa: A001 - the contract's name
    """Static checks and an interpreter pre-screen on the public cases (cheap, CPU only)."""
    if payload["target"] == "cpu":
        # The cpu target's profile step runs this same interpreter check with more seeds, so a
        # pre-screen would only repeat it; the static source checks still reject early.
        return _static_checks_only(payload, "interpreter check runs in the profile step")
    if detect_device().startswith("cuda"):
        # On the GPU node itself the profile step checks the same public cases on the same GPU
        # moments later: a pre-screen here is that work twice, on a node whose CPUs, not its
        # GPU, bound how many candidates it judges. A CPU node (no GPU) still pre-screens.
        return _static_checks_only(payload, "correctness check runs in the profile step on this GPU",
                                   static=True)
    # device=None: the node's device; on a GPU node triton 3.6's interpreter breaks (numpy 2.5).
    timings: dict[str, float] = {}
    verdict = _timed(timings, "check", lambda: evaluate_candidate(
        problem_of(payload), payload["editable"], held_out=False, seeds=PRESCREEN_SEEDS,
        device=None))
    static = _timed(timings, "static", lambda: _static_profile(payload)) if verdict.correct else None
    return CompileResult(ok=verdict.correct, reason="" if verdict.correct else verdict.reason,
                         message=verdict.message, verdict=verdict.to_dict(),
                         static_profile=static, timings=timings).to_dict()


def _static_checks_only(payload: dict[str, Any], then: str, static: bool = False) -> dict[str, Any]:
    """The static source checks (and with `static`, the static profile) without running the
    candidate: a pre-screen that would only repeat the profile step's check."""
    found = check_source(payload["editable"], problem_of(payload).editable)
    if found is not None:
        return CompileResult(ok=False, reason=found.reason, message=found.message).to_dict()
    timings: dict[str, float] = {}
    report = _timed(timings, "static", lambda: _static_profile(payload)) if static else None
    return CompileResult(ok=True, message=f"static checks passed; {then}", static_profile=report,
                         timings=timings).to_dict()


@under_job_limits
def profile(payload: dict[str, Any]) -> dict[str, Any]:
    """Correctness on the target, then time and features (on `cpu`: the labelled estimate)."""
    problem, editable = problem_of(payload), editable_of(payload)
    device = "cpu" if payload["target"] == "cpu" else None  # None: the node's GPU
    timings: dict[str, float] = {}

    def check(in_runner: ChildRun | None = None) -> Verdict:
        return evaluate_candidate(problem, editable, held_out=False, seeds=CHECK_SEEDS, device=device,
                                  in_runner=in_runner)

    def measure(until_checked: UntilChecked | None) -> Measured | Unmeasured:
        return _measure(problem, editable, payload, timings, until_checked)

    beside, settings = _measures_on_gpu(payload["target"]), get_settings()
    if beside and settings.check_in_runner and (editable is not None or _original_in_runner(problem, settings)):
        verdict, measured = _check_in_runner(timings, check, measure)
    else:
        verdict, measured = _check_and_measure(timings, check, measure, beside=beside,
                                               verdict_first=not settings.measure_before_verdict)
    if not verdict.correct or measured is None:
        return ProfileResult(ok=False, reason=verdict.reason, message=verdict.message,
                             verdict=verdict.to_dict(), timings=timings).to_dict()
    timings["measure"] -= timings.get("signature", 0.0)  # parts do not overlap
    if isinstance(measured, Unmeasured):
        return ProfileResult(ok=False, reason=measured.reason, message=measured.message,
                             verdict=verdict.to_dict(), timings=timings).to_dict()
    measurement, features = measured
    return ProfileResult(ok=True, verdict=verdict.to_dict(), measurement=measurement,
                         features=features, timings=timings).to_dict()


@under_job_limits
def verify(payload: dict[str, Any]) -> dict[str, Any]:
    """Held-out acceptance of a track's best kernel (cases no generator has seen); on a GPU the
    best that passes is then measured again, paired against the original: the job's speedup."""
    device = "cpu" if payload["target"] == "cpu" else None
    timings: dict[str, float] = {}
    problem = problem_of(payload)

    def check() -> Verdict:
        return evaluate_candidate(problem, payload["editable"], held_out=True, seeds=CHECK_SEEDS, device=device)

    if _measures_on_gpu(payload["target"]):
        verdict, final = _check_and_measure(
            timings, check, lambda until_checked: _final_measurement(problem, payload, timings, until_checked),
            beside=True, verdict_first=not get_settings().measure_before_verdict)
    else:
        verdict, final = _timed(timings, "check", check), None
    result = VerifyResult(ok=verdict.correct, reason="" if verdict.correct else verdict.reason,
                          message=verdict.message, verdict=verdict.to_dict(), timings=timings)
    if isinstance(final, Unmeasured):  # a best that cannot be measured again is not accepted
        return replace(result, ok=False, reason=f"final_measure:{final.reason}",
                       message=final.message).to_dict()
    if final is not None:
        return replace(result, measurement=final[0], features=final[1]).to_dict()
    return result.to_dict()


def _check_and_measure(timings: dict[str, float], check: Callable[[], Verdict],
                       measure: Callable[[UntilChecked | None], Measured | Unmeasured], *,
                       beside: bool, verdict_first: bool = True) -> tuple[Verdict, Measured | Unmeasured | None]:
    """The check's verdict, and the measurement when the check passed (None when it did not).

    `beside` (a GPU node): the check runs in a thread of its own while the measurement starts
    the candidate's runner and compiles in it, both sandboxed, in shared GPU turns; the
    measurement waits for the verdict only before its exclusive turn, so a refused candidate is
    never timed, and a step no longer pays for its check and its runner's start one after the
    other. `timings["check"]` then overlaps `timings["measure"]`, and `check_wait` is the part
    of `measure` spent waiting for the verdict.

    Without `verdict_first` (`Settings.measure_before_verdict`) the timed rounds do not wait:
    a candidate whose check is still running is timed, and its measurement is dropped if the
    check refuses it (the step's answer is the verdict either way); `check_wait` is then the
    wait for the verdict after the measurement. A refused candidate costs its exclusive turn."""
    if not beside:
        verdict = _timed(timings, "check", check)
        return verdict, _timed(timings, "measure", lambda: measure(None)) if verdict.correct else None
    context = contextvars.copy_context()  # the job's limits and Triton cache hold in the thread too
    with ThreadPoolExecutor(1, thread_name_prefix="check") as pool:
        checking = pool.submit(context.run, _timed, timings, "check", check)

        def until_checked() -> None:
            started = time.perf_counter()
            verdict = checking.result()
            timings["check_wait"] = timings.get("check_wait", 0.0) + time.perf_counter() - started
            if not verdict.correct:
                raise CandidateRefused(f"its correctness check refused it ({verdict.reason})")

        measured = _timed(timings, "measure", lambda: measure(until_checked if verdict_first else None))
        started = time.perf_counter()
        verdict = checking.result()
        if not verdict_first:
            timings["check_wait"] = time.perf_counter() - started
    return verdict, measured if verdict.correct else None


def _check_in_runner(timings: dict[str, float], check: Callable[[ChildRun | None], Verdict],
                     measure: Callable[[UntilChecked | None], Measured | Unmeasured],
                     ) -> tuple[Verdict, Measured | Unmeasured | None]:
    """The check run in the candidate's timing runner as it starts (`Settings.check_in_runner`):
    the verdict, and the measurement when the check passed. A measurement that failed before its
    runner could check (the runner did not start, say) leaves the check to a child of its own, so
    every step still answers with a verdict. `timings["check"]` overlaps `timings["measure"]`."""
    gate = RunnerCheck(check)
    measured = _timed(timings, "measure", lambda: measure(gate))
    verdict = gate.alone()
    timings["check"] = gate.check_s
    if not gate.in_runner:
        timings["check_alone"] = gate.check_s
    return verdict, measured if verdict.correct else None


def _original_in_runner(problem: KernelProblem, settings: Settings) -> bool:
    """Whether an original's own check runs in its timing runner (a KernelBench file's PyTorch
    placeholder is always checked in a child: its runner times the reference, not the region)."""
    return settings.check_original_in_runner and not problem.needs_translation


def _measures_on_gpu(target: str) -> bool:
    """A cost-model estimate is deterministic: only a GPU measurement is worth taking again."""
    return target != "cpu" and detect_device().startswith("cuda")


def _final_measurement(problem: KernelProblem, payload: dict[str, Any], timings: dict[str, float],
                       until_checked: UntilChecked | None = None) -> Measured | Unmeasured:
    """The best timed again in interleaved rounds against the original (its paired speedup)."""
    against_original = {**payload, "parent_editable": problem.editable,
                        "hardware_signature": False, "features": False}
    return _measure(problem, payload["editable"], against_original, timings, until_checked)


def _timed(timings: dict[str, float], part: str, work: Callable[[], T]) -> T:
    """Run `work`, noting its wall seconds as `timings[part]` (the result's `timings`)."""
    start = time.perf_counter()
    try:
        return work()
    finally:
        timings[part] = time.perf_counter() - start


def _measure(problem: KernelProblem, editable: str | None, payload: dict[str, Any],
             timings: dict[str, float], until_checked: UntilChecked | None = None) -> Measured | Unmeasured:
    """Measurement and features (the profile package runs the candidate sandboxed)."""
    def run(strict: bool) -> tuple[Any, Any]:
        return measure_candidate(
            problem, editable, payload["target"], parent_editable=payload.get("parent_editable"),
            hardware_signature=bool(payload.get("hardware_signature", True)), timings=timings,
            strict=strict, baseline_ms=payload.get("baseline_ms"), features=bool(payload.get("features", True)),
            static_features=payload.get("static_features"), until_checked=until_checked)

    try:
        # a time too good to be true may be a cheat: measured again, strictly, before any reward
        measurement, features, _ = gate(*run(False), lambda: run(True))
    except TimingRejected as rej:
        return Unmeasured(rej.reason, f"{rej.reason}: {rej.message}"[:500])
    except (MeasureError, StaticProfileError) as exc:
        reason = getattr(exc, "reason", "") or f"measure_failed:{type(exc).__name__}"
        return Unmeasured(reason, str(exc)[:500])
    return measurement, features.to_dict()


def _static_profile(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The labelled static profile report for the target, or None when it cannot be built."""
    try:
        return static_profile_candidate(problem_of(payload), payload["editable"], payload["target"])
    except (MeasureError, StaticProfileError) as exc:
        # The profile step measures resources on the target anyway; keep the reason visible.
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


__all__ = ["CHECK_SEEDS", "PRESCREEN_SEEDS", "compile", "profile", "verify"]
