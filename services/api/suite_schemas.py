"""Request and response models of /v1/suites."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernelband.default_policy import DEFAULT_POLICY
from services.api.schemas import GeneratorIn, LimitsIn, ProblemFormatName, Target

NAME_PATTERN = r"^[A-Za-z0-9_.\-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SuiteProblemIn(_Strict):
    """One problem file of the suite, as text."""

    name: str = Field(min_length=1, max_length=120, pattern=NAME_PATTERN)
    source: str = Field(min_length=1, description="The complete problem module text.")
    perf_source: str = Field(default="", description="TritonBench-G: its NAME_perf.py harness.")


class SuiteSettingsIn(_Strict):
    """Job settings shared by every (problem, policy) job of the suite."""

    name: str = Field(default="suite", min_length=1, max_length=120, pattern=NAME_PATTERN)
    format: ProblemFormatName = Field(default="native", description="Format of every file.")
    targets: list[Target] = Field(default_factory=lambda: [Target.cpu], min_length=1, max_length=5)
    policies: list[str] = Field(default_factory=lambda: [DEFAULT_POLICY], min_length=1,
                                max_length=8, description="One job per problem and policy.")
    generator: GeneratorIn = Field(default_factory=lambda: GeneratorIn())
    budget: int = Field(default=20, ge=1, le=1000, description="Iterations per problem and target.")
    parallelism: int = Field(default=2, ge=1, le=64, description="Pulls in flight per track.")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    limits: LimitsIn = Field(default_factory=lambda: LimitsIn(),
                             description="Sandbox limits of every job's runs and of the loads.")

    @field_validator("targets", "policies")
    @classmethod
    def _unique(cls, value: list[Any]) -> list[Any]:
        if len(set(value)) != len(value):
            raise ValueError("each entry may appear once; remove the duplicates")
        return value


class SuiteCreate(SuiteSettingsIn):
    """POST /v1/suites JSON body: the problems plus the shared settings."""

    problems: list[SuiteProblemIn] = Field(min_length=1, max_length=500)


class SuiteMetricOut(BaseModel):
    """Suite numbers of one (target, policy); percentages over the problems that loaded."""

    target: str
    policy: str
    problems: int
    finished: int
    correct_pct: float
    fast1_pct: float
    geomean_speedup_correct: float | None
    geomean_speedup_all: float | None
    label: str = Field(description="measured | estimated | none (no correct problem yet)")
    fast_p: dict[str, float] = Field(default_factory=dict, description=(
        "KernelBench's fast_p in %, for p = 0, 1, 1.5, 2: problems correct with speedup > p "
        "over all problems (fast_0 is the correct rate)."))


class ProblemResultOut(BaseModel):
    """One problem on one target under one policy."""

    problem: str
    policy: str
    target: str
    job_id: int
    status: str
    correct: bool
    fast: bool
    speedup: float | None
    label: str | None
    held_out: str | None
    reason: str | None
    original_ms: float | None = Field(default=None, description="Original kernel, summed over timed cases.")
    best_ms: float | None = Field(default=None, description="Best kernel, summed over timed cases.")
    original_case_ms: dict[str, float] = Field(default_factory=dict, description="Per timed case, ms.")
    best_case_ms: dict[str, float] = Field(default_factory=dict, description="Per timed case, ms.")
    method: str | None = Field(default=None, description="Label, timing method and device of the times.")


class LoadFailureOut(BaseModel):
    """A file the sandboxed loader refused, with its reason."""

    name: str
    reason: str
    line: int | None


class SuiteOut(BaseModel):
    """A suite: settings, progress, metrics table, per-problem table, load failures."""

    suite_id: str
    name: str
    format: str
    settings: dict[str, Any]
    created_at: datetime | None
    jobs: int
    jobs_finished: int
    finished: bool
    job_ids: list[int]
    metrics: list[SuiteMetricOut]
    problems: list[ProblemResultOut]
    load_failures: list[LoadFailureOut]
