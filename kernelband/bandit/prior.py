"""`kernelband+prior`: KernelBand v2 plus v1's compatibility prior alpha * p(success | h, s)."""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import ClassVar

import numpy as np

from kernelband.bandit.config import PriorConfig
from kernelband.bandit.frontier_index import entry_of
from kernelband.bandit.kernelband import KernelBandPolicy
from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import STRATEGY_NAMES, STRATEGY_TARGETS
from kernelband.bandit.threads import one_thread
from kernelband.bandit.types import Decision, FrontierEntry

N_STRATEGIES = len(STRATEGY_NAMES)
TARGETS = np.array([dim for _, dim in STRATEGY_TARGETS])
WARM_START_SEED = 20251123  # fixed: the synthetic warm start is part of the model, not the track


def prior_features(h: np.ndarray, strategies: np.ndarray) -> np.ndarray:
    """Rows [h / 100, one-hot(strategy), h[target(strategy)] / 100] for matching h, strategy."""
    onehot = np.eye(N_STRATEGIES)[strategies]
    target_load = h[np.arange(len(h)), TARGETS[strategies]][:, None]
    return np.hstack([h / 100.0, onehot, target_load / 100.0])


@lru_cache(maxsize=8)
def warm_start_pairs(count: int, theta: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic (features, success): attacking an unsaturated dimension succeeds more often."""
    rng = np.random.default_rng(WARM_START_SEED)
    h = rng.uniform(0.0, 100.0, size=(count, 3))
    strategies = np.arange(count) % N_STRATEGIES
    unsaturated = h[np.arange(count), TARGETS[strategies]] < np.array(theta)[TARGETS[strategies]]
    success = rng.random(count) < np.where(unsaturated, 0.55, 0.10)
    success[:2] = [True, False]  # both classes must exist for the logistic fit
    return prior_features(h, strategies), success.astype(int)


def fit_prior(buffer: list[list[float]], warm: tuple[np.ndarray, np.ndarray]) -> list[float]:
    """Fit the logistic model on warm start + buffer; return [bias, weights...]."""
    x, y = warm
    if buffer:
        rows = np.array(buffer)
        x = np.vstack([x, prior_features(rows[:, :3], rows[:, 3].astype(int))])
        y = np.concatenate([y, rows[:, 4].astype(int)])
    # imported here: scikit-learn (and the scipy modules it loads) took seconds of every
    # process's start that imports the policies, most of which never fit a prior
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1.0, max_iter=300)
    with warnings.catch_warnings(), one_thread():
        warnings.simplefilter("ignore")
        model.fit(x, y)
    return [float(model.intercept_[0]), *(float(w) for w in model.coef_[0])]


class KernelBandPriorPolicy(KernelBandPolicy):
    """UCB score + alpha * p(s | h of the cluster representative), trained online."""

    name: ClassVar[str] = "kernelband+prior"

    def __init__(self, config: PriorConfig) -> None:
        super().__init__(config)
        self.prior_cfg = config
        self.warm = warm_start_pairs(config.warm_start, config.theta_sat)

    def init_state(self, original: FrontierEntry, seed: int) -> PolicyState:
        state = super().init_state(original, seed)
        state.prior_coef = fit_prior([], self.warm)
        return state

    def _bonus(self, state: PolicyState, reps: list[int | None]) -> np.ndarray | float:
        coef = np.array(state.prior_coef)
        bonus = np.full((len(reps), N_STRATEGIES), 0.5 * self.prior_cfg.alpha)
        for cluster, rep in enumerate(reps):
            if rep is None:
                continue
            h = np.tile(np.array(state.frontier[rep].h), (N_STRATEGIES, 1))
            logits = prior_features(h, np.arange(N_STRATEGIES)) @ coef[1:] + coef[0]
            bonus[cluster] = self.prior_cfg.alpha / (1.0 + np.exp(-logits))
        return bonus

    def _learn(
        self, state: PolicyState, decision: Decision, child: FrontierEntry | None, r: float
    ) -> None:
        """Update the arm, then record (parent h, strategy, success) and refit the prior."""
        super()._learn(state, decision, child, r)
        parent = entry_of(state, decision.parent_id)
        if decision.strategy is None or parent.h is None:
            return
        success = float(child is not None and child.time_ms < parent.time_ms)
        state.prior_buffer.append([*parent.h, float(STRATEGY_NAMES.index(decision.strategy)), success])
        state.prior_buffer = state.prior_buffer[-self.prior_cfg.buffer :]
        state.prior_coef = fit_prior(state.prior_buffer, self.warm)
