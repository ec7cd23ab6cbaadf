"""Policy parameters are validated with errors that say what to do."""

from __future__ import annotations

import pytest

from kernelband.bandit import POLICIES, KernelBandConfig, PolicyConfigError, make_policy


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("kernelband", {"c": -1}, "c must be > 0, got -1"),
        ("kernelband", {"k": 0}, "k must be in"),
        ("kernelband", {"tau": 2.5}, "tau must be an integer"),
        ("kernelband", {"theta_sat": {"hbm": 50}}, "theta_sat keys must be sm, dram, l2"),
        ("kernelband", {"theta_sat": 150}, r"theta_sat\[sm\] must be in \(0, 100\]"),
        ("kernelband", {"failure_reward": -2}, "failure_reward must be in"),
        ("kernelband", {"pending": "maybe"}, "pending must be one of"),
        ("kernelband", {"cc": 1}, "unknown parameter"),
        ("kernelband+prior", {"alpha": -0.1}, "alpha must be >= 0"),
        ("bon", {"strategy": "best"}, "strategy must be one of"),
        ("random", {"c": 2.0}, "allowed: none"),
        ("ucb1", {"c": "big"}, "c must be a finite number"),
        ("nope", {}, "unknown policy 'nope'; use one of"),
    ],
)
def test_invalid_parameters_are_refused(name: str, params: dict, message: str) -> None:
    with pytest.raises(PolicyConfigError, match=message):
        make_policy(name, params)


def test_theta_sat_forms() -> None:
    assert KernelBandConfig(theta_sat=75).theta_sat == (75.0, 75.0, 75.0)
    assert KernelBandConfig(theta_sat={"dram": 60}).theta_sat == (80.0, 60.0, 75.0)
    assert KernelBandConfig().theta_sat == (80.0, 70.0, 75.0)


def test_every_policy_builds_with_defaults_and_configs_are_frozen() -> None:
    for name in POLICIES:
        policy = make_policy(name)
        assert policy.name == name
    config = KernelBandConfig()
    with pytest.raises(AttributeError):
        config.c = 3.0  # type: ignore[misc]
