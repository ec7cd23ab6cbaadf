"""hwucb: masked UCB over strategies, no clusters, fastest parent with a per-prompt repeat cap."""

from __future__ import annotations

import pytest
from bandit_builders import entry

from kernelband.bandit import (
    DEFAULT_POLICY,
    POLICIES,
    STRATEGY_NAMES,
    HwUcbConfig,
    PolicyConfigError,
    PolicyState,
    make_policy,
)


def test_saturated_dimension_is_never_attacked() -> None:
    policy = make_policy("hwucb")
    state = policy.init_state(entry("orig", 10.0, h=(95.0, 20.0, 20.0)), seed=1)  # SM at peak
    for _ in range(12):
        decision, state = policy.select(state)
        assert decision.strategy not in ("pipeline", "reordering")  # the SM strategies


def test_parent_moves_to_the_next_fastest_after_the_repeat_cap() -> None:
    policy = make_policy("hwucb", {"repeat_cap": 1})
    state = policy.init_state(entry("orig", 10.0), seed=2)
    decision, state = policy.select(state)
    _, state = policy.update(state, decision.decision_id, entry("fast", 5.0))
    state.prompts = {}  # forget that first prompt
    # pin every arm but tiling shut by making it look pulled many times with no reward
    state.arm_n = [[1.0] + [50.0] * (len(STRATEGY_NAMES) - 1)]
    state.arm_mu = [[0.9] + [0.0] * (len(STRATEGY_NAMES) - 1)]
    parents = []
    for _ in range(3):
        decision, state = policy.select(state)
        assert decision.strategy == "tiling"
        parents.append(decision.parent_id)
    assert parents[:2] == ["fast", "orig"]  # the best first, then the next one
    assert parents[2] in ("fast", "orig")  # both used up: the least asked, fastest on ties


def test_one_arm_row_and_cluster_zero_however_large_the_frontier() -> None:
    policy = make_policy("hwucb")
    state = policy.init_state(entry("orig", 10.0), seed=3)
    for i in range(12):
        decision, state = policy.select(state)
        _, state = policy.update(state, decision.decision_id, entry(f"c{i}", 9.0 - 0.5 * i,
                                                                    phi=(float(i), i * 7.0, 0, 7, 50)))
        assert decision.cluster == 0
    assert len(state.arm_n) == 1 and state.n_clusters == 1


def test_pending_pulls_spread_over_arms_and_parents() -> None:
    policy = make_policy("hwucb")
    state = policy.init_state(entry("orig", 10.0), seed=4)
    decisions = []
    for _ in range(6):
        decision, state = policy.select(state)
        decisions.append(decision)
    assert len({d.strategy for d in decisions}) == 6  # six selections in flight, six arms


def test_prompt_counts_survive_a_restart() -> None:
    policy = make_policy("hwucb")
    state = policy.init_state(entry("orig", 10.0), seed=5)
    for _ in range(3):
        _, state = policy.select(state)
    restored = PolicyState.from_json(state.to_json())
    assert restored.prompts == state.prompts and sum(state.prompts["orig"]) == 3
    legacy = state.to_dict()
    del legacy["prompts"]  # a state saved before hwucb existed
    assert PolicyState.from_dict(legacy).prompts == {}


@pytest.mark.parametrize("params", [{"repeat_cap": 0}, {"parents": 0}, {"theta_sat": 120}, {"k": 3}])
def test_bad_parameters_say_what_is_allowed(params: dict[str, object]) -> None:
    with pytest.raises(PolicyConfigError, match="hwucb|repeat_cap|parents|theta_sat"):
        make_policy("hwucb", params)


def test_config_is_separate_from_state_and_the_default_is_registered() -> None:
    assert HwUcbConfig().repeat_cap == 2
    assert DEFAULT_POLICY in POLICIES
