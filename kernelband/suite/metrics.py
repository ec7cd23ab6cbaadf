"""Suite metrics per (target, policy), as KERNELBAND.md defines them. Pure: no database.

A measured problem counts as faster only when its paired speedup's 95% interval lies above
the threshold (Fast@1, fast_p); Fast@1 on point estimates, as published tables count it, is
reported beside it (`fast1_point_pct`). Estimates have no interval and count on their ratio,
and any estimate labels the aggregate `estimated`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelband.speedups import ORIGINAL, ORIGINAL_METHOD, ShownSpeedup

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
    job_id: int | str  # the row id; its public id once it leaves the service
    status: str  # track status, or the job status while no track exists yet
    correct: bool
    # The best's speedup over the original: measured, the paired point (its 95% interval in
    # speedup_low/high); estimated, the cost model's ratio; None when never paired.
    speedup: float | None
    label: str | None  # measured | estimated, from the best kernel's measurement
    held_out: str | None
    reason: str | None
    # sums over the timed cases, and per case (case name -> ms), of the original and the best
    original_ms: float | None = None
    best_ms: float | None = None
    original_case_ms: dict[str, float] = field(default_factory=dict)
    best_case_ms: dict[str, float] = field(default_factory=dict)
    method: str | None = None  # how the times were taken (the measurement's method)
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_method: str | None = None  # how the speedup was paired (rounds, statistic)

    @property
    def lower_bound(self) -> float | None:
        """What a problem must beat to count as faster: a measured speedup's interval low; an
        estimate's ratio (the cost model is deterministic: no interval to take)."""
        shown = self.shown()
        return shown.low if shown.source == "measured" else shown.point

    @property
    def fast(self) -> bool:
        """Fast@1: correct and faster than the original with 95% confidence (low > 1.0)."""
        return self.correct and (self.lower_bound or 0.0) > 1.0

    @property
    def fast_point(self) -> bool:
        """Fast@1 as published tables count it: correct and point estimate > 1.0."""
        return self.correct and self.speedup is not None and self.speedup > 1.0

    def shown(self) -> ShownSpeedup:
        """The speedup as every surface shows it (interval, estimate label or none)."""
        if self.speedup is None:
            return ShownSpeedup(None)
        if self.speedup_method == ORIGINAL_METHOD:
            return ORIGINAL
        if self.label == "measured" and self.speedup_low is not None and self.speedup_high is not None:
            return ShownSpeedup(self.speedup, self.speedup_low, self.speedup_high,
                                self.speedup_method, "measured")
        if self.label == "measured":
            return ShownSpeedup(None)  # a measured speedup without its pairing is not shown
        return ShownSpeedup(self.speedup, method=self.speedup_method, source=self.label or "none")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fast": self.fast, "fast_point": self.fast_point,
                "significant": self.shown().significant, "speedup_text": self.shown().text()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemResult:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


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
    # Fast@1 counted on point estimates, as published tables do; shown beside fast1_pct (which
    # counts a problem only when its interval's lower bound is above 1.0), labelled.
    fast1_point_pct: float = 0.0

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
    """KernelBench's fast_p in %, over all problems: correct, and (p > 0) faster than p times
    the original with 95% confidence (a measured speedup's interval low above p)."""
    hits = sum(1 for r in rows if r.correct and (p == 0 or (r.lower_bound or 0.0) > p))
    return _pct(hits, len(rows))


def metric_for(target: str, policy: str, rows: Sequence[ProblemResult]) -> SuiteMetric:
    """Correct %, Fast@1 % (interval rule, and the point rule beside it), both geometric means
    of the paired points, and fast_p over one (target, policy) group."""
    count = len(rows)
    correct = [r for r in rows if r.correct]
    timed = [r for r in correct if r.shown().point]
    speeds = [float(r.speedup) for r in timed]  # type: ignore[arg-type]
    # Stricter mean: a problem that failed (or has no paired speedup) counts as 1.0.
    strict = speeds + [1.0] * (count - len(timed))
    return SuiteMetric(
        target=target, policy=policy, problems=count,
        finished=sum(r.status in FINISHED for r in rows),
        correct_pct=_pct(len(correct), count), fast1_pct=_pct(sum(r.fast for r in rows), count),
        geomean_speedup_correct=geometric_mean(speeds),
        geomean_speedup_all=geometric_mean(strict),
        label=combined_label(r.label for r in timed),
        fast_p={f"{p:g}": fast_p(rows, p) for p in FAST_P},
        fast1_point_pct=_pct(sum(r.fast_point for r in rows), count),
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
