"""Immutable, validated policy configurations (one per policy, built from a job's params)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from kernelband.bandit.strategies import DEFAULT_THETA_SAT, DIMENSION_NAMES
from kernelband.bandit.types import PolicyConfigError

PENDING_MODES = ("virtual", "ignore")
BON_STRATEGY_MODES = ("none", "uniform")
PARENT_RULES = ("softmax", "fastest")
SIGNATURE_SCOPES = ("all", "representatives")

C = TypeVar("C", bound="BaseConfig")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise PolicyConfigError(f"kernelband: {message}")


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PolicyConfigError(f"kernelband: {name} must be a finite number, got {value!r}")
    return float(value)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyConfigError(f"kernelband: {name} must be an integer, got {value!r}")
    return value


def parse_theta_sat(value: Any) -> tuple[float, float, float]:
    """Accept a scalar, a {sm, dram, l2} mapping or a 3-list; return per-dimension thresholds."""
    if isinstance(value, Mapping):
        unknown = set(value) - set(DIMENSION_NAMES)
        _require(not unknown, f"theta_sat keys must be sm, dram, l2; got {sorted(unknown)}")
        merged = dict(zip(DIMENSION_NAMES, DEFAULT_THETA_SAT, strict=True)) | dict(value)
        items = [merged[d] for d in DIMENSION_NAMES]
    elif isinstance(value, list | tuple):
        _require(len(value) == 3, f"theta_sat needs 3 values (sm, dram, l2), got {len(value)}")
        items = list(value)
    else:
        items = [value] * 3
    out = tuple(_number("theta_sat", v) for v in items)
    for dim, v in zip(DIMENSION_NAMES, out, strict=True):
        _require(0 < v <= 100, f"theta_sat[{dim}] must be in (0, 100] (% of peak), got {v:g}")
    return (out[0], out[1], out[2])


@dataclass(frozen=True)
class BaseConfig:
    """Shared parsing: unknown keys are refused with the list of allowed ones."""

    @classmethod
    def from_params(cls: type[C], policy: str, params: Mapping[str, Any] | None) -> C:
        params = dict(params or {})
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            hint = ", ".join(allowed) if allowed else "none"
            raise PolicyConfigError(
                f"kernelband: unknown parameter(s) {unknown} for policy {policy!r}; allowed: {hint}"
            )
        return cls(**params)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class UCBConfig(BaseConfig):
    """Exploration constant, failure reward and the pending-pull scheme of a UCB policy."""

    c: float = 2.0
    failure_reward: float = 0.0
    pending: str = "virtual"

    def __post_init__(self) -> None:
        object.__setattr__(self, "c", _number("c", self.c))
        _require(self.c > 0, f"c must be > 0, got {self.c:g}")
        object.__setattr__(self, "failure_reward", _number("failure_reward", self.failure_reward))
        _require(
            -1.0 <= self.failure_reward <= 0.0,
            f"failure_reward must be in [-1, 0], got {self.failure_reward:g}",
        )
        _require(
            self.pending in PENDING_MODES,
            f"pending must be one of {PENDING_MODES}, got {self.pending!r}",
        )


@dataclass(frozen=True)
class KernelBandConfig(UCBConfig):
    """KernelBand v2: clusters x strategies, saturation masks, softmax parent sampling."""

    k: int = 3
    tau: int = 10
    theta_sat: Any = DEFAULT_THETA_SAT
    temperature: float = 1.0
    kmeans_n_init: int = 3
    parent_rule: str = "softmax"  # "softmax" (paper v2) | "fastest" (ablation: cluster's best)
    # whose h the parent softmax reads: "all" members, or only kernels that have served as a
    # cluster representative, the rest scoring a neutral 0 (the authors' release profiles only those)
    signatures: str = "all"

    def __post_init__(self) -> None:
        super().__post_init__()
        _require(1 <= _integer("k", self.k) <= 16, f"k must be in [1, 16], got {self.k}")
        _require(_integer("tau", self.tau) >= 1, f"tau must be >= 1, got {self.tau}")
        object.__setattr__(self, "theta_sat", parse_theta_sat(self.theta_sat))
        object.__setattr__(self, "temperature", _number("temperature", self.temperature))
        _require(self.temperature > 0, f"temperature must be > 0, got {self.temperature:g}")
        _require(
            self.parent_rule in PARENT_RULES,
            f"parent_rule must be one of {PARENT_RULES}, got {self.parent_rule!r}",
        )
        _require(
            self.signatures in SIGNATURE_SCOPES,
            f"signatures must be one of {SIGNATURE_SCOPES}, got {self.signatures!r}",
        )
        n_init = _integer("kmeans_n_init", self.kmeans_n_init)
        _require(1 <= n_init <= 20, f"kmeans_n_init must be in [1, 20], got {n_init}")


@dataclass(frozen=True)
class PriorConfig(KernelBandConfig):
    """KernelBand v1's extra: alpha * p(success | h, s) from an online logistic model."""

    alpha: float = 0.5
    buffer: int = 500
    warm_start: int = 120

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "alpha", _number("alpha", self.alpha))
        _require(self.alpha >= 0, f"alpha must be >= 0, got {self.alpha:g}")
        _require(_integer("buffer", self.buffer) >= 10, f"buffer must be >= 10, got {self.buffer}")
        _require(
            _integer("warm_start", self.warm_start) >= 12,
            f"warm_start must be >= 12 synthetic pairs (two per strategy), got {self.warm_start}",
        )


@dataclass(frozen=True)
class BoNConfig(BaseConfig):
    """Best of N: rewrite the original kernel every time."""

    strategy: str = "none"

    def __post_init__(self) -> None:
        _require(
            self.strategy in BON_STRATEGY_MODES,
            f"strategy must be one of {BON_STRATEGY_MODES}, got {self.strategy!r}",
        )


@dataclass(frozen=True)
class NoConfig(BaseConfig):
    """A policy without parameters."""


@dataclass(frozen=True)
class HwUcbConfig(UCBConfig):
    """hwucb: strategy arms with saturation masks; the fastest parent not yet asked too often."""

    theta_sat: Any = DEFAULT_THETA_SAT
    repeat_cap: int = 2  # prompts of one (parent, strategy) before the next-fastest kernel serves
    parents: int = 3  # how many of the fastest kernels may serve as parent

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "theta_sat", parse_theta_sat(self.theta_sat))
        _require(1 <= _integer("repeat_cap", self.repeat_cap) <= 100,
                 f"repeat_cap must be in [1, 100], got {self.repeat_cap}")
        _require(1 <= _integer("parents", self.parents) <= 100,
                 f"parents must be in [1, 100], got {self.parents}")
