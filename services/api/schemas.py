"""Request and response models of the REST API (the OpenAPI schema is generated from these)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernelband.default_policy import DEFAULT_POLICY
from services.api.timefmt import UtcTime

SUITE_ID_PREFIX = "suite-"  # the prefix of kernelband.suite.store.new_suite_id

ProblemFormatName = Literal["native", "tritonbench", "kernelbench"]


class Target(StrEnum):
    """GPU types a job can be optimised for (`cpu`: interpreter + cost-model estimate)."""

    rtx4090 = "rtx4090"
    a100 = "a100"
    h100 = "h100"
    h200 = "h200"
    cpu = "cpu"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemIn(_Strict):
    """The kernel problem file, as text."""

    source: str = Field(min_length=1, description="The complete problem module text.")
    format: ProblemFormatName = Field(default="native", description="File format of `source`.")
    perf_source: str = Field(default="", description=(
        "TritonBench-G only: the performance harness (NAME_perf.py text). Candidates are then "
        "timed on its inputs (get_input_tensors, to_cuda), call_op alone; without it only the "
        "test's calls into the editable region are timed."))
    name: str = Field(default="problem", min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.\-]+$",
        description="Short name used in listings and downloads.",
    )


class BudgetIn(_Strict):
    """Hard limits for the whole job; nothing more is dispatched once one is spent."""

    iterations: int = Field(default=20, ge=1, le=1000, description="Generations per track.")
    tokens: int | None = Field(default=None, ge=1, le=100_000_000, description="LLM tokens, all tracks.")
    usd: float | None = Field(default=None, gt=0, le=10_000, description="LLM cost in USD, all tracks.")
    wall_s: int = Field(default=3600, ge=10, le=7 * 24 * 3600, description="Wall-clock seconds.")


class BudgetOut(BaseModel):
    """A job's budget as stored. Unbounded on purpose: only requests are bounded (BudgetIn), and
    jobs made by the CLI, suites or the repository may carry larger budgets."""

    iterations: int = Field(description="Generations per track.")
    tokens: int | None = Field(default=None, description="LLM tokens, all tracks.")
    usd: float | None = Field(default=None, description="LLM cost in USD, all tracks.")
    wall_s: int = Field(description="Wall-clock seconds.")


class GeneratorIn(_Strict):
    """Which generator writes rewrites; an empty model means the offline rules generator."""

    model: str = Field(default="", max_length=200, description="litellm model name, or '' for rules.")
    repair_turns: int = Field(
        default=1, ge=0, le=5,
        description="Repair turns a failed child gets inside its pull (LLM only; the rules "
                    "generator never repairs). Each turn is an attempt within the budgets.")
    dedupe: bool = Field(
        default=True, description="Record a child equal to one already in the track (comments, "
                                  "docstrings and formatting aside) as its duplicate instead "
                                  "of evaluating it again.")


class LimitsIn(_Strict):
    """Sandbox limits of this job's runs; a field left out keeps the node's setting."""

    run_s: float | None = Field(
        default=None, gt=0, le=3600,
        description="Run time of one sandboxed run, compilation aside (node default "
                    "KERNELBAND_SANDBOX_TIMEOUT_S, 60 s; in the CPU interpreter 120 s).")
    compile_s: float | None = Field(
        default=None, gt=0, le=4 * 3600,
        description="Triton compilation and autotuning in one sandboxed run, budgeted apart "
                    "from the run time (node default KERNELBAND_SANDBOX_COMPILE_S, 240 s).")
    config_compile_s: float | None = Field(
        default=None, ge=0, le=4 * 3600,
        description="An autotune config still compiling after this long is left out of its "
                    "tuning round once another config compiled; 0 waits for every config "
                    "(node default KERNELBAND_SANDBOX_CONFIG_COMPILE_S, 120 s).")

    def fields(self) -> dict[str, float]:
        """The limits set, by name (what jobs.limits stores)."""
        return {k: float(v) for k, v in self.model_dump(exclude_none=True).items()}


class JobCreate(_Strict):
    """POST /v1/jobs body."""

    problem: ProblemIn
    targets: list[Target] = Field(min_length=1, max_length=5, description="One track per target.")
    policy: str = Field(default=DEFAULT_POLICY, min_length=1, max_length=64)
    policy_params: dict[str, Any] = Field(default_factory=dict)
    generator: GeneratorIn = Field(default_factory=lambda: GeneratorIn())
    budget: BudgetIn = Field(default_factory=lambda: BudgetIn())
    parallelism: int = Field(default=4, ge=1, le=64, description="Pulls in flight per track.")
    limits: LimitsIn = Field(default_factory=lambda: LimitsIn(),
                             description="Sandbox limits of the job's runs (compile-heavy kernels).")
    suite: str | None = Field(
        default=None, max_length=64,  # jobs.suite_id is String(64)
        description="Optional suite label to filter on; labels starting with 'suite-' are "
                    "reserved for suites created by POST /v1/suites.")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)

    @field_validator("targets")
    @classmethod
    def _unique_targets(cls, value: list[Target]) -> list[Target]:
        if len(set(value)) != len(value):
            raise ValueError("each target may appear once; remove the duplicates")
        return value

    @field_validator("suite")
    @classmethod
    def _free_suite_label(cls, value: str | None) -> str | None:
        # Jobs of a real suite count as one job against the quota: a label may not join one.
        if value is not None and value.startswith(SUITE_ID_PREFIX):
            raise ValueError(f"labels starting with '{SUITE_ID_PREFIX}' are reserved for suites "
                             "created by POST /v1/suites; choose another label")
        return value


class Spend(BaseModel):
    """What a job has used so far (usd_known is False when a model has no known price)."""

    iterations: int = 0
    tokens: int = 0
    usd: float = 0.0
    usd_known: bool = True
    wall_s: float = 0.0


class SpeedupOut(BaseModel):
    """A speedup over the original as users see it: measured ones are paired (the candidate and
    the original interleaved in one runner session) and carry their 95% interval; estimates
    carry none; a measurement never paired against the original has no speedup (null)."""

    speedup: float | None = Field(default=None, description=(
        "Original time / this kernel's time on the same target: the paired point estimate when "
        "measured, the cost model's ratio when estimated, null when not measured."))
    speedup_low: float | None = Field(default=None, description="95% interval, lower bound (measured only).")
    speedup_high: float | None = Field(default=None, description="95% interval, upper bound (measured only).")
    speedup_method: str | None = Field(default=None, description="How the speedup was paired and its interval computed.")
    significant: bool = Field(default=False, description=(
        "Faster with 95% confidence: measured and speedup_low > 1.0."))
    speedup_text: str = Field(default="not measured", description=(
        "As shown to people: '1.18x [1.12, 1.24]', '1.01x [0.97, 1.05], no significant "
        "speedup', '1.30x estimated', '1.00x original' or 'not measured'."))


class BestOut(SpeedupOut):
    """The best kernel of one track so far, with the label (measured | estimated) of its time."""

    candidate_id: str | None
    time_ms: float | None
    label: str | None
    method: str | None = None
    device: str | None = None
    speedup_final: bool = Field(default=False, description=(
        "The job's final step re-measured this best against the original: the reported speedup."))


class TrackOut(BaseModel):
    """One bandit run of a job, for one target (status `pending` until the scheduler starts it)."""

    target: str
    status: str
    iterations_dispatched: int = 0
    iterations_done: int = 0
    original_time_ms: float | None = None
    best: BestOut | None = None
    held_out: str | None = Field(default=None, description="passed | failed once the best is verified.")
    reason: str | None = None


class ProblemOut(BaseModel):
    """A stored problem (content-hashed)."""

    id: str = Field(description="Public id, prob_ and 13 characters.")
    name: str
    format: str
    content_hash: str


class JobOut(BaseModel):
    """A job with its tracks, best results and spend."""

    id: str = Field(description="Public id, job_ and 13 characters (opaque: not ordered).")
    status: str
    cancel_requested: bool
    problem: ProblemOut
    targets: list[str]
    policy: str
    policy_params: dict[str, Any]
    generator: str
    model: str
    repair_turns: int = 1
    dedupe: bool = True
    seed: int
    budget: BudgetOut
    parallelism: int
    limits: dict[str, float] = Field(default_factory=dict,
                                     description="The job's own sandbox limits (empty: the node's).")
    suite: str | None
    created_at: UtcTime | None
    started_at: UtcTime | None = None
    finished_at: UtcTime | None = None
    reason: str | None = None
    tracks: list[TrackOut] = []
    spend: Spend = Field(default_factory=lambda: Spend())


class JobSummary(BaseModel):
    """A job in a listing."""

    id: str = Field(description="Public id, job_ and 13 characters.")
    status: str
    problem_name: str
    targets: list[str]
    policy: str
    suite: str | None
    created_at: UtcTime | None


class JobList(BaseModel):
    """GET /v1/jobs."""

    jobs: list[JobSummary]
    total: int


class SignatureOut(BaseModel):
    """The hardware signature h the bandit masks and samples parents with."""

    sm_pct: float = Field(description="SM throughput, % of peak.")
    dram_pct: float = Field(description="DRAM throughput, % of peak.")
    l2_pct: float = Field(description="L2 throughput, % of peak.")
    source: str = Field(description="ncu (Nsight Compute on the GPU) | estimate (cost model).")
    note: str = Field(default="", description="Why h is an estimate where ncu was wanted.")


class MeasurementOut(SpeedupOut):
    """One timing of a candidate; `label` says measured or estimated."""

    target: str
    label: str = Field(description="measured | estimated")
    method: str
    device: str
    time_ms: float
    cv: float | None = None
    noisy: bool = False
    signature: SignatureOut | None = None


class CandidateOut(BaseModel):
    """One generated kernel: lineage, strategy, status and measurements."""

    id: str = Field(description="Public id, cand_ and 13 characters (opaque: not ordered).")
    target: str
    parent_id: str | None
    lineage_depth: int
    strategy: str | None
    status: str
    reason: str | None = Field(default=None, description="Why it was rejected, e.g. wrong_result:case=3.")
    created_at: UtcTime | None = None
    measurements: list[MeasurementOut] = []
    turn: int = Field(default=0, description="0: the first reply of its pull; n: repair turn n.")
    repair_of: str | None = Field(default=None, description="The failed child this one repairs.")
    duplicate_of: str | None = Field(
        default=None, description="The candidate with the same normalised source (not re-run).")


class CandidateDetail(CandidateOut):
    """One candidate with the kernel region it contains."""

    editable: str = Field(description="The rewritten region (kernels and entry function).")


class CandidateList(BaseModel):
    """GET /v1/jobs/{id}/candidates."""

    candidates: list[CandidateOut]


class ArmOut(BaseModel):
    """One bandit arm: (cluster, strategy)."""

    cluster: int
    strategy: str
    pulls: float = Field(description="The policy's count of this arm, prior pseudo-counts "
                                     "included (fractional); whole pulls are per track.")
    mean_reward: float
    masked: bool = Field(description="True when the cluster is saturated in this dimension.")
    ucb_score: float | None = Field(
        default=None, description="mean + c*sqrt(ln t / pulls) when the arm's pulls, mean or "
        "mask last changed.")


class BanditOut(BaseModel):
    """GET /v1/jobs/{id}/tracks/{target}/bandit."""

    job_id: str
    target: str
    pulls_done: int = Field(default=0, description="Whole pulls answered on this track.")
    pulls_dispatched: int = Field(default=0, description="Whole pulls sent (answered or not).")
    total_pulls: float = Field(description=(
        "The policy's count over all arms: whole pulls plus the prior's pseudo-counts, so it "
        "can be fractional and larger than pulls_done."))
    arms: list[ArmOut]


class EventOut(BaseModel):
    """One job event; `seq` increases strictly per job."""

    seq: int
    kind: str
    payload: dict[str, Any] = {}
    created_at: UtcTime | None = None


class EventPage(BaseModel):
    """A page of events after a sequence number; poll again with `after=next_after`."""

    events: list[EventOut]
    next_after: int
    has_more: bool


class StageOut(BaseModel):
    """One task kind of a job: finished attempts and their wall seconds on the workers."""

    kind: str = Field(description="generate | compile | profile | verify")
    finished: int
    failed: int = Field(description="Attempts with no usable answer after every try.")
    work_median_s: float = Field(description="Worker time per attempt (start beat to result).")
    work_p90_s: float
    work_total_s: float
    wait_median_s: float | None = Field(
        description="Queue wait per attempt (sent to a worker taking it); null: not recorded.")
    parts: dict[str, float] = Field(
        description="Median seconds of each part the worker reported (check, static, measure).")
    parts_total_s: dict[str, float] = Field(
        default_factory=dict, description="Each part's seconds summed over the attempts.")


class WorkerOut(BaseModel):
    """A worker as last reported by its heartbeat."""

    name: str
    queue: str
    target: str | None = None
    gpu_name: str | None = None
    heartbeat_age_s: float = Field(description="Seconds since `last_heartbeat`, at answer time.")
    last_heartbeat: UtcTime | None = None
    current_attempt_id: str | None = Field(default=None, description="Public id (att_...).")


class QueueDepth(BaseModel):
    """Waiting tasks per queue and where the number comes from."""

    queue: str
    depth: int
    source: Literal["broker", "pending_attempts"]


class FleetOut(BaseModel):
    """GET /v1/fleet."""

    workers: list[WorkerOut]
    queues: list[QueueDepth]


class Health(BaseModel):
    """GET /healthz and /readyz."""

    status: str
    detail: str | None = None
