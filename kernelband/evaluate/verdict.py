"""The outcome of evaluating one candidate: a frozen value that travels as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Speedups above this are suspicious enough to re-verify (held-out cases, fresh process).
REVERIFY_SPEEDUP = 10.0


@dataclass(frozen=True)
class Verdict:
    """`reason` is machine-readable (`ok`, `wrong_result`, `timeout`, ...); `message` is for people."""

    correct: bool
    reason: str
    message: str = ""
    cases_checked: int = 0
    seeds: int = 0
    held_out_checked: int = 0
    flags: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flags"] = list(self.flags)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        fields = dict(data)
        fields["flags"] = tuple(data.get("flags", ()))
        fields["details"] = dict(data.get("details") or {})
        return cls(**fields)

    @classmethod
    def reject(cls, reason: str, message: str, **extra: Any) -> Verdict:
        """A rejection whose message starts with its reason, e.g. `timeout: ...`."""
        text = message if message.startswith(reason) else f"{reason}: {message}"
        return cls(correct=False, reason=reason, message=text, **extra)


def needs_reverification(speedup: float) -> bool:
    """True when a speedup is large enough that the scheduler should verify it again."""
    return speedup > REVERIFY_SPEEDUP
