"""Values that cross process boundaries: a generation request and its result (JSON-able)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernelband.problem.model import KernelProblem


@dataclass(frozen=True)
class ProfileFact:
    """One labelled profile value, e.g. DRAM throughput 38 % of peak, measured by ncu."""

    label: str
    value: float
    unit: str
    source: str

    def render(self) -> str:
        """The fact in words: 'DRAM throughput 38% of peak (measured, ncu)'."""
        sep = "" if self.unit.startswith("%") else " "
        unit = f"{sep}{self.unit}" if self.unit else ""
        return f"{self.label} {self.value:.3g}{unit} ({self.source})"


@dataclass(frozen=True)
class GenerationRequest:
    """Rewrite `parent_editable` of `problem` with `strategy` (None: the generator chooses)."""

    problem: KernelProblem
    parent_editable: str
    strategy: str | None
    profile_summary: tuple[ProfileFact, ...] = ()
    seed: int = 0
    memory: tuple[str, ...] = ()  # the parent's lineage and recent attempts, one line each
    example: dict[str, str] | None = None  # a one-shot example chosen by the scheduler
    repair: RepairTurn | None = None  # set on a repair turn: continue that conversation
    step: str = ""  # "translate": write the first Triton ModelNew from PyTorch (problem/translate.py)

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem": self.problem.to_dict(),
            "parent_editable": self.parent_editable,
            "strategy": self.strategy,
            "profile_summary": [asdict(f) for f in self.profile_summary],
            "seed": self.seed,
            "memory": list(self.memory),
            "example": self.example,
            "repair": None if self.repair is None else self.repair.to_dict(),
            "step": self.step,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationRequest:
        return cls(
            problem=KernelProblem.from_dict(data["problem"]),
            parent_editable=data["parent_editable"],
            strategy=data.get("strategy"),
            profile_summary=tuple(ProfileFact(**f) for f in data.get("profile_summary", ())),
            seed=int(data.get("seed", 0)),
            memory=tuple(str(line) for line in data.get("memory") or ()),
            example=data.get("example"),
            repair=RepairTurn.from_dict(data["repair"]) if data.get("repair") else None,
            step=str(data.get("step") or ""),
        )


@dataclass(frozen=True)
class RepairTurn:
    """Turn `turn` of a repair: the earlier messages, the failed reply and what went wrong."""

    turn: int
    conversation: tuple[dict[str, str], ...]
    reply: str
    feedback: str

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "conversation": [dict(m) for m in self.conversation],
                "reply": self.reply, "feedback": self.feedback}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepairTurn:
        return cls(turn=int(data["turn"]), reply=str(data.get("reply") or ""),
                   conversation=tuple(dict(m) for m in data.get("conversation") or ()),
                   feedback=str(data.get("feedback") or ""))


@dataclass(frozen=True)
class GenerationResult:
    """What a generator produced: a new editable region, or a failure `reason`.

    `reason` is machine-readable (`no_code_block`, `syntax_error:line 12`, `rate_limited`, ...);
    `message` is for people. Token counts come from the provider's usage; `cost_known` is False
    when the model's price is unknown (then `cost_usd` is 0 and only tokens count).
    """

    ok: bool
    editable: str = ""
    reason: str = ""
    message: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    latency_s: float = 0.0
    model: str = ""
    strategy: str | None = None
    attempts: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The transcript of this turn: the messages sent and the raw reply (empty: no call made).
    messages: tuple[dict[str, str], ...] = ()
    reply: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["messages"] = [dict(m) for m in self.messages]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationResult:
        fields = dict(data)
        fields["notes"] = tuple(data.get("notes", ()))
        fields["messages"] = tuple(dict(m) for m in data.get("messages") or ())
        return cls(**fields)
