"""hwucb: the service's own policy. Keeps what KernelBand gets right, drops what did not hold up.

Kept from the paper: one arm per optimisation strategy, each aimed at a hardware dimension;
saturation masks (a strategy whose dimension is near peak on the current best kernel is not
tried); UCB selection that counts pulls in flight as virtual pulls at the arm's mean.

Changed, after the policy benchmark (bench/RESULTS.md, docs/bandit.md "Our policy"):
- no k-means clusters: on every landscape the clusters split the pulls of a 20-pull budget
  without separating kernels that answer strategies differently, so the arm statistics are
  shared by the whole frontier;
- no headroom softmax for the parent: the softmax spends pulls on slow kernels with headroom.
  The parent is the fastest kernel whose (kernel, strategy) prompt has been issued fewer than
  `repeat_cap` times, among the `parents` fastest; when all are used up, the least-asked of
  them (fastest on ties). Asking the same prompt again mostly returns the same answer, so the
  cap moves the search to the next-best kernel instead of repeating it.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from kernelband.bandit.arms import argmax_open, open_arms, ucb_scores
from kernelband.bandit.config import HwUcbConfig
from kernelband.bandit.policy import Policy
from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import STRATEGY_NAMES


class HwUcbPolicy(Policy):
    """Masked UCB over the six strategies; fastest parent with a repeat cap per prompt."""

    name: ClassVar[str] = "hwucb"
    reads_signature: ClassVar[bool] = True  # saturation masks read h of the best kernel

    def __init__(self, config: HwUcbConfig) -> None:
        super().__init__(config)
        self.cfg = config
        self.theta = np.array(config.theta_sat, dtype=float)
        self.theta.setflags(write=False)  # policies are shared by jobs configured alike

    def _choose(self, state: PolicyState, rng: np.random.Generator) -> tuple[int, str | None, str]:
        everyone = [list(range(len(state.frontier)))]
        mask = open_arms(state, everyone, self.theta)
        scores = ucb_scores(state, self.cfg.c, self.cfg.pending == "virtual")
        _, s = argmax_open(scores[:1], mask, rng)
        parent = self.parent(state, s)
        counts = state.prompts.setdefault(parent, [0] * len(STRATEGY_NAMES))
        counts[s] += 1
        return 0, STRATEGY_NAMES[s], parent

    def parent(self, state: PolicyState, s: int) -> str:
        """The fastest of the `parents` fastest kernels still under the cap for strategy s."""
        ranked = sorted(range(len(state.frontier)), key=lambda i: (state.frontier[i].time_ms, i))
        ids = [state.frontier[i].kernel_id for i in ranked[: self.cfg.parents]]
        asked = [state.prompts.get(k, [0] * len(STRATEGY_NAMES))[s] for k in ids]
        for kernel_id, count in zip(ids, asked, strict=True):
            if count < self.cfg.repeat_cap:
                return kernel_id
        return ids[int(np.argmin(asked))]
