"""KernelBand v2 behaviour: masks, clustering schedule, pending pulls, parent sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bandit_builders import entry

from kernelband.bandit import STRATEGY_NAMES, TARGET_DIMENSION, make_policy
from kernelband.bandit.arms import cluster_members, open_arms

THETA = np.array([80.0, 70.0, 75.0])


def test_saturated_dimensions_are_masked() -> None:
    policy = make_policy("kernelband")
    state = policy.init_state(entry("k0", 10.0, h=(90.0, 30.0, 20.0)), seed=0)
    mask = open_arms(state, cluster_members(state, 3), THETA)
    assert mask[1:].sum() == 0, "empty clusters are closed"
    for s, name in enumerate(STRATEGY_NAMES):
        assert mask[0, s] == (TARGET_DIMENSION[name] != 0), name
    for _ in range(20):
        decision, state = policy.select(state)
        assert TARGET_DIMENSION[decision.strategy or ""] != 0


def test_fully_saturated_cluster_keeps_the_arm_with_most_headroom_open() -> None:
    state = make_policy("kernelband").init_state(entry("k0", 10.0, h=(95.0, 71.0, 99.0)), seed=0)
    mask = open_arms(state, cluster_members(state, 3), THETA)
    # headroom: SM -15, DRAM -1, L2 -24 -> the DRAM strategies stay open
    assert [STRATEGY_NAMES[s] for s in np.flatnonzero(mask[0])] == [
        "vectorization", "fusion", "access_layout"]


def test_six_pending_selections_cover_six_distinct_arms() -> None:
    policy = make_policy("kernelband")
    state = policy.init_state(entry("k0", 10.0, h=(10.0, 10.0, 10.0)), seed=4)
    strategies = []
    for _ in range(6):
        decision, state = policy.select(state)
        strategies.append(decision.strategy)
    assert sorted(s or "" for s in strategies) == sorted(STRATEGY_NAMES)


def test_without_the_pending_scheme_a_learned_arm_is_repeated() -> None:
    policy = make_policy("kernelband", {"pending": "ignore", "k": 1})
    state = policy.init_state(entry("k0", 10.0, h=(10.0, 10.0, 10.0)), seed=4)
    for i, _ in enumerate(STRATEGY_NAMES):  # one real pull per arm, tiling is the winner
        decision, state = policy.select(state)
        faster = 5.0 if decision.strategy == "tiling" else 10.5
        _, state = policy.update(state, decision.decision_id, entry(f"k{i + 1}", faster))
    batch = []
    for _ in range(4):
        decision, state = policy.select(state)
        batch.append(decision.strategy)
    assert batch == ["tiling"] * 4


def test_out_of_order_updates_give_the_same_arm_statistics() -> None:
    policy = make_policy("kernelband")
    base = policy.init_state(entry("k0", 10.0, h=(10.0, 10.0, 10.0)), seed=1)
    decisions = []
    for _ in range(3):
        decision, base = policy.select(base)
        decisions.append(decision)
    children = {d.decision_id: entry(f"c{i}", 10.0 - 2 * i) for i, d in enumerate(decisions)}
    in_order = base
    for d in decisions:
        _, in_order = policy.update(in_order, d.decision_id, children[d.decision_id])
    reverse = base
    for d in reversed(decisions):
        _, reverse = policy.update(reverse, d.decision_id, children[d.decision_id])
    assert in_order.arm_n == reverse.arm_n and in_order.arm_mu == reverse.arm_mu
    for i, d in enumerate(decisions):
        s = STRATEGY_NAMES.index(d.strategy or "")
        assert in_order.arm_n[0][s] == 2
        assert in_order.arm_mu[0][s] == pytest.approx(0.5 + ((2 * i / 10) - 0.5) / 2)


def test_clusters_form_at_2k_and_refresh_every_tau() -> None:
    policy = make_policy("kernelband", {"k": 3, "tau": 4})
    state = policy.init_state(entry("k0", 10.0, phi=(0, 0, 0, 0, 0)), seed=2)
    history = []
    for i in range(1, 16):
        decision, state = policy.select(state)
        group = i % 3  # three well separated behaviour groups
        phi = (group * 10.0 + i * 0.01, group * 5.0, 0.0, 0.0, 0.0)
        _, state = policy.update(state, decision.decision_id, entry(f"k{i}", 9.0, phi=phi))
        history.append((len(state.frontier), state.n_clusters, state.since_recluster))
    assert [n for size, n, _ in history if size < 6] == [1] * 4
    assert history[4] == (6, 3, 0), "first clustering when the frontier reaches 2K = 6"
    assert history[8][2] == 0 and history[7][2] == 3, "re-clustered after tau = 4 additions"
    groups: dict[int, set[int]] = {}
    for i, label in enumerate(state.labels[1:], start=1):
        groups.setdefault(i % 3, set()).add(label)
    assert all(len(labels) == 1 for labels in groups.values())
    assert len({next(iter(v)) for v in groups.values()}) == 3


def test_parent_sampling_prefers_headroom_in_the_target_dimension() -> None:
    policy = make_policy("kernelband", {"theta_sat": {"dram": 95, "l2": 99}})
    state = policy.init_state(entry("k0", 10.0, h=(99.0, 10.0, 99.0)), seed=0)
    d, state = policy.select(state)
    _, state = policy.update(state, d.decision_id, entry("k1", 9.0, h=(99.0, 90.0, 99.0)))
    parents = []
    for _ in range(30):
        d, state = policy.select(state)
        assert TARGET_DIMENSION[d.strategy or ""] == 1
        parents.append(d.parent_id)
    assert parents.count("k0") == 30, "headroom 85 vs 5 at temperature 1: k0 almost surely"


def test_without_signatures_the_fastest_kernel_is_the_parent() -> None:
    policy = make_policy("kernelband")
    state = policy.init_state(entry("k0", 10.0, h=None), seed=0)
    d, state = policy.select(state)
    _, state = policy.update(state, d.decision_id, entry("k1", 7.0, h=None))
    for _ in range(5):
        d, state = policy.select(state)
        assert d.parent_id == "k1"


def test_ucb_follows_the_formula() -> None:
    policy = make_policy("kernelband", {"c": 2.0})
    state = policy.init_state(entry("k0", 10.0, h=(10.0, 10.0, 10.0)), seed=0)
    state.arm_n[0] = [3.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    state.arm_mu[0] = [0.9, 0.0, 0.0, 0.0, 0.0, 0.0]
    state.t = 7
    d, _ = policy.select(state)
    # tiling: 0.9 + 2*sqrt(ln 8 / 3) = 2.57 > others: 0 + 2*sqrt(ln 8) = 2.88 -> an untried arm
    assert d.strategy != "tiling"
    state.arm_mu[0][0] = 1.5
    d, _ = policy.select(state)
    assert 1.5 + 2 * math.sqrt(math.log(8) / 3) > 2 * math.sqrt(math.log(8))
    assert d.strategy == "tiling"


def test_prior_policy_learns_from_outcomes() -> None:
    policy = make_policy("kernelband+prior", {"buffer": 10})
    state = policy.init_state(entry("k0", 10.0, h=(20.0, 20.0, 20.0)), seed=0)
    before = list(state.prior_coef)
    for _ in range(12):
        d, state = policy.select(state)
        _, state = policy.update(state, d.decision_id, None)
    assert len(state.prior_buffer) == 10
    assert state.prior_coef != before


def test_parent_rule_fastest_takes_the_clusters_best() -> None:
    policy = make_policy("kernelband", {"parent_rule": "fastest", "k": 1})
    state = policy.init_state(entry("k0", 10.0, h=(10.0, 10.0, 10.0)), seed=0)
    d, state = policy.select(state)
    _, state = policy.update(state, d.decision_id, entry("k1", 6.0, h=(60.0, 60.0, 60.0)))
    for _ in range(5):
        d, state = policy.select(state)
        assert d.parent_id == "k1"


def _batch_of_two(params: dict[str, object]) -> list[str]:
    """k0 original; k1 faster (the new representative); k2 slower, never a representative."""
    policy = make_policy("kernelband", {"theta_sat": 75, **params})
    state = policy.init_state(entry("k0", 10.0, h=(10.0, 10.0, 10.0)), seed=0)
    d1, state = policy.select(state)
    d2, state = policy.select(state)
    _, state = policy.update(state, d1.decision_id, entry("k1", 7.0, h=(60.0, 60.0, 60.0)))
    _, state = policy.update(state, d2.decision_id, entry("k2", 12.0, h=(5.0, 5.0, 5.0)))
    parents = []
    for _ in range(20):
        d, state = policy.select(state)
        parents.append(d.parent_id)
    assert sorted(state.signed) == (["k0", "k1"] if params else [])
    return parents


def test_signature_scope_all_reads_every_members_headroom() -> None:
    assert _batch_of_two({}).count("k2") >= 18, "headroom 70 vs 65 vs 15: k2 nearly always"


def test_signature_scope_representatives_scores_the_others_neutral() -> None:
    parents = _batch_of_two({"signatures": "representatives"})
    assert "k2" not in parents, "k2 never served as a representative: its score is 0"
    assert parents.count("k0") >= 18, "the earlier representative keeps its cached headroom 65"


def test_distinct_rows_counts_like_numpy_unique_up_to_its_bound() -> None:
    from kernelband.bandit.clustering import distinct_rows

    rng = np.random.default_rng(7)
    for _ in range(500):
        n, d = int(rng.integers(1, 25)), int(rng.integers(1, 4))
        x = rng.integers(-2, 3, size=(n, d)) * rng.choice([0.0, -0.0, 0.5, 1.0], size=(n, d))
        for bound in (1, 2, 3, 50):
            assert distinct_rows(x, bound) == min(bound, len(np.unique(x, axis=0)))
