"""A fresh k-means++ fit in numpy: scikit-learn's `KMeans(init="k-means++", n_init=...)` on
one thread, step for step, without its per-call overhead.

A re-clustering fits the whole frontier afresh while it is small (`clustering.WARM_FROM`):
every tau additions of every track. Input validation, parameter checks, thread-pool set-up
and the per-call work of the compiled Lloyd loop made scikit-learn's fit cost about 2 ms for
a frontier of 30-100 entries and K = 3, of which the arithmetic is a small part. This module
does the same arithmetic in the same order:

- the data centred on its mean, squared row norms, tolerance = mean feature variance x 1e-4;
- per restart: greedy k-means++ seeding (2 + log K local trials per centre, drawn from a
  `RandomState` seeded with the fit's seed, one stream over all restarts), then Lloyd's
  iterations (assignment by |c|^2 - 2 x.c, centres as sequential sums times 1 / count),
  stopping on unchanged labels or a squared centre shift within the tolerance, then one last
  assignment when it stopped on the shift;
- the restart with the lowest inertia wins unless it is the same clustering as the best so far.

tests/unit/bandit/test_kmeans.py compares labels and centroids with scikit-learn's on random
inputs (duplicates included): equal, bit for bit. A restart that leaves a cluster empty (scikit-
learn then moves the farthest point into it) returns None; `clustering.recluster` then runs
scikit-learn's fit itself.
"""

from __future__ import annotations

import numpy as np

MAX_ITERATIONS, TOLERANCE = 300, 1e-4  # scikit-learn's defaults (max_iter, tol)


def kmeans_plusplus_fit(z: np.ndarray, k: int, n_init: int,
                        seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(labels, centroids) of the best of `n_init` k-means++ restarts on the rows of `z`;
    None when a restart leaves a cluster without points."""
    x = np.array(z, dtype=np.float64)
    tol = float(np.mean(np.var(x, axis=0))) * TOLERANCE
    random = np.random.RandomState(seed)
    mean = x.mean(axis=0)
    x -= mean
    norms = np.einsum("ij,ij->i", x, x)
    best: tuple[np.ndarray, float, np.ndarray] | None = None
    for _ in range(n_init):
        run = _lloyd(x, _seeds(x, k, norms, random), tol)
        if run is None:
            return None
        if best is None or (run[1] < best[1] and not _same_clustering(run[0], best[0])):
            best = run
    assert best is not None  # n_init >= 1
    return best[0], best[2] + mean


def _distances(x: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Squared distances of `rows` to every row of `x` (norms: x's squared row norms), as
    scikit-learn's `_euclidean_distances` computes them: -2 r.x + |r|^2 + |x|^2, clipped at 0."""
    distances = -2 * (rows @ x.T)
    distances += np.einsum("ij,ij->i", rows, rows)[:, None]
    distances += norms[None, :]
    np.maximum(distances, 0, out=distances)
    return distances


def _seeds(x: np.ndarray, k: int, norms: np.ndarray,
           random: np.random.RandomState) -> np.ndarray:
    """Greedy k-means++ seeding: each centre the best of 2 + log k candidates drawn in
    proportion to their squared distance from the centres chosen so far."""
    n = len(x)
    weights = np.ones(n)
    trials = 2 + int(np.log(k))
    centres = np.empty((k, x.shape[1]))
    first = random.choice(n, p=weights / weights.sum())
    centres[0] = x[first]
    closest = _distances(x, norms, x[first][None, :])
    potential = closest @ weights
    for c in range(1, k):
        draws = random.uniform(size=trials) * potential
        candidates = np.searchsorted(np.cumsum(weights * closest), draws)
        np.clip(candidates, None, closest.size - 1, out=candidates)
        distances = _distances(x, norms, x[candidates])
        np.minimum(closest, distances, out=distances)
        potentials = distances @ weights.reshape(-1, 1)
        best = int(np.argmin(potentials))
        potential, closest = potentials[best], distances[best]
        centres[c] = x[candidates[best]]
    return centres


def _nearest(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return ((centres * centres).sum(axis=1)[None, :] - 2.0 * (x @ centres.T)).argmin(axis=1)


def _lloyd(x: np.ndarray, centres: np.ndarray,
           tol: float) -> tuple[np.ndarray, float, np.ndarray] | None:
    """(labels, inertia, centres) of Lloyd's iterations from `centres`; None when a cluster
    empties."""
    k = len(centres)
    previous = np.full(len(x), -1)
    converged = False
    for _ in range(MAX_ITERATIONS):
        labels = _nearest(x, centres)
        counts = np.bincount(labels, minlength=k).astype(np.float64)
        if not counts.all():
            return None
        # sequential sums per cluster, then one multiplication by the reciprocal of its count
        moved: np.ndarray = np.stack(
            [np.bincount(labels, weights=column, minlength=k) for column in x.T], axis=1)
        moved *= (1.0 / counts)[:, None]
        # each centre's shift as a distance, squared again and summed, as scikit-learn does
        shift = float((np.sqrt(((moved - centres) ** 2).sum(axis=1)) ** 2).sum())
        centres = moved
        if np.array_equal(labels, previous):
            converged = True
            break
        if shift <= tol:
            break
        previous = labels
    if not converged:
        labels = _nearest(x, centres)
    # summed in row order, as scikit-learn's one-thread loop does
    inertia = float(np.cumsum(((x - centres[labels]) ** 2).sum(axis=1))[-1])
    return labels, inertia, centres


def _same_clustering(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two labelings are one partition up to renaming the clusters."""
    mapping: dict[int, int] = {}
    return all(mapping.setdefault(a, b) == b for a, b in zip(first.tolist(), second.tolist(),
                                                              strict=True))


__all__ = ["MAX_ITERATIONS", "TOLERANCE", "kmeans_plusplus_fit"]
