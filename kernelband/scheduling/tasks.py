"""The task bodies workers run: plain JSON dict in, plain JSON dict out.

They hold no database handle; everything arrives in the payload built by
`kernelband.scheduling.payloads.task_payloads`. Candidate code only ever runs inside the sandbox
(evaluate_candidate / measure_candidate start a sandbox child). Result keys:

- generate -> GenerationResult.to_dict() (`ok`, `editable`, `reason`, tokens, cost, ...)
- compile  -> `ok`, `reason`, `message`, `verdict` (public-case pre-screen), `static_profile`
- profile  -> `ok`, `reason`, `message`, `verdict`, `measurement`, `features`
- verify   -> `ok`, `reason`, `message`, `verdict` (held-out cases); on a GPU also the final
  `measurement` and `features` (the best paired against the original)

Every body runs its sandboxed work under the job's own limits (`limits` in the payload: run_s,
compile_s, config_compile_s; `kernelband.sandbox.job_limits`), the node's settings otherwise.

compile, profile and verify results also carry `timings`: wall seconds per part of the task
(`check`: the sandboxed correctness run, `static`: the static profile, `measure`: timing and
features, `signature`: on a GPU, the Nsight Compute pass for h), which `kernelband.scheduling.stages`
summarises per job.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

from kernelband.config import get_settings
from kernelband.problem.model import KernelProblem

T = TypeVar("T")
PRESCREEN_SEEDS = 1  # compile only screens out obvious failures; profile checks thoroughly
CHECK_SEEDS = 3
Body = Callable[[dict[str, Any]], dict[str, Any]]


def _under_job_limits(body: Body) -> Body:
    """Run `body` with the payload's job limits applied to every sandbox run it starts."""
    @functools.wraps(body)
    def run(payload: dict[str, Any]) -> dict[str, Any]:
        from kernelband.sandbox import job_limits

        with job_limits(payload.get("limits")):
            return body(payload)

    return run


@_under_job_limits
def generate(payload: dict[str, Any]) -> dict[str, Any]:
    """One child kernel from (parent, strategy) by the job's generator (LLM or rules)."""
    from kernelband.generate.messages import GenerationRequest, ProfileFact, RepairTurn

    facts = payload.get("profile_summary") or []
    repair = payload.get("repair")
    request = GenerationRequest(
        problem=_problem(payload), parent_editable=payload["parent_editable"],
        strategy=payload.get("strategy"),
        profile_summary=tuple(ProfileFact(**f) for f in facts if isinstance(f, dict)),
        seed=int(payload.get("seed") or 0), memory=tuple(payload.get("memory") or ()),
        example=payload.get("example") or None,
        repair=RepairTurn.from_dict(repair) if isinstance(repair, dict) and "reply" in repair
        else None, step=str(payload.get("step") or ""))
    return _generator(str(payload.get("model") or "")).generate(request).to_dict()


@_under_job_limits
def compile(payload: dict[str, Any]) -> dict[str, Any]:  # noqa: A001 - the contract's name
    """Static checks and an interpreter pre-screen on the public cases (cheap, CPU only)."""
    from kernelband.evaluate import check_source, evaluate_candidate

    if payload["target"] == "cpu":
        # The cpu target's profile step runs this same interpreter check with more seeds, so a
        # pre-screen would only repeat it; the static source checks still reject early.
        found = check_source(payload["editable"])
        if found is not None:
            return {"ok": False, "reason": found.reason, "message": found.message,
                    "static_profile": None}
        return {"ok": True, "reason": "", "message": "static checks passed; interpreter "
                "check runs in the profile step", "static_profile": None}
    # device=None: the node's device; on a GPU node triton 3.6's interpreter breaks (numpy 2.5).
    timings: dict[str, float] = {}
    verdict = _timed(timings, "check", lambda: evaluate_candidate(
        _problem(payload), payload["editable"], held_out=False, seeds=PRESCREEN_SEEDS,
        device=None))
    static = _timed(timings, "static", lambda: _static_profile(payload)) if verdict.correct else None
    return {"ok": verdict.correct, "reason": "" if verdict.correct else verdict.reason,
            "message": verdict.message, "verdict": verdict.to_dict(), "static_profile": static,
            "timings": timings}


@_under_job_limits
def profile(payload: dict[str, Any]) -> dict[str, Any]:
    """Correctness on the target, then time and features (on `cpu`: the labelled estimate)."""
    from kernelband.evaluate import evaluate_candidate

    problem, editable = _problem(payload), _editable(payload)
    device = "cpu" if payload["target"] == "cpu" else None  # None: the node's GPU
    timings: dict[str, float] = {}
    verdict = _timed(timings, "check", lambda: evaluate_candidate(
        problem, editable, held_out=False, seeds=CHECK_SEEDS, device=device))
    if not verdict.correct:
        return {"ok": False, "reason": verdict.reason, "message": verdict.message,
                "verdict": verdict.to_dict(), "timings": timings}
    measured = _timed(timings, "measure", lambda: _measure(problem, editable, payload, timings))
    timings["measure"] -= timings.get("signature", 0.0)  # parts do not overlap
    if isinstance(measured, dict):
        return {**measured, "verdict": verdict.to_dict(), "timings": timings}
    measurement, features = measured
    return {"ok": True, "reason": "", "message": "", "verdict": verdict.to_dict(),
            "measurement": measurement, "features": features, "timings": timings}


