"""The frontier index: same answers as the plain loops, reused only while it describes the state."""

from __future__ import annotations

import numpy as np
import pytest
from bandit_builders import entry

from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.arms import cluster_members, open_arms, representative, sample_parent
from kernelband.bandit.frontier_index import (
    FrontierArrays,
    cluster_index,
    draw,
    entry_of,
    fastest,
    frontier_arrays,
    in_frontier,
    open_mask,
    sample_parent_indexed,
)

THETA = np.array([80.0, 70.0, 75.0])


def clustered_state(size: int, seed: int) -> PolicyState:
    """A kernelband state with `size` entries in 3 clusters: tied times, some without h."""
    rng = np.random.default_rng(seed)
    state = make_policy("kernelband").init_state(entry("k0", 5.0), seed)
    for i in range(1, size):
        h = None if rng.random() < 0.25 else tuple(float(v) for v in rng.integers(0, 100, 3))
        state.frontier.append(entry(f"k{i}", float(rng.integers(1, 6)), h=h))  # type: ignore[arg-type]
        state.labels.append(int(rng.integers(0, 3)))
    return state


@pytest.mark.parametrize("seed", range(5))
def test_index_answers_as_the_plain_loops(seed: int) -> None:
    state = clustered_state(200, seed)
    members = cluster_members(state, 3)
    index = cluster_index(state, 3)
    assert [m.tolist() for m in index.members] == members
    assert index.reps == [representative(state, m) if m else None for m in members]
    assert (open_mask(index, THETA) == open_arms(state, members, THETA)).all()
    signed = {f"k{i}" for i in range(0, 200, 7)}
    for cluster in range(3):
        assert fastest(index, cluster) == min(members[cluster], key=lambda i: state.frontier[i].time_ms)
        for dim in range(3):
            for scope in (None, signed):
                a, b = np.random.default_rng(seed), np.random.default_rng(seed)
                plain = [sample_parent(state, members[cluster], dim, 70.0, 0.5, a, scope)
                         for _ in range(5)]
                indexed = [sample_parent_indexed(index, cluster, dim, 70.0, 0.5, b, scope)
                           for _ in range(5)]
                assert plain == indexed


def test_index_is_reused_while_frontier_and_labels_are_unchanged() -> None:
    policy = make_policy("kernelband")
    state = clustered_state(50, 1)
    _, first = policy.select(state)
    _, second = policy.select(first)
    assert first.derived is not None and second.derived is first.derived
    assert state.derived is None, "select must not change its input state"


def test_appended_entry_extends_the_arrays_and_can_become_representative() -> None:
    state = clustered_state(50, 2)
    before = cluster_index(state, 3)
    state.frontier.append(FrontierEntry("fast", 0.5, (1.0, 2.0), (10.0, 10.0, 10.0)))
    state.labels.append(1)
    after = cluster_index(state, 3)
    assert after is not before and len(after.frontier.time_ms) == 51
    assert after.reps[1] == 50 and after.members[1][-1] == 50
    assert len(before.frontier.time_ms) == 50, "an index in use by another copy is not changed"


def test_relabelled_frontier_rebuilds_the_clusters() -> None:
    state = clustered_state(50, 3)
    cluster_index(state, 3)
    state.labels = [0] * 50  # as a re-clustering assigns a new list
    index = cluster_index(state, 3)
    assert index.members[0].tolist() == list(range(50))
    assert not len(index.members[1]) and not open_mask(index, THETA)[1:].any()


def test_an_index_of_another_frontier_is_never_read() -> None:
    state = clustered_state(50, 4)
    other = clustered_state(50, 5)
    other.derived = cluster_index(state, 3)  # same length and labels would not be enough
    other.labels = list(state.labels)
    index = cluster_index(other, 3)
    assert index.frontier.entries == other.frontier
    assert index.reps == [representative(other, m) if m else None
                          for m in cluster_members(other, 3)]


