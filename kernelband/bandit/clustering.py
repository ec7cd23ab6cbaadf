"""Cluster the frontier by k-means on z-scored phi, keeping cluster indices stable.

A fresh k-means++ fit (`kmeans_n_init` restarts; scikit-learn's, computed in numpy by `kmeans`
on small frontiers) costs about a millisecond on a small frontier and more on a large one, and a
scheduler re-clusters each of its tracks every tau additions. So a fresh fit runs while the frontier is small (under WARM_FROM), when clusters first form, whenever the
frontier's size reaches the next power of two, and when the last clustering cannot seed the
next (a cluster count or feature layout that changed); in between, Lloyd's iterations
continue from the last centroids (mapped into the new z-space) to convergence: the same
objective, a local optimum next to the last one, found in a few numpy passes over the frontier.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from kernelband.bandit.frontier_index import frontier_arrays_of
from kernelband.bandit.kmeans import kmeans_plusplus_fit
from kernelband.bandit.state import PolicyState
from kernelband.bandit.threads import one_thread
from kernelband.bandit.types import FrontierEntry


def feature_matrix(entries: list[FrontierEntry]) -> np.ndarray:
    """phi of every entry, or log1p(time) alone when phi is missing or of mixed length."""
    lengths = {len(e.phi) for e in entries}
    if len(lengths) == 1 and 0 not in lengths:
        return np.array([e.phi for e in entries], dtype=float)
    return np.array([[math.log1p(e.time_ms)] for e in entries], dtype=float)


def should_recluster(state: PolicyState, k: int, tau: int) -> bool:
    """Cluster first when the frontier reaches 2K kernels, then every tau additions."""
    if k < 2 or len(state.frontier) < 2 * k:
        return False
    return state.n_clusters == 1 or state.since_recluster >= tau


def distinct_rows(x: np.ndarray, at_most: int) -> int:
    """How many distinct rows `x` holds, counting no further than `at_most`.

    Equal to min(at_most, len(np.unique(x, axis=0))) for finite values, without sorting every
    row: the scan stops at the `at_most`-th distinct row, which on a real frontier is within the
    first few. Adding 0.0 makes -0.0 and 0.0 one value, as numpy's comparison does."""
    seen: set[bytes] = set()
    for row in np.ascontiguousarray(x + 0.0):
        seen.add(row.tobytes())
        if len(seen) >= at_most:
            break
    return min(len(seen), at_most)


# Frontiers below this size are fitted afresh in numpy (`kmeans`: about 1.4 against 2.1 ms at
# 128 entries, 2.0 against 2.4 at 256), larger ones by scikit-learn's compiled loop (3.2 against
# 3.3 ms at 512, 4.2 against 5.4 at 1,024): the same labels and centroids either way.
NUMPY_FIT_BELOW = 448
MAX_LLOYD_ITERATIONS, LLOYD_TOL = 300, 1e-4  # scikit-learn's defaults (max_iter, tol)
# Below this frontier size every re-clustering is a fresh fit, as the paper's: a run of 100
# pulls decides exactly as before, and the fits a long campaign repeats are the large ones.
WARM_FROM = 128


def recluster(state: PolicyState, k: int, n_init: int, rng: np.random.Generator) -> None:
    """K-means on the whole frontier (in place on a copied state); old indices are kept.

    Continues from the last centroids when it may (`_warm_start`), else a fresh fit."""
    arrays = frontier_arrays_of(state)
    x = arrays.phi if arrays.phi is not None else np.log1p(arrays.time_ms)[:, None]
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std[std == 0] = 1.0  # a constant feature carries no information; keep it neutral
    z = (x - mean) / std
    k_eff = distinct_rows(z.round(9), k)
    start = _warm_start(state, k_eff, mean, std)
    warm = lloyd(z, start[1]) if start is not None else None
    if start is not None and warm is not None:
        _place(state, warm[0], warm[1], start[0], mean, std)
        return
    if k_eff < 2:
        labels = np.zeros(len(z), dtype=int)
        centroids = z.mean(axis=0, keepdims=True)
    else:
        labels, centroids = fresh_fit(z, k_eff, n_init, int(rng.integers(2**31 - 1)))
    _place(state, labels, centroids, _align(state, centroids, mean, std), mean, std)


