"""Arm scoring: saturation masks, UCB with pending pulls, tie-breaking and parent sampling.

Pending pulls (the asynchronous batch scheme). The paper selects one arm, waits for its
reward, then selects again. A fleet has P pulls in flight. Without care, P selections made
before any reward returns all pick the same argmax arm. We count each pending pull as a
*virtual pull at the arm's current mean*: N_eff = N + pending(arm), mu unchanged, and the
round counter t_eff = t + 1 + pending(total). The virtual pull shrinks the arm's exploration
bonus exactly as a real pull that returned the mean would, so the next selection moves to the
arm with the next-highest UCB; when the real reward arrives it replaces the virtual one (the
pending entry is removed and N, mu are updated with the true reward), in any order.
"""

from __future__ import annotations

import math

import numpy as np

from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import STRATEGY_NAMES, TARGET_DIMENSION
from kernelband.bandit.types import FrontierEntry

TARGETS = np.array([TARGET_DIMENSION[s] for s in STRATEGY_NAMES])


def ucb_scores(state: PolicyState, c: float, virtual: bool) -> np.ndarray:
    """mu + c * sqrt(ln t / N) for every (cluster, strategy), counting pending pulls if virtual."""
    n = np.array(state.arm_n, dtype=float)
    mu = np.array(state.arm_mu, dtype=float)
    t = state.t + 1
    if virtual:
        for (cluster, strategy), count in state.pending_counts().items():
            if strategy is not None and cluster < n.shape[0]:
                n[cluster, STRATEGY_NAMES.index(strategy)] += count
        t += len(state.pending)
    return mu + c * np.sqrt(math.log(t) / n)


def cluster_members(state: PolicyState, n_clusters: int) -> list[list[int]]:
    """Frontier indices of each cluster, ascending."""
    labels = np.asarray(state.labels, dtype=np.int64)  # one pass in C: frontiers reach 1,000s
    return [np.flatnonzero(labels == cluster).tolist() for cluster in range(n_clusters)]


def representative(state: PolicyState, members: list[int]) -> int | None:
    """The fastest member that has a hardware signature (the first on ties), or None."""
    frontier, best, best_ms = state.frontier, None, math.inf
    for i in members:  # a plain loop: this runs over the whole frontier on every selection
        entry = frontier[i]
        if entry.h is not None and (best is None or entry.time_ms < best_ms):
            best, best_ms = i, entry.time_ms
    return best


def open_arms(state: PolicyState, members: list[list[int]], theta: np.ndarray,
              reps: list[int | None] | None = None) -> np.ndarray:
    """Mask [cluster, strategy]: open when the representative's target dimension is unsaturated.

    `reps`: each cluster's `representative`, when the caller already has them."""
    mask = np.zeros((len(members), len(STRATEGY_NAMES)), dtype=bool)
    for cluster, idx in enumerate(members):
        if not idx:
            continue  # empty clusters are closed
        rep = representative(state, idx) if reps is None else reps[cluster]
        mask[cluster] = open_row(None if rep is None else state.frontier[rep].h, theta)
    return mask


def open_row(h: tuple[float, float, float] | None, theta: np.ndarray) -> np.ndarray:
    """Open strategies of a non-empty cluster whose representative has signature `h`."""
    if h is None:
        return np.ones(len(STRATEGY_NAMES), dtype=bool)  # no signature, no evidence of saturation
    headroom = theta[TARGETS] - np.array(h)[TARGETS]
    row = headroom > 0
    if not row.any():
        row = headroom == headroom.max()  # every dimension saturated: most headroom stays open
    return row


def argmax_open(scores: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> tuple[int, int]:
    """Best open arm; exact ties are broken uniformly at random (seeded)."""
    best = np.where(mask, scores, -np.inf).max()
    # np.isclose(x, best, rtol=0, atol=1e-12) on open arms, without its generic checks
    ties = np.argwhere((np.abs(scores - best) <= 1e-12) & mask)
    row, col = ties[int(rng.integers(len(ties)))] if len(ties) > 1 else ties[0]
    return int(row), int(col)


def sample_parent(
    state: PolicyState, members: list[int], dim: int, theta: float, temperature: float,
    rng: np.random.Generator, signed: set[str] | None = None,
) -> int:
    """Softmax over headroom (theta - h[dim]) / temperature; fastest member without signatures.

    With `signed`, only those kernels' signatures count and every other member scores a
    neutral 0 (the authors' release: it profiles cluster representatives only).
    """
    if signed is None:
        scored = [i for i in members if state.frontier[i].h is not None]
        if not scored:
            return min(members, key=lambda i: state.frontier[i].time_ms)
        logits = np.array([theta - state.frontier[i].h[dim] for i in scored])  # type: ignore[index]
    else:
        if not any(state.frontier[i].kernel_id in signed for i in members):
            return min(members, key=lambda i: state.frontier[i].time_ms)
        scored = members
        logits = np.array([_headroom(state.frontier[i], dim, theta, signed) for i in scored])
    weights = np.exp((logits - logits.max()) / temperature)
    return scored[int(rng.choice(len(scored), p=weights / weights.sum()))]


def _headroom(entry: FrontierEntry, dim: int, theta: float, signed: set[str]) -> float:
    """theta - h[dim] for a signed kernel with a signature; 0 (neutral) for any other."""
    if entry.h is None or entry.kernel_id not in signed:
        return 0.0
    return theta - entry.h[dim]
