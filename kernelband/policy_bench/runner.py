"""Run policies on landscapes and summarise: mean best speedup with 95% CI, Fast@1, regret."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from kernelband.bandit import Decision, make_policy
from kernelband.policy_bench.landscapes import Landscape, SimKernel


def run_track(
    policy_name: str, landscape: Landscape, seed: int, budget: int, batch: int = 1,
    params: Mapping[str, Any] | None = None, reverse: bool = False,
) -> np.ndarray:
    """Best true speedup (original / best-by-measurement) after each of `budget` pulls.

    batch = P: P selections, then the P results (in order, or reversed to mimic stragglers).
    """
    policy = make_policy(policy_name, params)
    original = landscape.original(seed)
    kernels: dict[str, SimKernel] = {original.kernel_id: original}
    state = policy.init_state(original.entry(), seed)
    rng = np.random.default_rng([seed, 1])
    best, curve = original, [1.0]
    while len(curve) <= budget:
        decisions: list[Decision] = []
        for _ in range(min(batch, budget + 1 - len(curve))):
            decision, state = policy.select(state)
            decisions.append(decision)
        results = [
            (d, landscape.child(kernels[d.parent_id], d.strategy, f"k{len(curve) + i}", rng))
            for i, d in enumerate(decisions)
        ]
        for decision, child in reversed(results) if reverse else results:
            if child is not None:
                kernels[child.kernel_id] = child
                best = child if child.measured_ms < best.measured_ms else best
            entry = None if child is None else child.entry()
            _, state = policy.update(state, decision.decision_id, entry)
            curve.append(original.true_ms / best.true_ms)
    return np.array(curve)


@dataclass(frozen=True)
class Summary:
    """Mean best speedup with its 95% confidence interval and Fast@1 at one budget."""

    mean: float
    ci95: float
    fast1: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.ci95

    @property
    def high(self) -> float:
        return self.mean + self.ci95

    def text(self) -> str:
        return f"{self.mean:.3f}x ± {self.ci95:.3f}"


def summarise(values: np.ndarray) -> Summary:
    """Student-t 95% CI of the mean over seeds; Fast@1 = share of seeds with speedup > 1."""
    n = len(values)
    sd = float(values.std(ddof=1)) if n > 1 else 0.0
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) if n > 1 else math.inf
    return Summary(float(values.mean()), half, float((values > 1.0).mean()), n)


def paired_gain(a: np.ndarray, b: np.ndarray) -> Summary:
    """Mean of a - b over the same seeds, with its 95% CI (Fast@1 field: share where a > b)."""
    diff = a - b
    s = summarise(diff + 1.0)  # shift so Fast@1 reads "a beat b"
    return Summary(s.mean - 1.0, s.ci95, float((diff > 0).mean()), s.n)


def regret_curves(curves: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Simple regret per pull: log(best-known speedup of the seed) - log(policy's best so far).

    Best-known = the highest final speedup any policy reached on that seed (a simulated oracle
    would be circular; this is the empirical best).
    """
    best_known = np.max(np.stack([c[:, -1] for c in curves.values()]), axis=0)
    return {
        name: (np.log(best_known)[:, None] - np.log(c)).mean(axis=0) for name, c in curves.items()
    }
