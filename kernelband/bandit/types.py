"""Values that cross the bandit boundary: frontier entries, decisions and errors."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class PolicyConfigError(ValueError):
    """A policy name or parameter is invalid; the message says which and what to use."""


class PolicyStateError(ValueError):
    """A state or an update does not fit together (unknown decision, duplicate kernel, ...)."""


def _floats(values: Any, field: str, kernel_id: str) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    if not all(math.isfinite(v) for v in out):
        raise PolicyStateError(f"kernelband: {field} of kernel {kernel_id!r} must be finite, got {out}")
    return out


@dataclass(frozen=True)
class FrontierEntry:
    """A correct, measured kernel: behaviour vector phi, hardware signature h (None if unknown)."""

    kernel_id: str
    time_ms: float
    phi: tuple[float, ...] = ()
    h: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_ms) and self.time_ms > 0):
            raise PolicyStateError(
                f"kernelband: time_ms of kernel {self.kernel_id!r} must be a positive number, "
                f"got {self.time_ms}"
            )
        object.__setattr__(self, "phi", _floats(self.phi, "phi", self.kernel_id))
        if self.h is not None:
            h = _floats(self.h, "h", self.kernel_id)
            if len(h) != 3:
                raise PolicyStateError(
                    f"kernelband: h of kernel {self.kernel_id!r} needs 3 numbers (SM, DRAM, L2 "
                    f"% of peak), got {len(h)}"
                )
            object.__setattr__(self, "h", h)

    def features(self) -> tuple[float, ...]:
        """Clustering features: phi, or log1p(time) alone when phi is unknown."""
        return self.phi if self.phi else (math.log1p(self.time_ms),)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel_id": self.kernel_id,
            "time_ms": self.time_ms,
            "phi": list(self.phi),
            "h": None if self.h is None else list(self.h),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FrontierEntry:
        h = data.get("h")
        return cls(
            kernel_id=str(data["kernel_id"]),
            time_ms=float(data["time_ms"]),
            phi=tuple(data.get("phi") or ()),
            h=None if h is None else (float(h[0]), float(h[1]), float(h[2])),
        )


@dataclass(frozen=True)
class Decision:
    """One pull: rewrite `parent_id` with `strategy` (None: the generator chooses freely)."""

    decision_id: str
    cluster: int
    strategy: str | None
    parent_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "cluster": self.cluster,
            "strategy": self.strategy,
            "parent_id": self.parent_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        return cls(
            decision_id=str(data["decision_id"]),
            cluster=int(data["cluster"]),
            strategy=data.get("strategy"),
            parent_id=str(data["parent_id"]),
        )


def reward(parent_time_ms: float, child: FrontierEntry | None, failure_reward: float) -> float:
    """r = max(0, (T_parent - T_child) / T_parent); a failed child gets `failure_reward`."""
    if child is None:
        return failure_reward
    return max(0.0, (parent_time_ms - child.time_ms) / parent_time_ms)
