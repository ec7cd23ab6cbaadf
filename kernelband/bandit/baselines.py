"""Baselines run in the same harness: best-of-N, iterative refinement, random, flat UCB1."""

from __future__ import annotations

import numpy as np

from kernelband.bandit.arms import ucb_scores
from kernelband.bandit.config import BoNConfig, UCBConfig
from kernelband.bandit.policy import Policy
from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import STRATEGY_NAMES


class BestOfNPolicy(Policy):
    """Every pull rewrites the original kernel (strategy free, or uniform if configured)."""

    name = "bon"

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        assert isinstance(self.config, BoNConfig)
        strategy = None
        if self.config.strategy == "uniform":
            strategy = STRATEGY_NAMES[int(rng.integers(len(STRATEGY_NAMES)))]
        return 0, strategy, state.frontier[0].kernel_id


class RefinePolicy(Policy):
    """GEAK-like iterative refinement: always rewrite the current best; the generator picks how."""

    name = "refine"

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        return 0, None, state.best().kernel_id


class RandomPolicy(Policy):
    """Uniform strategy, uniform parent from the frontier."""

    name = "random"

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        strategy = STRATEGY_NAMES[int(rng.integers(len(STRATEGY_NAMES)))]
        parent = state.frontier[int(rng.integers(len(state.frontier)))]
        return 0, strategy, parent.kernel_id


class FlatUCB1Policy(Policy):
    """UCB1 over the six strategies only: no clusters, no masks, parent = current best."""

    name = "ucb1"

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        assert isinstance(self.config, UCBConfig)
        scores = ucb_scores(state, self.config.c, self.config.pending == "virtual")[0]
        ties = np.flatnonzero(np.isclose(scores, scores.max(), rtol=0.0, atol=1e-12))
        s = int(ties[int(rng.integers(len(ties)))]) if len(ties) > 1 else int(ties[0])
        return 0, STRATEGY_NAMES[s], state.best().kernel_id
