"""The policy interface: select and update on plain state; no I/O, no clock, no database."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from kernelband.bandit.config import BaseConfig
from kernelband.bandit.frontier_index import entry_of, in_frontier
from kernelband.bandit.state import PolicyState, rng_restore, rng_to_json
from kernelband.bandit.strategies import STRATEGY_NAMES
from kernelband.bandit.types import Decision, FrontierEntry, PolicyStateError, reward


class Policy:
    """Base class: subclasses provide `_choose` (and may refine `_learn` / `_on_join`)."""

    name: ClassVar[str] = ""
    n_cluster_rows: ClassVar[int] = 1
    # Whether decisions read the hardware signature h; when not, GPU workers skip the Nsight
    # Compute pass that measures it (seconds per candidate) and report the estimate instead.
    reads_signature: ClassVar[bool] = False

    def __init__(self, config: BaseConfig) -> None:
        self.config = config

    @property
    def failure_reward(self) -> float:
        return float(getattr(self.config, "failure_reward", 0.0))

    def init_state(self, original: FrontierEntry, seed: int) -> PolicyState:
        """A fresh track whose frontier holds only the original kernel."""
        rows = self.n_cluster_rows
        return PolicyState(
            policy=self.name,
            seed=int(seed),
            rng=rng_to_json(np.random.default_rng(int(seed))),
            frontier=[original],
            arm_n=[[1.0] * len(STRATEGY_NAMES) for _ in range(rows)],
            arm_mu=[[0.5] * len(STRATEGY_NAMES) for _ in range(rows)],
            labels=[0],
        )

    def select(self, state: PolicyState) -> tuple[Decision, PolicyState]:
        """Choose (cluster, strategy, parent); the decision is recorded as pending."""
        self._check(state)
        new = state.successor()  # a selection never changes the frontier or labels
        rng = rng_restore(new.rng)
        cluster, strategy, parent_id = self._choose(new, rng)
        new.rng = rng_to_json(rng)
        decision = Decision(f"d{new.next_decision}", cluster, strategy, parent_id)
        new.next_decision += 1
        new.pending[decision.decision_id] = decision
        return decision, new

    def update(
        self, state: PolicyState, decision_id: str, child: FrontierEntry | None
    ) -> tuple[float, PolicyState]:
        """Apply the result of a pending decision (child None = failed); returns the reward."""
        self._check(state)
        if decision_id not in state.pending:
            raise PolicyStateError(
                f"kernelband: decision {decision_id!r} is not pending (already applied or never "
                "selected); apply each result exactly once"
            )
        if child is not None and in_frontier(state, child.kernel_id):
            raise PolicyStateError(
                f"kernelband: kernel {child.kernel_id!r} is already in the frontier; "
                "give every child a new kernel_id"
            )
        new = state.successor()
        decision = new.pending.pop(decision_id)
        r = reward(entry_of(new, decision.parent_id).time_ms, child, self.failure_reward)
        rng = rng_restore(new.rng)
        self._learn(new, decision, child, r)
        if child is not None:
            # new lists: the input state shares the old ones (`PolicyState.successor`)
            new.frontier = [*new.frontier, child]
            new.labels = [*new.labels, 0]
            new.since_recluster += 1
            self._on_join(new, rng)
        new.t += 1
        new.rng = rng_to_json(rng)
        return r, new

    def _check(self, state: PolicyState) -> None:
        if state.policy != self.name:
            raise PolicyStateError(
                f"kernelband: this state belongs to policy {state.policy!r}, not {self.name!r}; "
                "use the policy the track was started with"
            )

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        raise NotImplementedError("Must provide _choose(state, rng) -> (cluster, strategy, parent_id)")

    def _learn(
        self, state: PolicyState, decision: Decision, child: FrontierEntry | None, r: float
    ) -> None:
        """Incremental mean: N += 1; mu += (r - mu) / N (strategy-free pulls teach no arm)."""
        if decision.strategy is None:
            return
        s = STRATEGY_NAMES.index(decision.strategy)
        row = min(decision.cluster, len(state.arm_n) - 1)
        state.arm_n[row][s] += 1
        state.arm_mu[row][s] += (r - state.arm_mu[row][s]) / state.arm_n[row][s]

    def _on_join(self, state: PolicyState, rng: np.random.Generator) -> None:
        """Hook after a child joined the frontier (clustering policies re-cluster here)."""
