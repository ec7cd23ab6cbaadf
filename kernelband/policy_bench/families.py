"""SIMULATED `families` landscape: the roofline model with several implementation families.

Nothing here is measured. Real kernels come in algorithmic families with different floors: a
softmax in three passes or in one online pass, a matmul without tiling or tiled with split-K, an
attention with or without fusion. A structural rewrite (tiling, fusion, access_layout) sometimes
moves a kernel to another family; the newcomer is untuned, so it is usually *slower* than its
parent although its floor is lower. Tuning rewrites stay in the family (roofline.py's model).
Each family launches differently, so phi separates families and k-means can find them.
Assumptions and their rationale: docs/bandit.md, section "Simulator".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelband.bandit import STRATEGY_NAMES
from kernelband.policy_bench.landscapes import SimKernel
from kernelband.policy_bench.roofline import KINDS, RoofKernel, RooflineLandscape

N_FAMILIES = 3  # the original's family and two alternatives per problem
FLOOR_RATIO = (0.35, 0.85)  # an alternative family's floor relative to the original family's
STRUCTURAL = ("tiling", "fusion", "access_layout")  # strategies that may change the algorithm
JUMP_P = 0.3  # of the correct structural rewrites: the child belongs to another family
UNTUNED = (0.9, 1.8)  # a family newcomer's time relative to its parent's (usually slower)
FAMILY_PHI_SD = 16.0  # spread of the families' launch configurations (regs, smem, occ)


@dataclass(frozen=True)
class Family:
    """One implementation of the problem: its floor, headroom shares and launch configuration."""

    floor_ms: float
    shares: tuple[float, float, float]
    config: tuple[float, ...]


@dataclass(frozen=True)
class FamilyKernel(RoofKernel):
    """A roofline kernel that knows its family and the problem's families."""

    family: int = 0
    families: tuple[Family, ...] = ()


@dataclass
class FamiliesLandscape:
    """Roofline tuning within a family plus occasional structural jumps between families."""

    name: str = "families"
    simulated: bool = True
    informative: bool = True

    def __post_init__(self) -> None:
        self.roofline = RooflineLandscape(informative=self.informative)

    def original(self, seed: int) -> SimKernel:
        base = self.roofline.original(seed)
        assert isinstance(base, RoofKernel)
        rng = np.random.default_rng([seed, 2])
        families = [Family(base.floor_ms, _shares(base.waste), base.config)]
        for _ in range(N_FAMILIES - 1):
            shares, base_phi = KINDS[list(KINDS)[int(rng.integers(len(KINDS)))]]
            offset = rng.normal(0.0, FAMILY_PHI_SD, 4) * np.array([1.0, 1.0, 0.05, 1.0])
            families.append(Family(
                base.floor_ms * float(rng.uniform(*FLOOR_RATIO)),
                _shares(np.array(shares) * rng.uniform(0.7, 1.3, 3)),
                tuple((np.array(base_phi) + offset).tolist()),
            ))
        return self._wrap(base, 0, tuple(families))

    def child(
        self, parent: SimKernel, strategy: str | None, kernel_id: str, rng: np.random.Generator
    ) -> SimKernel | None:
        """One simulated generation; strategy None = the generator picks one uniformly."""
        assert isinstance(parent, FamilyKernel)
        if strategy is None:
            strategy = STRATEGY_NAMES[int(rng.integers(len(STRATEGY_NAMES)))]
        child = self.roofline.child(parent, strategy, kernel_id, rng)  # failure and tuning odds
        if child is None:
            return None
        if strategy in STRUCTURAL and rng.random() < JUMP_P:
            target = int(rng.choice([f for f in range(N_FAMILIES) if f != parent.family]))
            family = parent.families[target]
            time_ms = max(parent.true_ms * float(rng.uniform(*UNTUNED)), family.floor_ms * 1.3)
            waste = (time_ms - family.floor_ms) * np.array(family.shares)
            config = np.array(family.config) + rng.normal(0.0, 1.0, 4)
            jumped = self.roofline.make_kernel(kernel_id, family.floor_ms, waste,
                                         tuple(config.tolist()), parent.fail_p, rng)
            return self._wrap(jumped, target, parent.families)
        assert isinstance(child, RoofKernel)
        return self._wrap(child, parent.family, parent.families)

    @staticmethod
    def _wrap(kernel: RoofKernel, family: int, families: tuple[Family, ...]) -> FamilyKernel:
        fields = {name: getattr(kernel, name) for name in kernel.__dataclass_fields__}
        return FamilyKernel(**fields, family=family, families=families)


def _shares(waste: np.ndarray | tuple[float, ...]) -> tuple[float, float, float]:
    w = np.asarray(waste, dtype=float)
    s = w / w.sum()
    return (float(s[0]), float(s[1]), float(s[2]))