def fresh_fit(z: np.ndarray, k: int, n_init: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, centroids) of a fresh k-means++ fit: computed in numpy under NUMPY_FIT_BELOW
    rows, else by scikit-learn, which also fits when a numpy restart leaves a cluster empty (it
    then moves the farthest point into it)."""
    fitted = kmeans_plusplus_fit(z, k, n_init, seed) if len(z) < NUMPY_FIT_BELOW else None
    if fitted is not None:
        return fitted
    from sklearn.cluster import KMeans  # imported on first use: seconds of a process's start

    model = KMeans(n_clusters=k, init="k-means++", n_init=n_init, random_state=seed)
    # one thread: tiny inputs, and OpenMP oversubscription on a busy host costs seconds
    with warnings.catch_warnings(), one_thread():
        warnings.simplefilter("ignore")  # duplicate points: sklearn warns, result is fine
        labels = model.fit_predict(z)
    return labels, model.cluster_centers_


def _place(state: PolicyState, labels: np.ndarray, centroids: np.ndarray, order: list[int],
           mean: np.ndarray, std: np.ndarray) -> None:
    """Store a clustering: new cluster i keeps index order[i]."""
    state.labels = np.asarray(order)[labels].tolist()
    placed: list[list[float]] = [[] for _ in range(max(order) + 1)]  # [] marks an empty index
    for new, old in enumerate(order):
        placed[old] = [float(v) for v in centroids[new]]
    state.centroids = placed
    state.z_mean = mean.tolist()
    state.z_std = std.tolist()
    state.n_clusters = len(order)
    state.since_recluster = 0


def _warm_start(state: PolicyState, k_eff: int, mean: np.ndarray,
                std: np.ndarray) -> tuple[list[int], np.ndarray] | None:
    """(indices, centroids in the new z-space) of the live clusters to continue from; None
    when a fresh fit is due: a frontier under WARM_FROM, no clustering yet, another cluster
    count or feature layout, or a frontier that crossed a power of two in size since the
    last re-clustering."""
    size, before = len(state.frontier), len(state.frontier) - state.since_recluster
    indices = [i for i, c in enumerate(state.centroids) if c]
    if (size < WARM_FROM or state.n_clusters < 2 or len(indices) != k_eff
            or len(state.z_mean) != len(mean) or size.bit_length() > max(before, 1).bit_length()):
        return None
    old = np.array([state.centroids[i] for i in indices]) * np.array(state.z_std)
    return indices, (old + np.array(state.z_mean) - mean) / std


def lloyd(z: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Lloyd's iterations from `centroids`, stopping as scikit-learn's do (no point changes
    cluster, or the centroids move less than its default tolerance): (labels, centroids);
    None when a cluster is left without points (a fresh fit places it)."""
    tol = LLOYD_TOL * float(np.var(z, axis=0).mean())
    labels = _nearest(z, centroids)
    for _ in range(MAX_LLOYD_ITERATIONS):
        counts = np.bincount(labels, minlength=len(centroids))
        if not counts.all():
            return None
        moved = np.stack([np.bincount(labels, weights=column, minlength=len(centroids))
                          for column in z.T], axis=1) / counts[:, None]
        shift, centroids = float(((moved - centroids) ** 2).sum()), moved
        nearest = _nearest(z, centroids)
        if np.array_equal(nearest, labels) or shift <= tol:
            labels = nearest
            break
        labels = nearest
    return (labels, centroids) if np.bincount(labels, minlength=len(centroids)).all() else None


def _nearest(z: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The nearest centroid of each row (|c|^2 - 2 z.c: the row's own norm ranks nothing)."""
    return ((centroids * centroids).sum(axis=1) - 2.0 * (z @ centroids.T)).argmin(axis=1)


def _align(
    state: PolicyState, centroids: np.ndarray, mean: np.ndarray, std: np.ndarray
) -> list[int]:
    """Map new cluster i to an old index so that arm statistics keep following similar kernels."""
    if not state.centroids or len(state.z_mean) != len(mean):
        return list(range(len(centroids)))
    indices = [i for i, c in enumerate(state.centroids) if c]
    old = np.array([state.centroids[i] for i in indices]) * np.array(state.z_std)
    old_z = (old + np.array(state.z_mean) - mean) / std
    cost = np.linalg.norm(centroids[:, None, :] - old_z[None, :, :], axis=2)
    from scipy.optimize import linear_sum_assignment  # imported on first use, as KMeans

    rows, cols = linear_sum_assignment(cost)
    order = [-1] * len(centroids)
    for r, c in zip(rows, cols, strict=True):
        order[r] = indices[int(c)]
    taken = set(order)
    free = iter(i for i in range(len(centroids) + len(state.centroids)) if i not in taken)
    return [o if o >= 0 else next(free) for o in order]


def assign(state: PolicyState, entry: FrontierEntry) -> int:
    """Cluster of a new frontier entry: the nearest centroid in the stored z-space.

    Every child that joins is placed here: the entry's own features (`feature_matrix` of one
    entry) and one subtraction for every live centroid, each distance the square root of a
    row's dot product with itself, as `np.linalg.norm` computes it, so the same cluster wins."""
    if state.n_clusters <= 1 or not state.centroids:
        return 0
    x = np.array(entry.phi if entry.phi else (math.log1p(entry.time_ms),), dtype=float)
    if len(x) != len(state.z_mean):
        return 0  # feature layout changed; the next re-clustering places it properly
    z = (x - np.array(state.z_mean)) / np.array(state.z_std)
    live = [i for i, c in enumerate(state.centroids) if c]
    gaps = np.array([state.centroids[i] for i in live], dtype=float) - z
    distances = [math.sqrt(gap.dot(gap)) for gap in gaps]
    return live[int(np.argmin(distances))]
