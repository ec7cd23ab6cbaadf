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
    """Median and p95 time of one select() in ms (wall and CPU), and of one update().

    CPU time (this thread) next to wall time separates the work select() does from the time
    the process waits for a core on a loaded machine.
    """
    policy = make_policy(policy_name)
    state = large_state(policy_name, size)
    select_ms, select_cpu_ms = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.thread_time()
        decision, _ = policy.select(state)
        select_cpu_ms.append((time.thread_time() - cpu) * 1e3)
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
        "select_cpu_p95_ms": float(np.percentile(select_cpu_ms, 95)),
        "update_median_ms": float(np.median(update_ms)),
        "update_max_ms": float(np.max(update_ms)),
    }
