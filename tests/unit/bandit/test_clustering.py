"""Re-clustering: fresh k-means++ fits at powers of two, Lloyd's iterations from the last
centroids in between, with the same partition on separable groups and a flat cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from bandit_builders import entry

import kernelband.bandit.clustering as clustering
from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.clustering import WARM_FROM, lloyd, recluster


def grouped_state(size: int, seed: int) -> PolicyState:
    """A kernelband state of `size` entries in three separated behaviour groups."""
    rng = np.random.default_rng(seed)
    state = make_policy("kernelband").init_state(entry("k0", 5.0, phi=(0.0, 0.0, 0.0)), seed)
    for i in range(1, size):
        state.frontier.append(entry(f"k{i}", 5.0, phi=_phi(i, rng)))
        state.labels.append(0)
    return state


def _phi(i: int, rng: np.random.Generator) -> tuple[float, ...]:
    group = i % 3
    noise = rng.normal(scale=0.3, size=2)
    return (group * 10.0 + float(noise[0]), group * 5.0 + float(noise[1]), 0.0)


def _fresh_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the fresh (k-means++) fits of every later `recluster`."""
    fits: list[int] = []
    original = clustering.fresh_fit

    def counting(*args: Any) -> tuple[np.ndarray, np.ndarray] | None:
        fits.append(1)
        return original(*args)

    monkeypatch.setattr(clustering, "fresh_fit", counting)
    return fits


def test_between_powers_of_two_clusters_continue_from_the_last_centroids(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    state = grouped_state(140, 0)
    recluster(state, 3, 3, rng)
    fits = _fresh_fits(monkeypatch)
    for i in range(140, 255):  # 141 .. 255 entries: within one power of two (128 .. 255)
        state.frontier.append(entry(f"k{i}", 5.0, phi=_phi(i, rng)))
        state.labels.append(0)
        state.since_recluster += 1
        if state.since_recluster >= 8:
            recluster(state, 3, 3, rng)
    assert fits == [], "no fresh fit until the frontier reaches 256"
    state.frontier.append(entry("k255", 5.0, phi=_phi(255, rng)))
    state.labels.append(0)
    state.since_recluster += 1
    recluster(state, 3, 3, rng)
    assert fits == [1], "a fresh fit once the size reached the next power of two"
    groups = {i % 3: {label for j, label in enumerate(state.labels) if j and j % 3 == i % 3}
              for i in range(3)}
    assert all(len(labels) == 1 for labels in groups.values())
    assert len({next(iter(v)) for v in groups.values()}) == 3


def test_small_frontiers_are_always_fitted_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    state = grouped_state(100, 2)
    recluster(state, 3, 3, rng)
    fits = _fresh_fits(monkeypatch)
    state.since_recluster = 10  # 90 -> 100 entries: no power of two crossed
    recluster(state, 3, 3, rng)
    assert fits == [1] and WARM_FROM > 100


def test_warm_clustering_keeps_the_partition_and_cluster_indices() -> None:
    rng = np.random.default_rng(1)
    state = grouped_state(300, 1)
    recluster(state, 3, 3, rng)
    fresh = list(state.labels)
    for i in range(300, 310):
        state.frontier.append(entry(f"k{i}", 5.0, phi=_phi(i, rng)))
        state.labels.append(0)
    state.since_recluster = 10
    recluster(state, 3, 3, rng)
    assert state.labels[:300] == fresh, "the old members keep their cluster index"
    assert [state.labels[i] for i in range(300, 310)] == [fresh[i % 3 + 3] for i in range(300, 310)]
    assert state.since_recluster == 0


def test_lloyd_stops_at_a_fixed_point_and_gives_up_on_an_empty_cluster() -> None:
    z = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    labels, centroids = lloyd(z, np.array([[0.05, 0.0], [5.05, 5.0]])) or (None, None)
    assert labels is not None and labels.tolist() == [0, 0, 1, 1]
    assert centroids is not None and np.allclose(centroids, [[0.05, 0.0], [5.05, 5.0]])
    assert lloyd(z, np.array([[0.0, 0.0], [100.0, 100.0], [5.0, 5.0]])) is None


def _assign_by_norms(state: PolicyState, child: FrontierEntry) -> int:
    """The nearest centroid as `np.linalg.norm` ranks them, one centroid at a time."""
    x = clustering.feature_matrix([child])[0]
    z = (x - np.array(state.z_mean)) / np.array(state.z_std)
    live = [(i, c) for i, c in enumerate(state.centroids) if c]
    return live[int(np.argmin([float(np.linalg.norm(np.array(c) - z)) for _, c in live]))][0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_new_entry_goes_to_the_centroid_the_norms_rank_nearest(seed: int) -> None:
    rng = np.random.default_rng(seed)
    state = grouped_state(300, seed)
    recluster(state, 3, 3, rng)
    state.centroids.insert(1, [])  # an emptied index is skipped, the others keep theirs
    for i in range(500):
        near = [state.frontier[int(rng.integers(len(state.frontier)))].phi, ()][i % 7 == 0]
        phi = tuple(float(v) for v in np.add(near or (0.0, 0.0, 0.0), rng.normal(size=3)))
        child = entry(f"c{i}", float(rng.uniform(0.5, 9.0)), phi=phi if near else ())
        expected = _assign_by_norms(state, child) if near else 0
        assert clustering.assign(state, child) == expected
