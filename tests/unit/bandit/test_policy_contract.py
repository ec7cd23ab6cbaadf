"""One contract, every registered policy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bandit_builders import entry, random_child

from kernelband.bandit import (
    POLICIES,
    STRATEGY_NAMES,
    Decision,
    PolicyState,
    PolicyStateError,
    make_policy,
)

pytestmark = pytest.mark.parametrize("name", sorted(POLICIES))


def run(name: str, state: PolicyState, steps: int, seed: int, start: int) -> tuple[list[Decision], PolicyState]:
    """Select/update `steps` times with simulated children; return decisions and final state."""
    policy = make_policy(name)
    rng = np.random.default_rng(seed)
    decisions = []
    for i in range(steps):
        decision, state = policy.select(state)
        child = random_child(rng, state.entry(decision.parent_id).time_ms, start + i)
        _, state = policy.update(state, decision.decision_id, child)
        decisions.append(decision)
    return decisions, state


def fresh(name: str, seed: int = 7) -> PolicyState:
    return make_policy(name).init_state(entry("k0", 10.0), seed)


def test_decisions_are_valid_and_recorded_as_pending(name: str) -> None:
    policy = make_policy(name)
    state = fresh(name)
    decision, after = policy.select(state)
    assert decision.strategy is None or decision.strategy in STRATEGY_NAMES
    assert decision.parent_id == "k0"
    assert decision.decision_id in after.pending
    assert not state.pending, "select must not mutate its input state"


def test_update_applies_reward_and_grows_frontier(name: str) -> None:
    policy = make_policy(name)
    decision, state = policy.select(fresh(name))
    r, after = policy.update(state, decision.decision_id, entry("k1", 8.0))
    assert r == pytest.approx(0.2)
    assert [e.kernel_id for e in after.frontier] == ["k0", "k1"]
    assert not after.pending and after.t == 1
    assert len(state.frontier) == 1, "update must not mutate its input state"


def test_select_and_update_leave_their_input_unchanged(name: str) -> None:
    """The scheduler hands policies its cached state itself (load_state(shared=True)); a
    policy that changed it would change every later read. Long enough to re-cluster."""
    policy = make_policy(name)
    rng = np.random.default_rng(3)
    state = fresh(name)
    for i in range(40):
        before = json.dumps(state.to_dict(), sort_keys=True)
        decision, selected = policy.select(state)
        assert json.dumps(state.to_dict(), sort_keys=True) == before
        before = json.dumps(selected.to_dict(), sort_keys=True)
        child = random_child(rng, selected.entry(decision.parent_id).time_ms, 100 + i)
        _, state = policy.update(selected, decision.decision_id, child if i % 5 else None)
        assert json.dumps(selected.to_dict(), sort_keys=True) == before
    assert state.n_clusters > 1 or name not in ("kernelband", "kernelband+prior")


def test_failed_and_slower_children_earn_nothing(name: str) -> None:
    policy = make_policy(name)
    d1, state = policy.select(fresh(name))
    d2, state = policy.select(state)
    r_fail, state = policy.update(state, d1.decision_id, None)
    r_slow, state = policy.update(state, d2.decision_id, entry("k2", 12.0))
    assert (r_fail, r_slow) == (0.0, 0.0)
    assert len(state.frontier) == 2  # a correct but slower child still joins


def test_each_result_is_applied_once(name: str) -> None:
    policy = make_policy(name)
    decision, state = policy.select(fresh(name))
    _, state = policy.update(state, decision.decision_id, None)
    with pytest.raises(PolicyStateError, match="not pending"):
        policy.update(state, decision.decision_id, None)


def test_duplicate_kernel_ids_are_refused(name: str) -> None:
    policy = make_policy(name)
    decision, state = policy.select(fresh(name))
    with pytest.raises(PolicyStateError, match="already in the frontier"):
        policy.update(state, decision.decision_id, entry("k0", 5.0))


def test_same_seed_same_decisions(name: str) -> None:
    first, _ = run(name, fresh(name, seed=3), 25, seed=11, start=1)
    second, _ = run(name, fresh(name, seed=3), 25, seed=11, start=1)
    assert first == second


def test_restore_mid_run_continues_identically(name: str) -> None:
    _, middle = run(name, fresh(name), 17, seed=5, start=1)
    restored = PolicyState.from_json(json.loads(json.dumps(middle.to_json())))
    assert restored.to_dict() == middle.to_dict()
    straight, end_a = run(name, middle, 15, seed=9, start=100)
    resumed, end_b = run(name, restored, 15, seed=9, start=100)
    assert straight == resumed
    assert end_a.to_json() == end_b.to_json()


def test_out_of_order_results(name: str) -> None:
    policy = make_policy(name)
    state = fresh(name)
    decisions = []
    for _ in range(4):
        decision, state = policy.select(state)
        decisions.append(decision)
    assert len({d.decision_id for d in decisions}) == 4
    for i, decision in enumerate(reversed(decisions)):
        _, state = policy.update(state, decision.decision_id, entry(f"c{i}", 9.0 - i))
    assert not state.pending and state.t == 4 and len(state.frontier) == 5


def test_state_of_another_policy_is_refused(name: str) -> None:
    other = next(n for n in POLICIES if n != name)
    with pytest.raises(PolicyStateError, match="belongs to policy"):
        make_policy(name).select(fresh(other))


def test_only_policies_that_read_h_ask_workers_to_measure_it(name: str) -> None:
    assert make_policy(name).reads_signature == (name in {"kernelband", "kernelband+prior", "hwucb"})
