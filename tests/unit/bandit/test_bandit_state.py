"""Policy state: cluster labels read from a list or from a digit string alike; copies."""

from __future__ import annotations

import dataclasses

import pytest

from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.state import parse_labels


def test_labels_parse_from_a_digit_string_as_from_a_list() -> None:
    assert parse_labels("0129") == [0, 1, 2, 9] == parse_labels([0, 1, 2, 9])
    assert parse_labels(["3", 4.0]) == [3, 4]
    assert parse_labels("") == [] == parse_labels([])


def test_a_label_string_with_anything_but_ascii_digits_is_rejected() -> None:
    for text in ("01a", "0-1", "0\u00b2"):
        with pytest.raises(ValueError):
            parse_labels(text)


def test_a_copy_equals_its_state_and_shares_no_container_with_it() -> None:
    policy = make_policy("kernelband")
    state = policy.init_state(FrontierEntry("k0", 2.0, (0.5, 1.0), (10.0, 20.0, 30.0)), 3)
    for i in range(1, 12):
        _, state = policy.select(state)
        state.frontier.append(FrontierEntry(f"k{i}", 2.0 - i / 20, (0.5, i / 4), (i, 2.0 * i, 3.0)))
        state.labels.append(i % 2)
    state.prior_buffer.append([1.0, 2.0, 3.0, 0.0, 1.0])
    state.prompts["k1"] = [1, 0]
    state.signed.append("k2")
    state.derived = object()
    copy = state.copy()
    assert type(copy) is PolicyState and copy == state == dataclasses.replace(state)
    assert copy.derived is state.derived  # derived values are shared by copies
    containers = [f.name for f in dataclasses.fields(PolicyState)
                  if isinstance(getattr(state, f.name), list | dict)]
    assert len(containers) == 13  # every one copied
    for name in containers:
        assert getattr(copy, name) is not getattr(state, name), name
    for rows in ("arm_n", "arm_mu", "centroids"):
        assert all(a is not b for a, b in zip(getattr(copy, rows), getattr(state, rows),
                                              strict=True))
    assert copy.prompts["k1"] is not state.prompts["k1"]
    copy.frontier.append(FrontierEntry("new", 1.0))
    copy.arm_n[0][0] += 1
    copy.pending.clear()
    copy.rng["state"] = "0"
    assert len(state.frontier) == 12 and state.arm_n[0][0] == 1.0 and state.pending
    assert state.rng["state"] != "0"
