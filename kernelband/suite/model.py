"""Values that cross the suite boundary: settings, load failures, the report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from kernelband.default_policy import DEFAULT_POLICY
from kernelband.scheduling.stages import StageTime
from kernelband.suite.metrics import ProblemResult, SuiteMetric
from kernelband.suite.throughput import TargetThroughput

# A suite is a benchmark, so its numbers should repeat: with one pull in flight per track a
# job's search path depends only on the rewards it sees, never on which of two concurrent
# results came back first (with two in flight, two runs of the same suite rewrote different
# children of vector_addition_custom and reported 3.18x and 1.82x). The GPU stays busy because
# a suite runs many jobs at once.
SUITE_PARALLELISM = 1


@dataclass(frozen=True)
class SuiteSettings:
    """Job settings shared by every job of a suite; one job per (problem, policy)."""

    targets: tuple[str, ...] = ("cpu",)
    policies: tuple[str, ...] = (DEFAULT_POLICY,)
    model: str = ""  # empty: the offline rules generator
    budget: int = 20  # iterations per problem and target
    parallelism: int = SUITE_PARALLELISM
    seed: int = 0
    limits: dict[str, float] = field(default_factory=dict)  # each job's sandbox limits (JOB_LIMITS)

    def __post_init__(self) -> None:
        if not self.targets or not self.policies:
            raise ValueError("a suite needs at least one target and one policy")
        if len(set(self.policies)) != len(self.policies):
            raise ValueError(f"policies repeat: {list(self.policies)}; name each policy once")
        if self.budget < 1 or self.parallelism < 1:
            raise ValueError("budget and parallelism must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "targets": list(self.targets), "policies": list(self.policies)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuiteSettings:
        return cls(targets=tuple(data["targets"]), policies=tuple(data["policies"]),
                   model=str(data.get("model", "")), budget=int(data["budget"]),
                   parallelism=int(data.get("parallelism", SUITE_PARALLELISM)), seed=int(data.get("seed", 0)),
                   limits={k: float(v) for k, v in (data.get("limits") or {}).items()})


@dataclass(frozen=True)
class LoadFailure:
    """A problem file the sandboxed loader refused, with its reason."""

    name: str
    reason: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadFailure:
        return cls(str(data["name"]), str(data["reason"]), data.get("line"))


@dataclass(frozen=True)
class SuiteReport:
    """Everything GET /v1/suites/{id} and the CLI show: metrics, per-problem rows, failures."""

    suite_id: str
    name: str
    format: str
    settings: SuiteSettings
    created_at: datetime | None
    job_ids: tuple[int | str, ...]  # row ids; public ids once they leave the service
    jobs_finished: int
    metrics: tuple[SuiteMetric, ...]
    problems: tuple[ProblemResult, ...]
    load_failures: tuple[LoadFailure, ...] = field(default_factory=tuple)
    # what the run cost its workers (kernelband/suite/throughput.py); set by the embedded runner
    throughput: tuple[TargetThroughput, ...] = field(default_factory=tuple)
    # where the jobs' time went, per task kind over every job of the suite; set by the embedded runner
    steps: tuple[StageTime, ...] = field(default_factory=tuple)

    @property
    def finished(self) -> bool:
        """True once every job of the suite reached completed, cancelled or failed."""
        return self.jobs_finished == len(self.job_ids)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite_id": self.suite_id, "name": self.name, "format": self.format,
            "settings": self.settings.to_dict(),
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "jobs": len(self.job_ids), "jobs_finished": self.jobs_finished,
            "finished": self.finished, "job_ids": list(self.job_ids),
            "metrics": [m.to_dict() for m in self.metrics],
            "problems": [p.to_dict() for p in self.problems],
            "load_failures": [f.to_dict() for f in self.load_failures],
        } | ({"throughput": [t.to_dict() for t in self.throughput]} if self.throughput else {}) \
          | ({"steps": [s.to_dict() for s in self.steps]} if self.steps else {})


def report_from_dict(data: dict[str, Any]) -> SuiteReport:
    """Rebuild a report from `SuiteReport.to_dict()` (e.g. GET /v1/suites/{id})."""
    problems = tuple(ProblemResult.from_dict(row) for row in data["problems"])
    created = data.get("created_at")
    return SuiteReport(
        suite_id=data["suite_id"], name=data["name"], format=data["format"],
        settings=SuiteSettings.from_dict(data["settings"]),
        created_at=datetime.fromisoformat(created) if created else None,
        job_ids=tuple(data["job_ids"]), jobs_finished=int(data["jobs_finished"]),
        metrics=tuple(SuiteMetric(**{k: v for k, v in m.items()
                                     if k in SuiteMetric.__dataclass_fields__})
                      for m in data["metrics"]), problems=problems,
        load_failures=tuple(LoadFailure.from_dict(f) for f in data["load_failures"]),
        throughput=tuple(TargetThroughput.from_dict(t) for t in data.get("throughput") or ()),
        steps=tuple(StageTime.from_dict(s) for s in data.get("steps") or ()))
