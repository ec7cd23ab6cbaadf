"""SIMULATED reward landscapes: how a (parent, strategy) rewrite turns into a child kernel.

Nothing here is measured. These are the first (v0) landscapes, kept so that comparisons with
the roofline `paper` landscape (roofline.py) stay visible. The `paper-v0` landscape imitates the structure the KernelBand paper
relies on: kernel types whose hardware signature saturates some dimensions, strategies aimed at
a saturated dimension rarely help, gains shrink as a dimension's headroom is used up, 30-50%
of generations fail, and timings are noisy. `no-structure` keeps the gains but makes h and phi
uninformative; `uniform` makes every strategy equally good whatever the profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kernelband.bandit import STRATEGY_NAMES, TARGET_DIMENSION, FrontierEntry

NOISE_SD = 0.02  # lognormal sd of a timing measurement
REGRESSION_P = 0.25  # a correct rewrite that is slower than its parent
# (regs, smem KiB, log2 threads, occupancy %) shift of phi each strategy tends to cause
PHI_SHIFT = {
    "tiling": (8.0, 16.0, 0.0, -10.0),
    "vectorization": (4.0, 0.0, 0.0, 0.0),
    "fusion": (16.0, 4.0, 0.0, -12.0),
    "pipeline": (8.0, 24.0, 0.0, -8.0),
    "reordering": (0.0, 0.0, 1.0, 6.0),
    "access_layout": (2.0, 2.0, -1.0, 2.0),
}
KERNEL_TYPES = {  # headroom g per dimension (SM, DRAM, L2): fraction of time a dimension can save
    "memory-bound": (0.25, 0.02, 0.35),
    "compute-bound": (0.02, 0.35, 0.25),
}


@dataclass(frozen=True)
class SimKernel:
    """A simulated kernel: true time, per-dimension headroom, what a profiler would show."""

    kernel_id: str
    true_ms: float
    measured_ms: float
    headroom: tuple[float, float, float]
    phi: tuple[float, ...]
    h: tuple[float, float, float]
    fail_p: float  # chance that a generation from this kernel fails (fixed per problem)

    def entry(self) -> FrontierEntry:
        """What the policy sees: the measured time and the profile."""
        return FrontierEntry(self.kernel_id, self.measured_ms, self.phi, self.h)


class Landscape(Protocol):
    """A source of original kernels and children; `seed` picks the problem."""

    name: str
    simulated: bool

    def original(self, seed: int) -> SimKernel: ...

    def child(
        self, parent: SimKernel, strategy: str | None, kernel_id: str, rng: np.random.Generator
    ) -> SimKernel | None: ...


def signature_from_headroom(g: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    """Little headroom in a dimension shows as high throughput there (saturation)."""
    h = np.clip(92.0 - 180.0 * g + rng.normal(0.0, 4.0, 3), 1.0, 99.0)
    return (float(h[0]), float(h[1]), float(h[2]))


@dataclass
class PaperLandscape:
    """Kernel types with saturated dimensions; informative h and lineage-shaped phi."""

    name: str = "paper-v0"
    simulated: bool = True
    informative: bool = True  # False: h and phi are noise (the v0 `no-structure` landscape)
    uniform: bool = False  # True: every strategy draws on one shared headroom

    def original(self, seed: int) -> SimKernel:
        rng = np.random.default_rng([seed, 0])
        kind = list(KERNEL_TYPES)[int(rng.integers(len(KERNEL_TYPES)))]
        g = np.clip(np.array(KERNEL_TYPES[kind]) * rng.uniform(0.7, 1.3, 3), 0.0, 0.6)
        if self.uniform:
            g = np.full(3, float(rng.uniform(0.2, 0.35)))
        true_ms = float(rng.uniform(0.5, 5.0))
        phi = (math.log1p(true_ms), 32.0, 8.0, 7.0, 50.0)
        fail_p = float(rng.uniform(0.3, 0.5))  # 30-50% of generations fail
        return self._make("k0", true_ms, g, phi, fail_p, rng)

    def child(
        self, parent: SimKernel, strategy: str | None, kernel_id: str, rng: np.random.Generator
    ) -> SimKernel | None:
        """One simulated generation; strategy None = the generator picks one uniformly."""
        if strategy is None:
            strategy = STRATEGY_NAMES[int(rng.integers(len(STRATEGY_NAMES)))]
        if rng.random() < parent.fail_p:
            return None
        g = np.array(parent.headroom)
        dim = TARGET_DIMENSION[strategy]
        used = float(rng.beta(2.0, 3.0))
        if self.uniform:
            gain = g[0] * used
            g = g * (1.0 - used)
        else:
            gain = g[dim] * used
            attacked = g[dim] * (1.0 - used)  # diminishing returns in the attacked dimension
            g = np.clip(g / (1.0 - gain), 0.0, 0.6)  # Amdahl: the others grow in share
            g[dim] = attacked
        factor = (1.0 - gain) * math.exp(rng.normal(0.0, 0.03))
        if rng.random() < REGRESSION_P:
            # the rewrite is slower and leaves the bottleneck structure as it was
            factor, g = float(rng.uniform(1.0, 1.3)), np.array(parent.headroom)
        true_ms = parent.true_ms * factor
        shift = np.array(PHI_SHIFT[strategy]) + rng.normal(0.0, 1.0, 4)
        phi = (math.log1p(true_ms), *(np.array(parent.phi[1:]) + shift).tolist())
        return self._make(kernel_id, true_ms, g, phi, parent.fail_p, rng)

    def _make(
        self, kernel_id: str, true_ms: float, g: np.ndarray, phi: tuple[float, ...],
        fail_p: float, rng: np.random.Generator,
    ) -> SimKernel:
        measured = true_ms * math.exp(rng.normal(0.0, NOISE_SD))
        if self.informative and not self.uniform:
            h = signature_from_headroom(g, rng)
        else:
            h = tuple(float(v) for v in rng.uniform(5.0, 95.0, 3))  # type: ignore[assignment]
            phi = (math.log1p(true_ms), *rng.normal(0.0, 10.0, 4).tolist())
        headroom = (float(g[0]), float(g[1]), float(g[2]))
        return SimKernel(kernel_id, true_ms, measured, headroom, phi, h, fail_p)
