"""Bandit policies (KernelBand and baselines), clustering, masking and policy state. Pure code."""

from kernelband.bandit.config import (
    BoNConfig,
    HwUcbConfig,
    KernelBandConfig,
    NoConfig,
    PriorConfig,
    UCBConfig,
)
from kernelband.bandit.policy import Policy
from kernelband.bandit.registry import DEFAULT_POLICY, POLICIES, PolicySpec, make_policy
from kernelband.bandit.state import PolicyState
from kernelband.bandit.strategies import (
    DEFAULT_THETA_SAT,
    DIMENSION_NAMES,
    STRATEGY_NAMES,
    STRATEGY_TARGETS,
    TARGET_DIMENSION,
)
from kernelband.bandit.types import (
    Decision,
    FrontierEntry,
    PolicyConfigError,
    PolicyStateError,
    reward,
)

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_THETA_SAT",
    "DIMENSION_NAMES",
    "POLICIES",
    "STRATEGY_NAMES",
    "STRATEGY_TARGETS",
    "TARGET_DIMENSION",
    "BoNConfig",
    "Decision",
    "FrontierEntry",
    "HwUcbConfig",
    "KernelBandConfig",
    "NoConfig",
    "Policy",
    "PolicyConfigError",
    "PolicySpec",
    "PolicyState",
    "PolicyStateError",
    "PriorConfig",
    "UCBConfig",
    "make_policy",
    "reward",
]
