"""Request and response models of /v1/suites."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernelband.default_policy import DEFAULT_POLICY
from kernelband.suite.model import SUITE_PARALLELISM
from services.api.schemas import GeneratorIn, LimitsIn, ProblemFormatName, Target
from services.api.timefmt import UtcTime

NAME_PATTERN = r"^[A-Za-z0-9_.\-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SuiteProblemIn(_Strict):
    """One problem file of the suite, as text."""

    name: str = Field(min_length=1, max_length=120, pattern=NAME_PATTERN)
    source: str = Field(min_length=1, description="The complete problem module text.")
    perf_source: str = Field(default="", description="TritonBench-G: its NAME_perf.py harness.")


class SuiteBudgetIn(_Strict):
    """A suite's budget, shaped like a job's (`BudgetIn`): iterations per problem and target."""

    iterations: int = Field(default=20, ge=1, le=1000, description="Generations per track.")


class SuiteSettingsIn(_Strict):
    """Job settings shared by every (problem, policy) job of the suite."""

    name: str = Field(default="suite", min_length=1, max_length=120, pattern=NAME_PATTERN)
    format: ProblemFormatName = Field(default="native", description="Format of every file.")
    targets: list[Target] = Field(default_factory=lambda: [Target.cpu], min_length=1, max_length=5)
    policies: list[str] = Field(default_factory=lambda: [DEFAULT_POLICY], min_length=1,
                                max_length=8, description="One job per problem and policy.")
    generator: GeneratorIn = Field(default_factory=lambda: GeneratorIn())
    budget: SuiteBudgetIn = Field(
        default_factory=lambda: SuiteBudgetIn(),
        description='The same shape as a job\'s budget: {"iterations": N} per problem and '
                    "target. A bare integer N is still read as {\"iterations\": N} but is "
                    "deprecated and will be refused in a later version.")
    parallelism: int = Field(default=SUITE_PARALLELISM, ge=1, le=64,
                             description="Pulls in flight per track (1: the search path "
                                         "does not depend on which result arrives first).")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    limits: LimitsIn = Field(default_factory=lambda: LimitsIn(),
                             description="Sandbox limits of every job's runs and of the loads.")

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_shape(cls, value: Any) -> Any:
        # Deprecated: suites once took a bare integer where jobs take {"iterations": N}.
        if isinstance(value, int) and not isinstance(value, bool):
            return {"iterations": value}
        return value

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
        "KernelBench's fast_p in %, for p = 0, 1, 1.5, 2: problems correct and faster than p "
        "with 95% confidence (a measured speedup's interval low > p), over all problems "
        "(fast_0 is the correct rate)."))
    fast1_point_pct: float = Field(default=0.0, description=(
        "Fast@1 counted on point estimates (correct and speedup > 1.0), as published tables "
        "count it; fast1_pct counts only an interval above 1.0."))


class ProblemResultOut(BaseModel):
    """One problem on one target under one policy."""

    problem: str
    policy: str
    target: str
    job_id: str
    status: str
    correct: bool
    fast: bool = Field(description="Correct and faster with 95% confidence (interval low > 1.0).")
    fast_point: bool = Field(default=False, description="Correct and point estimate > 1.0.")
    speedup: float | None = Field(description=(
        "The best's speedup: paired point (measured), cost-model ratio (estimated), or null."))
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_method: str | None = None
    significant: bool = False
    speedup_text: str = "not measured"
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
    created_at: UtcTime | None
    jobs: int
    jobs_finished: int
    finished: bool
    job_ids: list[str]
    metrics: list[SuiteMetricOut]
    problems: list[ProblemResultOut]
    load_failures: list[LoadFailureOut]
