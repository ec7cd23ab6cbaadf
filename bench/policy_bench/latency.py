"""Selection latency: select() on a frontier of 1,000 candidates (clustered once, not per call)."""

from __future__ import annotations

import time

import numpy as np

from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.clustering import recluster


def large_state(policy_name: str, size: int, seed: int = 0) -> PolicyState:
    """A track state whose frontier holds `size` kernels with random profiles, clustered."""
    rng = np.random.default_rng(seed)
    policy = make_policy(policy_name)
    state = policy.init_state(FrontierEntry("k0", 10.0, (2.4, 32, 8, 7, 50), (40, 40, 40)), seed)
    for i in range(1, size):
        phi = tuple(float(v) for v in rng.normal(0, 5, 5))
        h = tuple(float(v) for v in rng.uniform(5, 95, 3))
        state.frontier.append(FrontierEntry(f"k{i}", float(rng.uniform(1, 10)), phi, h))  # type: ignore[arg-type]
        state.labels.append(0)
    if policy_name.startswith("kernelband"):
        recluster(state, 3, 3, rng)
    return state


def time_select(policy_name: str, size: int = 1000, repeats: int = 200) -> dict[str, float]:
    """Median and p95 wall time of one select() in ms, and of one update() (incl. re-clustering)."""
    policy = make_policy(policy_name)
    state = large_state(policy_name, size)
    select_ms = []
    for _ in range(repeats):
        start = time.perf_counter()
        decision, _ = policy.select(state)
        select_ms.append((time.perf_counter() - start) * 1e3)
    update_ms = []
    for i in range(max(10, repeats // 10)):
        decision, pending = policy.select(state)
        child = FrontierEntry(f"new{i}", 5.0, (1.0, 30, 8, 7, 40), (30.0, 30.0, 30.0))
        start = time.perf_counter()
        _, state = policy.update(pending, decision.decision_id, child)
        update_ms.append((time.perf_counter() - start) * 1e3)
    return {
        "select_median_ms": float(np.median(select_ms)),
        "select_p95_ms": float(np.percentile(select_ms, 95)),
        "update_median_ms": float(np.median(update_ms)),
        "update_max_ms": float(np.max(update_ms)),
    }
