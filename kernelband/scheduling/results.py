"""Task results as frozen values, one class per task kind: a worker's answer for one attempt.

A task body builds its value and returns `to_dict()` (Celery and the results queue carry JSON);
the scheduler turns the dict back into the value once, with `read_result(kind, data)`, when it
applies the result, and every step after that reads typed fields. A dict that is not a result
of its kind is refused with a reason that names what was wrong (`malformed_result:...`), never
a KeyError deep inside a step. Keys no step reads (a traceback, the worker's name) are kept in
`extra` and written back by `to_dict`, so the attempt row stores what the worker said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from kernelband.generate.messages import GenerationResult
from kernelband.profile.measurement import Measurement

R = TypeVar("R", bound="ResultValue")
LOST_MESSAGE = "no result arrived within the lease, every try"


class MalformedResult(ValueError):
    """A result dict that is not a result of its kind; `reason` is machine-readable."""

    def __init__(self, kind: str, key: str, problem: str) -> None:
        super().__init__(f"{kind} result: {key} {problem}")
        self.reason = f"malformed_result:{key}"


@dataclass(frozen=True)
class ResultValue:
    """What every task result says: whether it worked and, if not, why.

    `lost`: no usable answer at all (every try's lease expired, or the answer was malformed);
    the scheduler sets it, a worker never does."""

    kind: ClassVar[str] = ""
    ok: bool
    reason: str = ""
    message: str = ""
    lost: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def broken(self) -> bool:
        """No usable answer from a worker (the attempt fails rather than ends as rejected)."""
        return self.lost or self.reason.startswith("task_error")

    def to_dict(self) -> dict[str, Any]:
        data = {name: _plain(getattr(self, name)) for name in _field_names(type(self))}
        return {**data, **self.extra}

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The value of a result dict; raises MalformedResult naming the first wrong key."""
        if not isinstance(data, Mapping):
            raise MalformedResult(cls.kind, "body", f"is a {type(data).__name__}, not an object")
        if not isinstance(data.get("ok"), bool):
            raise MalformedResult(cls.kind, "ok", "is missing or not true/false")
        known = _field_names(cls)
        values = {name: _read(cls.kind, name, data[name]) for name in known
                  if data.get(name) is not None}
        names = _FIELD_SETS[cls]  # filled with `known`
        extra = {key: value for key, value in data.items() if key not in names}
        return cls(**values, extra=extra)


@dataclass(frozen=True)
class GenerateResult(ResultValue):
    """A generator's child kernel (`editable`) with its token usage and transcript."""

    kind: ClassVar[str] = "generate"
    editable: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    latency_s: float = 0.0
    model: str = ""
    strategy: str | None = None
    attempts: int = 0
    notes: tuple[str, ...] = ()
    messages: tuple[dict[str, str], ...] = ()  # the prompt of this turn ...
    reply: str = ""  # ... and the raw reply (both empty: no call was made)

    @classmethod
    def of(cls, generation: GenerationResult) -> GenerateResult:
        """The task result of a generator's answer (every field carried over)."""
        return cls(**{item.name: getattr(generation, item.name) for item in fields(generation)})

    def without_transcript(self) -> dict[str, Any]:
        """The result as the attempt keeps it: the transcript lives in its own table."""
        return {k: v for k, v in self.to_dict().items() if k not in ("messages", "reply")}


@dataclass(frozen=True)
class CompileResult(ResultValue):
    """Static checks and the public-case pre-screen (`verdict`), and the static profile."""

    kind: ClassVar[str] = "compile"
    verdict: dict[str, Any] | None = None  # Verdict.to_dict(); None: only static checks ran
    static_profile: dict[str, Any] | None = None  # the labelled report, or {"error": ...}
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per part


@dataclass(frozen=True)
class _MeasuredResult(ResultValue):
    verdict: dict[str, Any] | None = None  # Verdict.to_dict() of the correctness check
    measurement: Measurement | None = None
    features: dict[str, Any] | None = None  # Features.to_dict(), stored with the measurement
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per part


@dataclass(frozen=True)
class ProfileResult(_MeasuredResult):
    """Correctness on the target, then the measurement (or labelled estimate) and features."""

    kind: ClassVar[str] = "profile"


@dataclass(frozen=True)
class VerifyResult(_MeasuredResult):
    """Held-out acceptance; on a GPU also the final measurement paired against the original."""

    kind: ClassVar[str] = "verify"


TaskResultValue = GenerateResult | CompileResult | ProfileResult | VerifyResult
RESULT_TYPES: dict[str, type[TaskResultValue]] = {
    cls.kind: cls for cls in (GenerateResult, CompileResult, ProfileResult, VerifyResult)}


def read_result(kind: str, data: Any) -> TaskResultValue:
    """The typed value of a worker's result for an attempt of `kind`; a malformed one becomes a
    lost result whose reason names what was wrong (the dict received is kept in `extra`)."""
    cls = RESULT_TYPES[kind]
    try:
        return cls.from_dict(data)
    except MalformedResult as exc:
        return lost_result(kind, exc.reason, f"refused the worker's answer: {exc}",
                           received=data)


def lost_result(kind: str, reason: str, message: str = LOST_MESSAGE,
                **extra: Any) -> TaskResultValue:
    """A result that stands for no usable answer: the attempt fails with `reason`."""
    return RESULT_TYPES[kind](ok=False, lost=True, reason=reason, message=message, extra=extra)


@dataclass(frozen=True)
class LeaseBeat:
    """A worker saying it holds an attempt (`task_id`: which try): not a result."""

    task_id: str = ""

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> LeaseBeat | None:
        """The beat a results message carries, or None when it is a result."""
        return cls(str(data.get("task_id") or "")) if data.get("heartbeat") else None


def _read(kind: str, name: str, value: Any) -> Any:
    """One key of a result dict as its field's type; raises MalformedResult otherwise."""
    if name == "measurement":
        return _measurement(kind, value)
    if name in ("notes", "messages"):
        if not isinstance(value, list | tuple):
            raise MalformedResult(kind, name, "is not a list")
        return tuple(dict(v) if isinstance(v, Mapping) else v for v in value)
    expected, words = _FIELD_TYPES[name]
    # JSON true/false are ints to isinstance: a bool is only a bool field's value
    if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
        raise MalformedResult(kind, name, f"is not {words}")
    if expected == _NUMBER[0] and isinstance(value, int | float):
        return float(value)
    return dict(value) if isinstance(value, dict) else value


def _measurement(kind: str, value: Any) -> Measurement:
    if not isinstance(value, Mapping):
        raise MalformedResult(kind, "measurement", "is not an object")
    missing = [name for name in ("label", "method", "device", "target", "time_ms")
               if name not in value]
    if missing:
        raise MalformedResult(kind, "measurement", f"lacks {', '.join(missing)}")
    try:
        return Measurement.from_dict(dict(value))
    except (TypeError, ValueError, KeyError) as exc:
        raise MalformedResult(kind, "measurement", str(exc)) from exc


def _field_names(cls: type[ResultValue]) -> tuple[str, ...]:
    """The keys a result of `cls` has, in field order (`extra` holds the others)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(item.name for item in fields(cls)
                                          if item.name != "extra")
        _FIELD_SETS[cls] = frozenset(names)
    return names


_FIELD_NAMES: dict[type[ResultValue], tuple[str, ...]] = {}
_FIELD_SETS: dict[type[ResultValue], frozenset[str]] = {}  # the same names, to look keys up in


def _plain(value: Any) -> Any:
    """A field as JSON: tuples as lists, a measurement as Measurement.to_dict() gives it."""
    if type(value) in _SCALARS:  # most fields: nothing to copy, the checks below skipped
        return value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Measurement):
        return _measurement_dict(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _measurement_dict(measurement: Measurement) -> dict[str, Any]:
    """Measurement.to_dict() without its deep copy (asdict): every applied profile result is
    written back to its attempt row, and the copy was most of what reading one cost."""
    data = {name: getattr(measurement, name) for name in _MEASUREMENT_FIELDS}
    if measurement.speedup is not None:
        data["speedup"] = measurement.speedup.to_dict()
    return data


_SCALARS = frozenset((str, int, float, bool, type(None)))
_MEASUREMENT_FIELDS = tuple(item.name for item in fields(Measurement))
_NUMBER = ((int, float), "a number")
_FIELD_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    **dict.fromkeys(("ok", "lost", "cost_known"), (bool, "true/false")),
    **dict.fromkeys(("reason", "message", "editable", "model", "strategy", "reply"),
                    (str, "a string")),
    **dict.fromkeys(("prompt_tokens", "completion_tokens", "attempts"), (int, "an integer")),
    **dict.fromkeys(("cost_usd", "latency_s"), _NUMBER),
    **dict.fromkeys(("verdict", "static_profile", "features", "timings"), (dict, "an object"))}


__all__ = ["CompileResult", "GenerateResult", "LeaseBeat", "MalformedResult", "ProfileResult",
           "RESULT_TYPES", "ResultValue", "TaskResultValue", "VerifyResult", "lost_result",
           "read_result"]
