"""The frontier index is checked against a state in constant time when the state's lists are the
ones it describes or copies made from them, and item by item otherwise: never read stale."""

from __future__ import annotations

import numpy as np
import pytest
from bandit_builders import entry, random_child

from kernelband.bandit import FrontierEntry, PolicyState, frontier_index, make_policy
from kernelband.bandit.arms import cluster_members, representative
from kernelband.bandit.frontier_index import cluster_index, in_frontier
from kernelband.bandit.state import GROWTH_DEPTH

K = 3


def grown_state(size: int, seed: int) -> PolicyState:
    """A clustered kernelband state of `size` entries, grown by the policy's own pulls."""
    policy = make_policy("kernelband", {"k": K})
    rng = np.random.default_rng(seed)
    state = policy.init_state(entry("k0", 5.0), seed)
    while len(state.frontier) < size:
        decision, state = policy.select(state)
        parent = state.entry(decision.parent_id).time_ms
        child = random_child(rng, parent, len(state.frontier) * 10 + int(rng.integers(10)))
        if child is not None and in_frontier(state, child.kernel_id):
            child = None
        _, state = policy.update(state, decision.decision_id, child)
    return state


def no_item_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every item-by-item check fail the test; returns the list of their sizes seen."""
    seen: list[int] = []

    def refuse(current: list[object], items: list[object]) -> bool:
        seen.append(len(items))
        raise AssertionError(f"compared {len(items)} items one by one")

    monkeypatch.setattr(frontier_index, "_same_items", refuse)
    return seen


def test_pulls_on_a_grown_frontier_check_the_index_without_comparing_entries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = grown_state(120, 1)
    # no re-clustering in what follows: it gives the labels a new list, compared once
    policy = make_policy("kernelband", {"k": K, "tau": 10_000})
    plain, plain_state = make_policy("kernelband", {"k": K, "tau": 10_000}), state.copy()
    cluster_index(state, K)
    no_item_checks(monkeypatch)
    rng, joined = np.random.default_rng(5), 0
    for round_ in range(40):
        decision, state = policy.select(state)
        second, state = policy.select(state)  # two in flight, applied in one go
        for pending in (decision, second):
            child = random_child(rng, 1.0, 10_000 + 2 * round_ + (pending is second))
            _, state = policy.update(state, pending.decision_id, child)
            joined += child is not None
    assert joined > 10 and len(state.frontier) == 120 + joined
    monkeypatch.undo()
    # the same pulls decided on an index rebuilt from the lists each time: the same decisions
    rng = np.random.default_rng(5)
    for round_ in range(40):
        plain_state.derived = plain_state.growth = None
        decision, plain_state = plain.select(plain_state)
        plain_state.derived = plain_state.growth = None
        second, plain_state = plain.select(plain_state)
        for pending in (decision, second):
            child = random_child(rng, 1.0, 10_000 + 2 * round_ + (pending is second))
            plain_state.derived = plain_state.growth = None
            _, plain_state = plain.update(plain_state, pending.decision_id, child)
    assert plain_state == state


def test_a_frontier_of_unknown_origin_is_compared_and_a_changed_one_rebuilds_the_index(
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = grown_state(80, 2)
    index = cluster_index(state, K)
    changed = PolicyState(**{**state.__dict__, "growth": None})
    changed.frontier = [*state.frontier[:-1], FrontierEntry("other", 0.1, state.frontier[-1].phi,
                                                            (1.0, 1.0, 1.0))]
    seen: list[int] = []
    real = frontier_index._same_items

    def counted(current: list[object], items: list[object]) -> bool:
        seen.append(len(items))
        return real(current, items)

    monkeypatch.setattr(frontier_index, "_same_items", counted)
    rebuilt = cluster_index(changed, K)
    assert seen and rebuilt is not index and rebuilt.frontier.entries == changed.frontier
    assert rebuilt.reps == [representative(changed, m) if m else None
                            for m in cluster_members(changed, K)]
    assert in_frontier(changed, "other") and not in_frontier(state, "other")
    # a state whose growth names other lists than its own is compared, not trusted
    stale = state.successor()
    stale.frontier = list(changed.frontier)
    seen.clear()
    assert cluster_index(stale, K).frontier.entries == changed.frontier and seen


def test_entries_appended_in_place_extend_the_index_they_grew_from() -> None:
    state = grown_state(60, 3)
    before = cluster_index(state, K)
    state.frontier.append(FrontierEntry("fast", 0.01, state.frontier[0].phi, (10.0, 10.0, 10.0)))
    state.labels.append(1)
    after = cluster_index(state, K)
    assert after is not before and after.reps[1] == len(state.frontier) - 1
    assert in_frontier(state, "fast")


def test_a_copy_keeps_a_bounded_record_of_the_lists_it_came_from() -> None:
    state = grown_state(40, 4)
    for _ in range(3 * GROWTH_DEPTH):
        state = state.copy()
        assert state.growth is not None and state.growth.depth <= GROWTH_DEPTH
        assert state.growth.frontier is state.frontier and state.growth.labels is state.labels
