"""SIMULATED `paper` landscape (v1): wasted time per hardware dimension above a roofline floor.

Nothing here is measured. A kernel's true time is floor + w_SM + w_DRAM + w_L2: the floor is
what the problem needs at peak (fixed per problem), w_d the time a strategy aimed at dimension d
can remove. Headroom g_d = w_d / time, and the profiler's h_d rises as g_d falls (saturation).
Every assumption is listed with its rationale in docs/bandit.md, section "Simulator".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernelband.bandit import STRATEGY_NAMES, TARGET_DIMENSION
from kernelband.policy_bench.landscapes import PHI_SHIFT, SimKernel, signature_from_headroom

NOISE_SD = 0.02  # lognormal sd of a timing measurement (the true time has no noise)
SIDE_EFFECT_SD = 0.05  # collateral cost of a rewrite in the dimensions it did not target
REPEAT_REDRAWS = 50  # `same-prompt`: draws tried to reproduce a pair's first outcome class
MAX_FAIL_P = 0.9  # `hard-to-edit`: the failure odds of heavily optimised code stop here
REGRESSION_SHARE = 0.5  # of the rewrites that do not help: slower (the rest are neutral)
# kind -> (initial headroom g per dimension (SM, DRAM, L2), base phi (regs, smem KiB, log2 threads, occ %))
KINDS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float, float]]] = {
    "memory-bound": ((0.25, 0.02, 0.35), (24.0, 0.0, 8.0, 75.0)),
    "compute-bound": ((0.02, 0.35, 0.25), (96.0, 64.0, 7.0, 25.0)),
    "latency-bound": ((0.35, 0.20, 0.10), (40.0, 16.0, 6.0, 35.0)),
}
# phi shift per unit of headroom: headroom in a dimension shows in the launch configuration
# (SM: register pressure and low occupancy; DRAM: narrow blocks; L2: little shared-memory tiling)
COUPLING = np.array([
    [24.0, 0.0, 0.0, -60.0],
    [0.0, 0.0, -2.0, 0.0],
    [0.0, -24.0, 0.0, 0.0],
])


def help_probability(g: float) -> float:
    """Odds that a correct rewrite aimed at a dimension with headroom g actually removes waste."""
    return 0.15 + 0.65 * min(1.0, g / 0.2)


@dataclass(frozen=True)
class RoofKernel(SimKernel):
    """A simulated kernel that also carries its floor, wasted times and launch configuration."""

    floor_ms: float = 0.0
    waste: tuple[float, float, float] = (0.0, 0.0, 0.0)
    config: tuple[float, ...] = ()  # phi without the time and the headroom coupling


@dataclass
class RooflineLandscape:
    """Kernel kinds with saturated dimensions, a fixed floor, help odds that track headroom."""

    name: str = "paper"
    simulated: bool = True
    informative: bool = True  # False: h and phi are noise (the `no-structure` landscape)
    edit_difficulty: float = 0.0  # added to the failure odds of every child faster than its parent
    repeat_correlation: float = 0.0  # odds that a repeated (parent, strategy) repeats its outcome

    def __post_init__(self) -> None:
        self._outcomes: dict[tuple[str, str], str] = {}  # first outcome per (parent, strategy)

    def original(self, seed: int) -> SimKernel:
        self._outcomes = {}  # a new track: tracks run one after another on a landscape
        rng = np.random.default_rng([seed, 0])
        kind = list(KINDS)[int(rng.integers(len(KINDS)))]
        shares, base_phi = KINDS[kind]
        g = np.clip(np.array(shares) * rng.uniform(0.7, 1.3, 3), 0.0, 0.6)
        time_ms = float(rng.uniform(0.5, 5.0))
        waste = g * time_ms
        config = tuple((np.array(base_phi) + rng.normal(0.0, 2.0, 4)).tolist())
        fail_p = float(rng.uniform(0.3, 0.5))  # 30-50% of generations fail
        return self.make_kernel("k0", time_ms - float(waste.sum()), waste, config, fail_p, rng)

    def child(
        self, parent: SimKernel, strategy: str | None, kernel_id: str, rng: np.random.Generator
    ) -> SimKernel | None:
        """One simulated generation; strategy None = the generator picks one uniformly."""
        assert isinstance(parent, RoofKernel)
        if not self.repeat_correlation:
            return self._draw(parent, _pick(strategy, rng), kernel_id, rng)
        key = (parent.kernel_id, strategy or "")  # the prompt: a free choice is one prompt too
        first = self._outcomes.get(key)
        repeat = first is not None and rng.random() < self.repeat_correlation
        for _ in range(REPEAT_REDRAWS):
            # the same prompt tends to get the same answer: redraw until the first outcome's
            # class (failed / faster / not faster) comes back
            child = self._draw(parent, _pick(strategy, rng), kernel_id, rng)
            outcome = _outcome(parent, child)
            if not repeat or outcome == first:
                break
        self._outcomes.setdefault(key, outcome)
        return child

    def _draw(
        self, parent: RoofKernel, strategy: str, kernel_id: str, rng: np.random.Generator
    ) -> RoofKernel | None:
        """One independent generation from (parent, strategy)."""
        if rng.random() < parent.fail_p:
            return None
        dim = TARGET_DIMENSION[strategy]
        # one-sided: untargeted dimensions only get worse, so selecting the fastest child cannot
        # ratchet them down by luck (a compounding free lunch no real rewrite offers)
        waste = np.array(parent.waste) * np.exp(np.abs(rng.normal(0.0, SIDE_EFFECT_SD, 3)))
        waste[dim] = parent.waste[dim]
        if rng.random() < help_probability(parent.headroom[dim]):
            waste[dim] *= 1.0 - float(rng.beta(2.0, 3.0))  # removes part of what is left
        elif rng.random() < REGRESSION_SHARE:
            # a slower rewrite: new waste in a random dimension, up to 30% of the parent's time
            waste[int(rng.integers(3))] += float(rng.uniform(0.02, 0.3)) * parent.true_ms
        config = np.array(parent.config) + np.array(PHI_SHIFT[strategy]) + rng.normal(0, 1.0, 4)
        fail_p = parent.fail_p
        if self.edit_difficulty and float(waste.sum()) < float(sum(parent.waste)):
            # one more optimisation in the code: the next rewrite of it fails more often
            fail_p = min(MAX_FAIL_P, fail_p + self.edit_difficulty)
        return self.make_kernel(kernel_id, parent.floor_ms, waste, tuple(config.tolist()), fail_p, rng)

    def make_kernel(
        self, kernel_id: str, floor_ms: float, waste: np.ndarray, config: tuple[float, ...],
        fail_p: float, rng: np.random.Generator,
    ) -> RoofKernel:
        true_ms = floor_ms + float(waste.sum())
        measured = true_ms * math.exp(rng.normal(0.0, NOISE_SD))
        g = waste / true_ms
        if self.informative:
            h = signature_from_headroom(g, rng)
            phi = (math.log1p(true_ms), *(np.array(config) + g @ COUPLING).tolist())
        else:
            h = tuple(float(v) for v in rng.uniform(5.0, 95.0, 3))  # type: ignore[assignment]
            phi = (math.log1p(true_ms), *rng.normal(0.0, 10.0, 4).tolist())
        return RoofKernel(
            kernel_id, true_ms, measured, (float(g[0]), float(g[1]), float(g[2])), phi, h,
            fail_p, floor_ms, (float(waste[0]), float(waste[1]), float(waste[2])), config,
        )


def _pick(strategy: str | None, rng: np.random.Generator) -> str:
    """The requested strategy, or the generator's uniform choice when it is free."""
    return strategy or STRATEGY_NAMES[int(rng.integers(len(STRATEGY_NAMES)))]


def _outcome(parent: RoofKernel, child: RoofKernel | None) -> str:
    """The class of a generation's outcome, as a user would see it."""
    if child is None:
        return "failed"
    return "faster" if child.true_ms < parent.true_ms else "not faster"
