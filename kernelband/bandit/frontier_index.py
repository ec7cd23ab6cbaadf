"""Arrays derived from a policy state's frontier and cluster labels, kept between pulls.

Selecting a pull reads the whole frontier (cluster members, each cluster's representative,
every member's headroom); at 1,000s of entries a Python loop over the entries on every pull
was most of a selection. The index holds those values as arrays and travels with the state
(`PolicyState.derived`, shared by its copies). Before use it is checked against the state's
own lists (a pointer walk when they hold the same objects), so a stale index is never read:
a frontier that grew at its end extends the arrays by its new entries only; changed labels
(a new entry placed, a re-clustering) rebuild the per-cluster part; anything else rebuilds all.
The arrays reproduce the plain loops exactly (same members in the same order, first index on
ties), so decisions are identical with or without the index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernelband.bandit.arms import open_row
from kernelband.bandit.frontier_rows import FrontierRows
from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import STRATEGY_NAMES
from kernelband.bandit.types import FrontierEntry


@dataclass(frozen=True)
class FrontierArrays:
    """time_ms, h (NaN rows where unknown), whether h is known, and phi, per frontier entry."""

    entries: list[FrontierEntry]  # the frontier these arrays describe, in order
    time_ms: np.ndarray
    h: np.ndarray
    has_h: np.ndarray
    # phi of every entry while all have one of the same length; None otherwise (the clustering
    # then falls back to log1p(time), `clustering.feature_matrix`)
    phi: np.ndarray | None = None
    # kernel id -> first frontier index; shared with the longer arrays of the same growing
    # frontier, so it may hold ids past these entries: read through `position`
    ids: dict[str, int] = field(default_factory=dict)
    rows: FrontierRows | None = field(default=None, repr=False)  # the buffers viewed

    def positions(self, kernel_ids: set[str]) -> list[int]:
        """Frontier indices of those of `kernel_ids` that are in the frontier."""
        return [i for i, e in enumerate(self.entries) if e.kernel_id in kernel_ids]

    def position(self, kernel_id: str) -> int | None:
        """The first frontier index of `kernel_id`, or None when it is not in the frontier."""
        at = self.ids.get(kernel_id)
        return at if at is not None and at < len(self.entries) else None

    def nan_free(self) -> bool:
        """Whether no entry's time is NaN."""
        if self.rows is not None:
            return self.rows.nan_free(len(self.entries))
        return not np.isnan(self.time_ms).any()


@dataclass
class ClusterIndex:
    """Members and representative of each cluster 0..k-1 for one frontier and one labelling."""

    frontier: FrontierArrays
    labels: list[int]
    members: list[np.ndarray]  # frontier indices, ascending
    reps: list[int | None]  # fastest member with a signature (first on ties), None if none
    softmax: dict[tuple[int, int, float, float], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict)  # (cluster, dim, theta, temperature) -> (scored, cdf), scope "all"
    masks: dict[bytes, np.ndarray] = field(default_factory=dict)  # theta -> `open_mask`


def frontier_arrays(entries: list[FrontierEntry],
                    previous: FrontierArrays | None = None) -> FrontierArrays:
    """Arrays of `entries`, extending `previous` when it describes a prefix of them: the rows
    of the new entries are written after those of the prefix (`FrontierRows`), not copied."""
    start = 0
    if previous is not None:
        done = len(previous.entries)
        if done <= len(entries) and entries[:done] == previous.entries:
            if done == len(entries):
                return previous
            start = done
    rows = previous.rows if start and previous is not None else None
    new = entries[start:]
    if rows is None:
        rows = FrontierRows.of(entries)
    elif rows.holds(start, new):
        pass  # written before for a state of the same frontier (a copy, or a re-clustering)
    elif rows.filled == start:
        rows.append(new)
    else:  # the buffers went on with other entries after this prefix
        rows = rows.copy_prefix(start, len(new))
        rows.append(new)
    size = len(entries)
    return FrontierArrays(list(entries), rows.time_ms[:size], rows.h[:size],
                          rows.has_h[:size], rows.phi_of(size), rows.ids, rows)


