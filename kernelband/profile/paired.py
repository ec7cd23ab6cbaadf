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
Z95 = 1.959964
# Two runner processes of identical code can differ by a steady 1-3% on a GPU for a whole
# measurement, which no number of rounds inside one pair of processes can reveal. On H200 A/A
# runs that difference grew with how much the problem's rounds scatter (launch-bound and
# host-sensitive problems move most), so its standard deviation on log(original / candidate) is
# modelled as a floor plus a share of the rounds' own sd, in quadrature (docs/measurement.md,
# "Between runners"), and added to every GPU interval, so an interval speaks for the comparison,
# not for one pair of processes.
RUNNER_SD = 0.005
RUNNER_SD_SHARE = 0.6


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
    runner_sd: float = 0.0,
    runner_share: float = 0.0,
) -> PairedSpeedup:
    """Geometric mean of the per-round ratios and its 95% bootstrap interval (seeded, repeatable).

    The bootstrap resamples whole rounds, so drift shared by both halves of a round (clocks,
    thermal state, a neighbour's load) stays paired. The mean is taken of log ratios, which makes
    the point a geometric mean and the interval symmetric in "faster" and "slower".

    `runner_sd` (log scale) and `runner_share` (of the rounds' sd of log ratios) make the
    standard deviation of the variation between runner processes that the rounds cannot see,
    hypot(runner_sd, runner_share * sd): each side of the interval is widened by its 95%
    half-width in quadrature.
    """
    import numpy as np

    logs = np.log(np.asarray(round_ratios(original_ms, candidate_ms), dtype=float))
    center = float(logs.mean())
    if float(logs.std()) == 0.0:  # identical rounds: the bootstrap has nothing to resample
        low, high, interval = center, center, "bootstrap degenerate"
    else:
        low, high, label = _bootstrap(logs, seed, resamples)
        interval = f"95% {label} bootstrap over {len(logs)} rounds"
    between = math.hypot(runner_sd, runner_share * float(logs.std(ddof=1)))
    if between > 0:
        low, high = _widened(center, low, high, Z95 * between)
        interval += f", widened by a between-runner sd of {between:.2%}"
    return PairedSpeedup(math.exp(center), math.exp(low), math.exp(high), len(logs),
                         f"{method}; {interval}", baseline)


def _bootstrap(logs: Any, seed: int, resamples: int) -> tuple[float, float, str]:
    """The 95% interval of the mean of `logs`: BCa, else percentile where BCa fails."""
    import numpy as np
    from scipy.stats import bootstrap

    for label in ("BCa", "percentile"):  # BCa can fail on tiny samples
        result = bootstrap((logs,), np.mean, confidence_level=CONFIDENCE, n_resamples=resamples,
                           method=label, random_state=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            break
    return low, high, label


def _widened(center: float, low: float, high: float, extra: float) -> tuple[float, float]:
    """Log-scale bounds with `extra` added in quadrature to each side's half-width."""
    return (center - math.hypot(center - low, extra), center + math.hypot(high - center, extra))