def test_phi_rows_and_ids_extend_with_the_frontier_until_a_length_differs() -> None:
    state = clustered_state(20, 3)
    first = frontier_arrays(state.frontier[:12])
    grown = frontier_arrays(state.frontier, first)
    assert grown.phi is not None and np.array_equal(grown.phi, [e.phi for e in state.frontier])
    assert grown.ids == {e.kernel_id: i for i, e in enumerate(state.frontier)}
    assert in_frontier(state, "k19") and not in_frontier(state, "k20")
    mixed = frontier_arrays([*state.frontier, FrontierEntry("short", 1.0, (1.0,))], grown)
    assert mixed.phi is None
    assert frontier_arrays([*mixed.entries, state.frontier[0]], mixed).phi is None


def test_membership_and_entries_read_the_index_and_the_entries_appended_since() -> None:
    state = clustered_state(30, 6)
    cluster_index(state, 3)  # describes k0..k29
    state.frontier.append(entry("late", 2.0))
    assert in_frontier(state, "k0") and in_frontier(state, "late") and not in_frontier(state, "x")
    assert entry_of(state, "k7") is state.frontier[7]
    assert entry_of(state, "late") is state.frontier[-1]
    stale = clustered_state(30, 7)  # an index of another frontier answers nothing
    stale.derived = state.derived
    assert not in_frontier(stale, "late") and in_frontier(stale, "k29")
    assert entry_of(stale, "k3") is stale.frontier[3]


@pytest.mark.parametrize("size", [1, 2, 7, 300, 1000])
def test_a_draw_against_kept_weights_is_numpys_choice(size: int) -> None:
    weights = np.random.default_rng(size).random(size) ** 3  # uneven, some near zero
    p = weights / weights.sum()
    cdf = p.cumsum()
    cdf /= cdf[-1]
    ours, numpys = np.random.default_rng(11), np.random.default_rng(11)
    assert [draw(cdf, ours) for _ in range(3000)] == [
        int(numpys.choice(size, p=p)) for _ in range(3000)]
    assert ours.bit_generator.state == numpys.bit_generator.state


def _rebuilt(state: PolicyState) -> PolicyState:
    """The same frontier and labels with no index: `cluster_index` builds it from scratch."""
    return PolicyState(**{**state.__dict__, "derived": None})


@pytest.mark.parametrize("seed", range(6))
def test_entries_appended_with_their_labels_extend_the_index_as_a_rebuild_would(seed: int) -> None:
    rng = np.random.default_rng(seed)
    state = clustered_state(60, seed)
    kept = cluster_index(state, 3)
    for cluster in range(3):  # weights kept for every cluster before the extension
        sample_parent_indexed(kept, cluster, 0, 70.0, 0.5, np.random.default_rng(0))
    for round_ in range(12):
        for i in range(int(rng.integers(1, 3))):  # a child or two joined, each placed
            h = None if rng.random() < 0.3 else tuple(float(v) for v in rng.integers(0, 100, 3))
            state.frontier = [*state.frontier, entry(f"n{round_}-{i}", float(rng.integers(1, 6)),
                                                       h=h)]  # type: ignore[arg-type]
            state.labels = [*state.labels, int(rng.integers(0, 3))]
        index, fresh = cluster_index(state, 3), cluster_index(_rebuilt(state), 3)
        assert [m.tolist() for m in index.members] == [m.tolist() for m in fresh.members]
        assert index.reps == fresh.reps
        assert (open_mask(index, THETA) == open_mask(fresh, THETA)).all()
        for cluster in range(3):
            for dim in range(3):
                a, b = np.random.default_rng(round_), np.random.default_rng(round_)
                assert ([sample_parent_indexed(index, cluster, dim, 70.0, 0.5, a) for _ in range(4)]
                        == [sample_parent_indexed(fresh, cluster, dim, 70.0, 0.5, b)
                            for _ in range(4)])
    assert len(kept.members[0]) + len(kept.members[1]) + len(kept.members[2]) == 60, \
        "an index in use by another copy is not changed"


