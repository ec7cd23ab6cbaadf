"""The policy registry: name -> (config class, policy class), and `make_policy`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelband.bandit.baselines import BestOfNPolicy, FlatUCB1Policy, RandomPolicy, RefinePolicy
from kernelband.bandit.config import (
    BaseConfig,
    BoNConfig,
    HwUcbConfig,
    KernelBandConfig,
    NoConfig,
    PriorConfig,
    UCBConfig,
)
from kernelband.bandit.hwucb import HwUcbPolicy
from kernelband.bandit.kernelband import KernelBandPolicy
from kernelband.bandit.policy import Policy
from kernelband.bandit.prior import KernelBandPriorPolicy
from kernelband.bandit.types import PolicyConfigError
from kernelband.default_policy import DEFAULT_POLICY

__all__ = ["DEFAULT_POLICY", "POLICIES", "PolicySpec", "make_policy"]


@dataclass(frozen=True)
class PolicySpec:
    """How to build one policy and what it does, in one line."""

    config: type[BaseConfig]
    policy: type[Policy]
    summary: str


POLICIES: dict[str, PolicySpec] = {
    "kernelband": PolicySpec(
        KernelBandConfig, KernelBandPolicy, "KernelBand v2: masked UCB over clusters x strategies"
    ),
    "kernelband+prior": PolicySpec(
        PriorConfig, KernelBandPriorPolicy, "KernelBand v2 + v1's logistic compatibility prior"
    ),
    "bon": PolicySpec(BoNConfig, BestOfNPolicy, "best of N: always rewrite the original"),
    "refine": PolicySpec(NoConfig, RefinePolicy, "iterative refinement of the current best"),
    "random": PolicySpec(NoConfig, RandomPolicy, "uniform strategy and uniform parent"),
    "ucb1": PolicySpec(UCBConfig, FlatUCB1Policy, "flat UCB1 over strategies, parent = best"),
    "hwucb": PolicySpec(
        HwUcbConfig, HwUcbPolicy,
        "the service's own: masked UCB over strategies, fastest parent with a repeat cap",
    ),
}


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    """Build a policy from its registry name and a job's parameters (validated)."""
    spec = POLICIES.get(name)
    if spec is None:
        raise PolicyConfigError(
            f"kernelband: unknown policy {name!r}; use one of {', '.join(POLICIES)}"
        )
    if params is not None and not isinstance(params, Mapping):
        raise PolicyConfigError(
            f"kernelband: policy parameters must be a mapping of name -> value, got {type(params).__name__}"
        )
    config = spec.config.from_params(name, params)
    return spec.policy(config)  # type: ignore[arg-type]
