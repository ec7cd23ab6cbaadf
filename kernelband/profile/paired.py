"""Paired speedups: the original and a candidate timed in interleaved rounds, with a 95% interval.

Judge side only: the inputs are the judge's own wall-clock times per round, never a runner's
figures. One round is the original's time and the candidate's time (each the sum over the public
cases) taken back to back on the same inputs; the speedup of a round is original / candidate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260
MIN_ROUNDS = 3


@dataclass(frozen=True)
class PairedSpeedup:
    """original / candidate over interleaved rounds: geometric-mean point and 95% bootstrap interval."""

    point: float
    low: float
    high: float
    rounds: int
    method: str  # how the rounds were timed and the interval computed
    baseline: str  # what the candidate is compared against ("original")

    @property
    def significant(self) -> bool:
        """Faster than the baseline with 95% confidence: the interval lies above 1.0."""
        return self.low > 1.0

    @property
    def contains_one(self) -> bool:
        return self.low <= 1.0 <= self.high

    def describe(self) -> str:
        """`1.18x [1.12, 1.24]`, with "no significant speedup" when the interval contains 1.0."""
        text = f"{self.point:.2f}x [{self.low:.2f}, {self.high:.2f}]"
        return f"{text}, no significant speedup" if self.contains_one else text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairedSpeedup:
        return cls(
            point=float(data["point"]), low=float(data["low"]), high=float(data["high"]),
            rounds=int(data["rounds"]), method=str(data["method"]), baseline=str(data["baseline"]),
        )


class PairedStatsError(ValueError):
    """Round times that cannot give a paired speedup; the message says what to change."""


def round_ratios(original_ms: Sequence[float], candidate_ms: Sequence[float]) -> list[float]:
    """original / candidate per round; both sequences are the per-round sums over public cases."""
    if len(original_ms) != len(candidate_ms):
        raise PairedStatsError(
            f"{len(original_ms)} original rounds against {len(candidate_ms)} candidate rounds; "
            "every round must time both"
        )
    if len(original_ms) < MIN_ROUNDS:
        raise PairedStatsError(f"{len(original_ms)} rounds; a paired interval needs at least {MIN_ROUNDS}")
    bad = [t for t in (*original_ms, *candidate_ms) if not (t > 0 and math.isfinite(t))]
    if bad:
        raise PairedStatsError(f"round times must be positive and finite, got {bad[:3]}")
    return [o / c for o, c in zip(original_ms, candidate_ms, strict=True)]


def paired_speedup(
    original_ms: Sequence[float],
    candidate_ms: Sequence[float],
    *,
    method: str,
    baseline: str = "original",
    seed: int = BOOTSTRAP_SEED,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> PairedSpeedup:
    """Geometric mean of the per-round ratios and its 95% bootstrap interval (seeded, repeatable).

    The bootstrap resamples whole rounds, so drift shared by both halves of a round (clocks,
    thermal state, a neighbour's load) stays paired. The mean is taken of log ratios, which makes
    the point a geometric mean and the interval symmetric in "faster" and "slower".
    """
    import numpy as np
    from scipy.stats import bootstrap

    logs = np.log(np.asarray(round_ratios(original_ms, candidate_ms), dtype=float))
    point = float(np.exp(logs.mean()))
    if float(logs.std()) == 0.0:  # identical rounds: the bootstrap has nothing to resample
        return PairedSpeedup(point, point, point, len(logs), f"{method}; bootstrap degenerate", baseline)
    result = bootstrap(
        (logs,), np.mean, confidence_level=CONFIDENCE, n_resamples=resamples,
        method="BCa", random_state=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval.low, result.confidence_interval.high
    if not (math.isfinite(low) and math.isfinite(high)):  # BCa can fail on tiny samples
        result = bootstrap(
            (logs,), np.mean, confidence_level=CONFIDENCE, n_resamples=resamples,
            method="percentile", random_state=np.random.default_rng(seed),
        )
        low, high = result.confidence_interval.low, result.confidence_interval.high
        label = "percentile"
    else:
        label = "BCa"
    interval = f"95% {label} bootstrap over {len(logs)} rounds"
    return PairedSpeedup(point, float(np.exp(low)), float(np.exp(high)), len(logs),
                         f"{method}; {interval}", baseline)