def test_a_changed_earlier_label_rebuilds_rather_than_extends() -> None:
    state = clustered_state(40, 8)
    cluster_index(state, 3)
    state.frontier = [*state.frontier, entry("new", 1.0)]
    state.labels = [(state.labels[0] + 1) % 3, *state.labels[1:], 2]
    index = cluster_index(state, 3)
    assert [m.tolist() for m in index.members] == cluster_members(state, 3)


def _same_arrays(grown: FrontierArrays, fresh: FrontierArrays) -> bool:
    return (grown.entries == fresh.entries and np.array_equal(grown.time_ms, fresh.time_ms)
            and np.array_equal(grown.h, fresh.h, equal_nan=True)
            and np.array_equal(grown.has_h, fresh.has_h)
            and (grown.phi is None) == (fresh.phi is None)
            and (grown.phi is None or np.array_equal(grown.phi, fresh.phi))
            and all(grown.position(e.kernel_id) == fresh.position(e.kernel_id)
                    for e in [*fresh.entries, entry("absent", 1.0)]))


def test_frontiers_that_part_after_a_shared_prefix_each_read_their_own_rows() -> None:
    state = clustered_state(40, 9)
    base = frontier_arrays(state.frontier)
    one = [*state.frontier, entry("a", 1.0), entry("k3", 2.0)]  # an id seen before: first kept
    two = [*state.frontier, entry("b", 1.5, h=None), FrontierEntry("short", 3.0, (1.0,))]
    first = frontier_arrays(one, base)  # written after the prefix, in place
    second = frontier_arrays(two, base)  # the rows after the prefix are taken: its own copy
    again = frontier_arrays(one, base)  # the rows written for `one` are read, not rewritten
    assert first.rows is base.rows and second.rows is not base.rows and again.rows is base.rows
    for grown, entries in ((first, one), (second, two), (again, one), (base, state.frontier)):
        assert _same_arrays(grown, frontier_arrays(list(entries)))
    assert base.position("a") is None and first.position("a") == 40
    assert first.nan_free() and second.nan_free() and second.phi is None
    longer = frontier_arrays([*one, *(entry(f"x{i}", 2.0) for i in range(500))], first)
    assert _same_arrays(longer, frontier_arrays(longer.entries))  # the buffers grew
    assert _same_arrays(first, frontier_arrays(one)), "arrays handed out before stay as they were"


def test_a_selection_shares_the_frontier_and_an_update_leaves_its_input_as_it_was() -> None:
    policy = make_policy("kernelband")
    state = clustered_state(50, 10)
    frontier, labels = list(state.frontier), list(state.labels)
    decision, selected = policy.select(state)
    assert selected.frontier is state.frontier and selected.labels is state.labels
    _, updated = policy.update(selected, decision.decision_id, entry("child", 1.0))
    assert state.frontier == frontier and state.labels == labels
    assert selected.frontier == frontier and len(updated.frontier) == 51
    assert updated.frontier is not selected.frontier and updated.labels is not selected.labels


def test_a_long_run_decides_as_one_that_rebuilds_its_index_before_every_call() -> None:
    """Two pulls in flight at a time over 200 pulls from a 150-entry frontier (warm and fresh
    re-clusterings, entries placed between them): the index kept and extended in place gives
    the same decisions and states as one dropped before every select and update."""
    from bandit_builders import random_child

    policy = make_policy("kernelband")
    start = clustered_state(150, 11)
    runs = []
    for rebuild in (False, True):
        state, rng, decisions = start.copy(), np.random.default_rng(5), []
        for step in range(100):
            picked = []
            for _ in range(2):
                state = _rebuilt(state) if rebuild else state
                decision, state = policy.select(state)
                picked.append(decision)
            for number, decision in enumerate(picked):
                state = _rebuilt(state) if rebuild else state
                child = random_child(rng, state.entry(decision.parent_id).time_ms,
                                     1000 + 2 * step + number)
                _, state = policy.update(state, decision.decision_id, child)
            decisions += picked
        runs.append((decisions, state.to_dict()))
    assert runs[0] == runs[1]
    assert len(runs[0][1]["frontier"]) > 200
