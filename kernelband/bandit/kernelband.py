"""KernelBand v2: masked UCB over (cluster x strategy) arms with headroom-weighted parents."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from kernelband.bandit.arms import argmax_open, ucb_scores
from kernelband.bandit.clustering import assign, recluster, should_recluster
from kernelband.bandit.config import KernelBandConfig
from kernelband.bandit.frontier_index import (
    cluster_index,
    fastest,
    open_mask,
    sample_parent_indexed,
)
from kernelband.bandit.policy import Policy
from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import STRATEGY_NAMES, TARGET_DIMENSION
from kernelband.bandit.types import FrontierEntry


class KernelBandPolicy(Policy):
    """One iteration: mask arms by saturation, pick the UCB arm, sample a parent in its cluster."""

    name: ClassVar[str] = "kernelband"
    reads_signature: ClassVar[bool] = True  # masks and parent sampling

    def __init__(self, config: KernelBandConfig) -> None:
        super().__init__(config)
        self.cfg = config
        self.theta = np.array(config.theta_sat, dtype=float)
        self.theta.setflags(write=False)  # policies are shared by jobs configured alike

    def init_state(self, original: FrontierEntry, seed: int) -> PolicyState:
        """Arm tables get one row per possible cluster (K); only row 0 is live before clustering."""
        state = super().init_state(original, seed)
        state.arm_n = [[1.0] * len(STRATEGY_NAMES) for _ in range(self.cfg.k)]
        state.arm_mu = [[0.5] * len(STRATEGY_NAMES) for _ in range(self.cfg.k)]
        return state

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        index = cluster_index(state, self.cfg.k)  # members and representatives, kept between pulls
        mask = open_mask(index, self.theta)
        scores = ucb_scores(state, self.cfg.c, self.cfg.pending == "virtual")
        scores = scores + self._bonus(state, index.reps)
        cluster, s = argmax_open(scores, mask, rng)
        strategy = STRATEGY_NAMES[s]
        dim = TARGET_DIMENSION[strategy]
        if self.cfg.parent_rule == "fastest":
            parent = fastest(index, cluster)
        else:
            parent = sample_parent_indexed(
                index, cluster, dim, float(self.theta[dim]), self.cfg.temperature, rng,
                self._signed(state, index.reps),
            )
        return cluster, strategy, state.frontier[parent].kernel_id

    def _signed(self, state: PolicyState, reps: list[int | None]) -> set[str] | None:
        """Kernels whose signature the parent softmax reads; None: every member's.

        In `representatives` scope the current representatives join the signed set and stay
        in it, as a profile once taken stays cached on its kernel in the authors' release.
        """
        if self.cfg.signatures == "all":
            return None
        for rep in reps:
            kernel_id = None if rep is None else state.frontier[rep].kernel_id
            if kernel_id is not None and kernel_id not in state.signed:
                state.signed.append(kernel_id)
        return set(state.signed)

    def _bonus(self, state: PolicyState, reps: list[int | None]) -> np.ndarray | float:
        """Extra score per arm given each cluster's representative; zero here, the
        compatibility prior in `kernelband+prior`."""
        return 0.0

    def _on_join(self, state: PolicyState, rng: np.random.Generator) -> None:
        """Place the newcomer in its nearest cluster; re-cluster on the tau schedule."""
        state.labels[-1] = assign(state, state.frontier[-1])
        if should_recluster(state, self.cfg.k, self.cfg.tau):
            recluster(state, self.cfg.k, self.cfg.kmeans_n_init, rng)