def in_frontier(state: PolicyState, kernel_id: str) -> bool:
    """Whether a frontier entry has this kernel id: once the state is indexed, a dict lookup
    for the entries the index describes (when they are still the frontier's first ones) and
    a scan of those appended since (no arrays are built for them: an update asks this before
    each child joins, and the next selection's `cluster_index` extends the index anyway)."""
    if isinstance(state.derived, ClusterIndex):
        indexed = state.derived.frontier
        done = len(indexed.entries)
        if done <= len(state.frontier) and state.frontier[:done] == indexed.entries:
            return indexed.position(kernel_id) is not None or any(
                entry.kernel_id == kernel_id for entry in state.frontier[done:])
    return any(entry.kernel_id == kernel_id for entry in state.frontier)


def entry_of(state: PolicyState, kernel_id: str) -> FrontierEntry:
    """`state.entry(kernel_id)`: through the index's id map when the state has an index whose
    entry at that position is the state's own (the frontier only appends, so the first index
    of an id in a prefix is its first in the whole frontier); else the plain scan."""
    index = state.derived if isinstance(state.derived, ClusterIndex) else None
    if index is not None:
        position = index.frontier.position(kernel_id)
        if (position is not None and position < len(state.frontier)
                and state.frontier[position] is index.frontier.entries[position]):
            return state.frontier[position]
    return state.entry(kernel_id)


def frontier_arrays_of(state: PolicyState) -> FrontierArrays:
    """The arrays of the state's frontier, extending those of its index when it has one (the
    index itself is left as it is; `cluster_index` extends it again, by the new entries only)."""
    cached = state.derived.frontier if isinstance(state.derived, ClusterIndex) else None
    return frontier_arrays(state.frontier, cached)


def label_array(labels: list[int]) -> np.ndarray:
    """Labels as an array; through bytes (decoded in C) while every label is 0-255."""
    try:
        return np.frombuffer(bytes(labels), dtype=np.uint8)
    except ValueError:
        return np.asarray(labels, dtype=np.int64)


def cluster_index(state: PolicyState, k: int) -> ClusterIndex:
    """The state's index of clusters 0..k-1, reused or rebuilt as the state requires."""
    cached = state.derived if isinstance(state.derived, ClusterIndex) else None
    if cached is not None and cached.labels == state.labels and len(cached.members) == k:
        arrays = frontier_arrays(state.frontier, cached.frontier)
        if arrays is cached.frontier:
            return cached
    else:
        arrays = frontier_arrays(state.frontier, None if cached is None else cached.frontier)
        extended = _extended(cached, arrays, state.labels, k) if cached is not None else None
        if extended is not None:
            state.derived = extended
            return extended
    labels = label_array(state.labels)
    members = [np.flatnonzero(labels == cluster) for cluster in range(k)]
    index = ClusterIndex(arrays, list(state.labels), members,
                         [_representative(arrays, m) for m in members])
    state.derived = index
    return index


def _extended(cached: ClusterIndex, arrays: FrontierArrays, labels: list[int],
              k: int) -> ClusterIndex | None:
    """`cached` extended by the entries appended to its frontier, each placed in its cluster
    with the labels of the earlier ones unchanged (a child joined: the pull after an update);
    None when that is not the case. A scheduler selects right after an update nearly every
    time, and rebuilding every cluster's members, representative and weights read the whole
    frontier again. The same members, representatives and (for the clusters left unchanged)
    kept weights as a rebuild: members stay ascending, and a new entry becomes representative
    only when strictly faster (the first on ties), as `_representative`'s argmin does."""
    done = len(cached.labels)
    if (len(cached.members) != k or len(cached.frontier.entries) != done
            or len(arrays.entries) != len(labels) or len(labels) <= done
            or labels[:done] != cached.labels or arrays.entries[:done] != cached.frontier.entries
            or not arrays.nan_free()):
        return None
    added: dict[int, list[int]] = {}
    for position in range(done, len(labels)):
        added.setdefault(labels[position], []).append(position)
    members, reps = list(cached.members), list(cached.reps)
    for cluster, positions in added.items():
        if not 0 <= cluster < k:
            continue  # as a rebuild: a label outside 0..k-1 is in no cluster
        members[cluster] = np.concatenate([members[cluster],
                                           np.array(positions, dtype=members[cluster].dtype)])
        rep = reps[cluster]
        for position in positions:
            if arrays.has_h[position] and (rep is None
                                           or arrays.time_ms[position] < arrays.time_ms[rep]):
                rep = position
        reps[cluster] = rep
    changed = {cluster for cluster in added if 0 <= cluster < k}
    index = ClusterIndex(arrays, list(labels), members, reps)
    index.softmax.update((key, value) for key, value in cached.softmax.items()
                         if key[0] not in changed)
    if reps == cached.reps and all(len(cached.members[c]) for c in changed):
        index.masks.update(cached.masks)  # a mask reads only each cluster's representative
    return index


