"""A paired run as the service stores it: the speedup with its interval, and paired times.

Every time a measurement stores is the baseline divided by a paired speedup, so the bandit never
compares two times taken at different moments (docs/measurement.md, "Statistics").
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from kernelband.problem.model import KernelProblem
from kernelband.profile.measurement import MeasureError, Measurement
from kernelband.profile.paired import paired_speedup
from kernelband.profile.paired_runners import PairedConfig
from kernelband.profile.paired_timing import PairedRun, measure_paired_runners
from kernelband.sandbox.limits import SandboxLimits


def paired_measurement(problem: KernelProblem, run: PairedRun, *, device_name: str, target: str,
                       config: PairedConfig, baseline_ms: float | None = None) -> Measurement:
    """The stored Measurement of a paired run: its speedup against the original, and times that
    are a baseline divided by speedups, so every time compared is paired with the same original.

    `baseline_ms`: the original's time the caller compares everything with (a track's first
    measurement of its original); None: the original's median round of this run. Case times
    are scaled the same way, from each case's own paired ratio."""
    label = "" if target != "cpu" else " (interpreted calls on the host: not kernel timings)"
    checked = (f"timed calls verified by the judge ({run.verified_rounds} of {len(run.original_ms)} rounds)"
               if run.verifiable else "timed calls not verified (harness calls)")
    total = max(run.cases_total, len(run.cases))
    subset = len(run.cases) < total
    spread = f", timed on {len(run.cases)} of {total} cases ({_spread(len(run.cases))})" if subset else ""
    method = f"{config.how}{spread}, k={'/'.join(str(run.batch[c]) for c in run.cases)}{label}; {checked}"
    # the interpreter's CPU-time rounds were never fitted for a between-runner term
    gpu = target != "cpu"
    speedup = paired_speedup(run.original_ms, run.candidate_ms, method=method,
                             runner_sd=config.runner_sd if gpu else 0.0,
                             runner_share=config.runner_share if gpu else 0.0)
    session_baseline = statistics.median(run.original_ms)
    scale = (baseline_ms / session_baseline) if baseline_ms else 1.0
    case_times = {case: scale * statistics.median(run.case_original_ms[case]) / _geomean_ratio(run, case)
                  for case in run.cases}
    cand = run.candidate_ms
    cv = statistics.pstdev(cand) / statistics.fmean(cand) if len(cand) > 1 else 0.0
    return Measurement(
        "measured", speedup.method, device_name, target, (baseline_ms or session_baseline) / speedup.point,
        case_times, cv=cv, noisy=speedup.high / speedup.low > 1.2, paired_ratio=1.0 / speedup.point,
        checks={"baseline_ms": baseline_ms or session_baseline, "session_baseline_ms": session_baseline,
                "verified_rounds": run.verified_rounds, "rounds": len(run.original_ms),
                "batch": dict(run.batch), "parts_s": {k: round(v, 4) for k, v in run.parts_s.items()},
                "runner_claims": {role: round(run.claimed_ms[role] / run.judged_ms[role], 4)
                                  for role in run.judged_ms if run.judged_ms[role] > 0},
                "notes": run.notes, "spare_runner": run.spare_runner,
                "round_ms": {"original": _rounded(run.original_ms), "candidate": _rounded(run.candidate_ms)},
                "runner_gpu_round_ms": {role: _rounded(v) for role, v in run.claimed_gpu_ms.items() if v},
                **({"timed_cases": list(run.cases), "cases_total": total} if subset else {}),
                **({"inputs_drawn": run.inputs_drawn} if run.inputs_drawn else {})},
        speedup=speedup,
    )


def _spread(timed: int) -> str:
    return "the last" if timed == 1 else "evenly spread, first and last"


def _rounded(values: list[float]) -> list[float]:
    return [round(v, 6) for v in values]


def _geomean_ratio(run: PairedRun, case: str) -> float:
    pairs = zip(run.case_original_ms[case], run.case_candidate_ms[case], strict=True)
    return math.exp(statistics.fmean(math.log(o / c) for o, c in pairs))


def measure_speedup(
    problem: KernelProblem, editable: str | None, device: str, *, target: str, device_name: str,
    config: PairedConfig | None = None, limits: SandboxLimits | None = None, keep_original: bool = True,
    baseline_ms: float | None = None,
) -> Measurement:
    """Paired, judge-timed measurement of `editable` against the original (raises TimingRejected)."""
    config = config or PairedConfig()
    run = measure_paired_runners(problem, editable, device, config, limits=limits, keep_original=keep_original)
    return measurement_of(problem, run, device_name=device_name, target=target, config=config,
                          baseline_ms=baseline_ms)


def measurement_of(problem: KernelProblem, run: PairedRun, **kwargs: Any) -> Measurement:
    """`paired_measurement`, a run without usable rounds raised as MeasureError."""
    try:
        return paired_measurement(problem, run, **kwargs)
    except ValueError as exc:
        raise MeasureError(f"the paired timing gave no usable rounds ({exc}); raise PairedConfig.rounds") from exc
