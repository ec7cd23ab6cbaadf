"""Stored policy states (labels packed as digits read back as the same list); policies per job."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelband.bandit import FrontierEntry, PolicyConfigError, PolicyState, make_policy
from kernelband.db.models import Job
from kernelband.scheduling.state import policy_for, stored_labels


def _state(labels: list[int]) -> PolicyState:
    policy = make_policy("kernelband", {})
    state = policy.init_state(FrontierEntry("0", 1.0, (0.0,), None), seed=1)
    state.frontier = [FrontierEntry(str(i), 1.0 + i, (0.0,), None) for i in range(len(labels))]
    state.labels = labels
    return state


def test_single_digit_labels_are_stored_as_one_string_and_read_back_unchanged() -> None:
    state = _state([0, 2, 1, 9, 0])
    stored = {**state.to_dict(frontier=False), "labels": stored_labels(state.labels)}
    assert stored["labels"] == "02190"
    again = PolicyState.from_dict({**stored, "frontier": []})
    assert again.labels == [0, 2, 1, 9, 0]
    assert all(type(v) is int for v in again.labels)


def test_labels_past_nine_stay_a_list() -> None:
    assert stored_labels([0, 10, 3]) == [0, 10, 3]
    assert stored_labels([]) == ""
    assert PolicyState.from_dict({**_state([]).to_dict(frontier=False), "labels": "",
                                  "frontier": []}).labels == []


def test_jobs_configured_alike_share_one_policy_and_bad_parameters_still_fail() -> None:
    def job(name: str, params: dict[str, object] | None) -> Job:
        return SimpleNamespace(policy=name, policy_params=params)  # type: ignore[return-value]

    first = policy_for(job("kernelband", {"k": 2, "c": 1.5}))
    assert policy_for(job("kernelband", {"c": 1.5, "k": 2})) is first
    assert policy_for(job("kernelband", {"k": 3, "c": 1.5})).config.k == 3  # type: ignore[attr-defined]
    assert policy_for(job("kernelband", None)) is policy_for(job("kernelband", {}))
    with pytest.raises(PolicyConfigError, match="k must be in"):
        policy_for(job("kernelband", {"k": 99}))
    with pytest.raises(PolicyConfigError, match="k must be in"):
        policy_for(job("kernelband", {"k": 99}))  # a refusal is not remembered as a policy
