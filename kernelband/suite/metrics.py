"""Suite metrics per (target, policy), as KERNELBAND.md defines them. Pure: no database."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# held_out values of a completed track whose best kernel passed every case: "passed" (a faster
# candidate passed the held-out cases) or "original" (the original kernel stayed the best). A
# KernelBench file as published whose track never got a Triton translation ends "untranslated":
# its original is the PyTorch model itself, so it does not count as correct.
CORRECT_HELD_OUT = ("passed", "original")
FINISHED = ("completed", "cancelled", "failed")
# KernelBench's fast_p thresholds: the share of problems that are correct AND faster than p
# times the baseline (fast_0 is the correct rate; fast_1 is Fast@1).
FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class ProblemResult:
    """One problem on one target under one policy (one track of one suite job)."""

    problem: str
    policy: str
    target: str
    job_id: int
    status: str  # track status, or the job status while no track exists yet
    correct: bool
    speedup: float | None  # sum of original times / sum of best times (public cases)
    label: str | None  # measured | estimated, from the best kernel's measurement
    held_out: str | None
    reason: str | None
    # sums over the timed cases, and per case (case name -> ms), of the original and the best
    original_ms: float | None = None
    best_ms: float | None = None
    original_case_ms: dict[str, float] = field(default_factory=dict)
    best_case_ms: dict[str, float] = field(default_factory=dict)
    method: str | None = None  # how the times were taken (the measurement's method)

    @property
    def fast(self) -> bool:
        """Fast@1: correct and faster than the original."""
        return self.correct and self.speedup is not None and self.speedup > 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fast": self.fast}


@dataclass(frozen=True)
class SuiteMetric:
    """Suite-level numbers of one (target, policy); percentages are over loaded problems."""

    target: str
    policy: str
    problems: int
    finished: int
    correct_pct: float
    fast1_pct: float
    geomean_speedup_correct: float | None
    geomean_speedup_all: float | None
    label: str  # measured | estimated | none (no correct problem)
    fast_p: dict[str, float] = field(default_factory=dict)  # "0", "1", "1.5", "2" -> % (FAST_P)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def geometric_mean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None for an empty list."""
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def combined_label(labels: Iterable[str | None]) -> str:
    """`measured` only when every time is measured; estimates make the aggregate an estimate."""
    found = {label for label in labels if label}
    if not found:
        return "none"
    if found == {"measured"}:
        return "measured"
    return "estimated"  # any estimate makes the aggregate an estimate


def fast_p(rows: Sequence[ProblemResult], p: float) -> float:
    """KernelBench's fast_p in %: problems correct with speedup > p, over all problems."""
    hits = sum(1 for r in rows if r.correct and r.speedup is not None and r.speedup > p)
    return _pct(hits, len(rows))


def metric_for(target: str, policy: str, rows: Sequence[ProblemResult]) -> SuiteMetric:
    """Correct %, Fast@1 %, and both geometric means over one (target, policy) group."""
    count = len(rows)
    correct = [r for r in rows if r.correct and r.speedup]
    speeds = [float(r.speedup) for r in correct]  # type: ignore[arg-type]
    # Stricter mean: a problem that failed (or has no valid speedup) counts as 1.0.
    strict = speeds + [1.0] * (count - len(correct))
    return SuiteMetric(
        target=target, policy=policy, problems=count,
        finished=sum(r.status in FINISHED for r in rows),
        correct_pct=_pct(len(correct), count), fast1_pct=_pct(sum(r.fast for r in rows), count),
        geomean_speedup_correct=geometric_mean(speeds),
        geomean_speedup_all=geometric_mean(strict),
        label=combined_label(r.label for r in correct),
        fast_p={f"{p:g}": fast_p(rows, p) for p in FAST_P},
    )


def suite_metrics(rows: Sequence[ProblemResult]) -> list[SuiteMetric]:
    """One metric row per (target, policy), in first-seen order."""
    keys: list[tuple[str, str]] = []
    for row in rows:
        if (row.target, row.policy) not in keys:
            keys.append((row.target, row.policy))
    return [metric_for(t, p, [r for r in rows if (r.target, r.policy) == (t, p)])
            for t, p in keys]


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0
