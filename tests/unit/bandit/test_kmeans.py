"""The numpy k-means++ fit against scikit-learn's: the same labels and centroids, bit for bit,
and scikit-learn's own fit where a restart empties a cluster."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from bandit_builders import entry
from sklearn.cluster import KMeans

import kernelband.bandit.clustering as clustering
from kernelband.bandit import make_policy
from kernelband.bandit.kmeans import kmeans_plusplus_fit
from kernelband.bandit.threads import one_thread


def z_scored(rng: np.random.Generator, rows: int, columns: int, duplicates: bool,
             rounded: bool) -> np.ndarray:
    """Features as a frontier's: columns of different scales, z-scored; optionally half the
    rows one repeated point, or values rounded (many ties)."""
    x = rng.normal(size=(rows, columns)) * rng.uniform(0.1, 10.0, size=columns)
    if duplicates:
        x[: rows // 2] = x[0]
    if rounded:
        x = np.round(x, 1)
    std = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(std == 0, 1.0, std)


def _sklearn(z: np.ndarray, k: int, n_init: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    model = KMeans(n_clusters=k, init="k-means++", n_init=n_init, random_state=seed)
    with warnings.catch_warnings(), one_thread():
        warnings.simplefilter("ignore")
        labels = model.fit_predict(z)
    return labels, model.cluster_centers_


@pytest.mark.parametrize("case", range(60))
def test_the_fit_is_scikit_learns_bit_for_bit(case: int) -> None:
    rng = np.random.default_rng(case)
    z = z_scored(rng, rows=int(rng.integers(6, 300)), columns=int(rng.integers(1, 7)),
                 duplicates=case % 4 == 0, rounded=case % 5 == 0)
    k, n_init, seed = int(rng.integers(2, 5)), int(rng.integers(1, 4)), int(rng.integers(2**31))
    fitted = kmeans_plusplus_fit(z, k, n_init, seed)
    assert fitted is not None
    labels, centroids = _sklearn(z, k, n_init, seed)
    assert fitted[0].tolist() == labels.tolist()
    assert np.array_equal(fitted[1], centroids)


def test_large_frontiers_are_fitted_by_scikit_learn_with_the_same_result(
        monkeypatch: pytest.MonkeyPatch) -> None:
    z = z_scored(np.random.default_rng(11), rows=clustering.NUMPY_FIT_BELOW, columns=5,
                 duplicates=False, rounded=False)
    numpy_fit = kmeans_plusplus_fit(z, 3, 3, 17)
    assert numpy_fit is not None
    monkeypatch.setattr(clustering, "kmeans_plusplus_fit", lambda *args: None)
    labels, centroids = clustering.fresh_fit(z, 3, 3, 17)
    assert labels.tolist() == numpy_fit[0].tolist() and np.array_equal(centroids, numpy_fit[1])


def test_a_restart_that_empties_a_cluster_is_fitted_by_scikit_learn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    policy = make_policy("kernelband")
    state = policy.init_state(entry("k0", 5.0, phi=(0.0, 1.0)), 3)
    for i in range(1, 40):
        state.frontier.append(entry(f"k{i}", 5.0, phi=tuple(float(v) for v in rng.normal(size=2))))
        state.labels.append(0)
    expected = state.copy()
    clustering.recluster(expected, 3, 3, np.random.default_rng(9))
    monkeypatch.setattr(clustering, "kmeans_plusplus_fit", lambda *args: None)
    clustering.recluster(state, 3, 3, np.random.default_rng(9))
    assert state.labels == expected.labels and state.centroids == expected.centroids