def _representative(arrays: FrontierArrays, members: np.ndarray) -> int | None:
    """The fastest member with a signature (the first on ties), or None."""
    signed = members[arrays.has_h[members]]
    return int(signed[np.argmin(arrays.time_ms[signed])]) if len(signed) else None


def open_mask(index: ClusterIndex, theta: np.ndarray) -> np.ndarray:
    """`arms.open_arms` of the indexed clusters (a copy: callers may change it)."""
    key = theta.tobytes()
    if key not in index.masks:
        mask = np.zeros((len(index.members), len(STRATEGY_NAMES)), dtype=bool)
        for cluster, (members, rep) in enumerate(zip(index.members, index.reps, strict=True)):
            if len(members):  # empty clusters are closed
                mask[cluster] = open_row(None if rep is None else index.frontier.entries[rep].h,
                                         theta)
        index.masks[key] = mask
    return index.masks[key].copy()


def fastest(index: ClusterIndex, cluster: int) -> int:
    """The fastest member of a cluster (the first on ties)."""
    members = index.members[cluster]
    return int(members[np.argmin(index.frontier.time_ms[members])])


def sample_parent_indexed(index: ClusterIndex, cluster: int, dim: int, theta: float,
                          temperature: float, rng: np.random.Generator,
                          signed: set[str] | None = None) -> int:
    """`arms.sample_parent` on the index: same candidates, same weights, same draw."""
    arrays, members = index.frontier, index.members[cluster]
    if signed is None:
        key = (cluster, dim, theta, temperature)
        if key not in index.softmax:
            scored = members[arrays.has_h[members]]
            index.softmax[key] = (scored, _cdf(_softmax(theta - arrays.h[scored, dim],
                                                        temperature)) if len(scored) else scored)
        scored, cdf = index.softmax[key]
        if not len(scored):
            return fastest(index, cluster)
    else:
        chosen = np.zeros(len(arrays.entries), dtype=bool)
        chosen[arrays.positions(signed)] = True
        if not chosen[members].any():
            return fastest(index, cluster)
        scored = members
        counted = chosen[members] & arrays.has_h[members]
        logits = np.where(counted, theta - np.nan_to_num(arrays.h[members, dim]), 0.0)
        cdf = _cdf(_softmax(logits, temperature))
    return int(scored[draw(cdf, rng)])


def _cdf(p: np.ndarray) -> np.ndarray:
    """The cumulative weights `Generator.choice` draws against, normalised as it does."""
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return cdf


def draw(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """`rng.choice(len(cdf), p=p)` for `cdf = _cdf(p)`: the same one uniform draw and the same
    search numpy's choice makes, without re-checking and re-summing p on every pull (a cluster's
    weights are kept in the index between pulls)."""
    return int(cdf.searchsorted(rng.random(), side="right"))


def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    """exp((logits - max) / temperature), normalised: the exact operations of `sample_parent`."""
    logits = np.ascontiguousarray(logits, dtype=float)
    weights = np.exp((logits - logits.max()) / temperature)
    return weights / weights.sum()


__all__ = ["ClusterIndex", "FrontierArrays", "cluster_index", "draw", "entry_of", "fastest", "frontier_arrays",
           "frontier_arrays_of", "in_frontier", "label_array", "open_mask", "sample_parent_indexed"]