@_under_job_limits
def verify(payload: dict[str, Any]) -> dict[str, Any]:
    """Held-out acceptance of a track's best kernel (cases no generator has seen); on a GPU the
    best that passes is then measured again, paired against the original: the job's speedup."""
    from kernelband.evaluate import evaluate_candidate

    device = "cpu" if payload["target"] == "cpu" else None
    timings: dict[str, float] = {}
    problem = _problem(payload)
    verdict = _timed(timings, "check", lambda: evaluate_candidate(
        problem, payload["editable"], held_out=True, seeds=CHECK_SEEDS, device=device))
    result = {"ok": verdict.correct, "reason": "" if verdict.correct else verdict.reason,
              "message": verdict.message, "verdict": verdict.to_dict(), "timings": timings}
    if verdict.correct and _measures_on_gpu(payload["target"]):
        result.update(_final_measurement(problem, payload, timings))
    return result


def _measures_on_gpu(target: str) -> bool:
    """A cost-model estimate is deterministic: only a GPU measurement is worth taking again."""
    from kernelband.sandbox.device import detect_device

    return target != "cpu" and detect_device().startswith("cuda")


def _final_measurement(problem: KernelProblem, payload: dict[str, Any],
                       timings: dict[str, float]) -> dict[str, Any]:
    """The best timed again in interleaved rounds against the original (its paired speedup);
    a best that cannot be measured again is not accepted (`ok` False with the reason)."""
    against_original = {**payload, "parent_editable": problem.editable,
                        "hardware_signature": False, "features": False}
    measured = _timed(timings, "measure", lambda: _measure(
        problem, payload["editable"], against_original, timings))
    if isinstance(measured, dict):
        return {**measured, "reason": f"final_measure:{measured['reason']}"}
    measurement, features = measured
    return {"measurement": measurement, "features": features}


def _timed(timings: dict[str, float], part: str, work: Callable[[], T]) -> T:
    """Run `work`, noting its wall seconds as `timings[part]` (the result's `timings`)."""
    start = time.perf_counter()
    try:
        return work()
    finally:
        timings[part] = time.perf_counter() - start


def _problem(payload: dict[str, Any]) -> KernelProblem:
    return KernelProblem.from_dict(payload["problem"])


def _editable(payload: dict[str, Any]) -> str | None:
    """None for the original kernel: it is checked as submitted, without candidate rules."""
    return None if payload.get("original") else payload["editable"]


@lru_cache(maxsize=8)
def _generator(model: str) -> Any:
    """One generator per model per worker process (building one loads prompts and examples)."""
    from kernelband.generate import make_generator

    settings = get_settings()
    if model:
        settings = settings.model_copy(update={"llm_model": model})
    return make_generator(settings)


def _measure(problem: KernelProblem, editable: str | None, payload: dict[str, Any],
             timings: dict[str, float]) -> tuple[dict[str, Any], dict[str, Any]] | dict[str, Any]:
    """Measurement and features (the profile package runs the candidate sandboxed)."""
    from kernelband.evaluate.plausibility import gate
    from kernelband.evaluate.verified_timing import TimingRejected
    from kernelband.profile import MeasureError, StaticProfileError, measure_candidate

    def run(strict: bool) -> tuple[Any, Any]:
        return measure_candidate(
            problem, editable, payload["target"], parent_editable=payload.get("parent_editable"),
            hardware_signature=bool(payload.get("hardware_signature", True)), timings=timings,
            strict=strict, baseline_ms=payload.get("baseline_ms"), features=bool(payload.get("features", True)))

    try:
        # a time too good to be true may be a cheat: measured again, strictly, before any reward
        measurement, features, _ = gate(*run(False), lambda: run(True))
    except TimingRejected as rej:
        return {"ok": False, "reason": rej.reason, "message": f"{rej.reason}: {rej.message}"[:500]}
    except (MeasureError, StaticProfileError) as exc:
        reason = getattr(exc, "reason", "") or f"measure_failed:{type(exc).__name__}"
        return {"ok": False, "reason": reason, "message": str(exc)[:500]}
    return measurement.to_dict(), features.to_dict()


def _static_profile(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The labelled static profile report for the target, or None when it cannot be built."""
    from kernelband.profile import MeasureError, StaticProfileError, static_profile_candidate

    try:
        return static_profile_candidate(_problem(payload), payload["editable"], payload["target"])
    except (MeasureError, StaticProfileError) as exc:
        # The profile step measures resources on the target anyway; keep the reason visible.
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
