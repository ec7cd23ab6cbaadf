"""SQLAlchemy 2 models: one metadata, identical on SQLite and Postgres.

Status values are plain strings (constants below) so SQLite and Postgres store them alike and a
migration never has to alter an enum type.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from kernelband.db.base import Base, utcnow
from kernelband.db.id_key_models import PublicIdKey as PublicIdKey

# The generation loop's tables live in their own module; re-exported so that one import
# of this module registers every table in the metadata.
from kernelband.db.loop_models import Skill as Skill
from kernelband.db.loop_models import Transcript as Transcript
from kernelband.db.webhook_models import Webhook as Webhook
from kernelband.db.webhook_models import WebhookDelivery as WebhookDelivery
from kernelband.default_policy import DEFAULT_POLICY

JOB_STATUSES = ("queued", "running", "completed", "cancelled", "failed")
TRACK_STATUSES = ("pending", "running", "accepting", "completed", "cancelled", "failed")
ATTEMPT_KINDS = ("generate", "compile", "profile", "verify")
ATTEMPT_STATES = ("pending", "dispatched", "done", "failed", "expired")
ACTIVE_ATTEMPT_STATES = ("pending", "dispatched", "expired")  # open: a result may still apply
ACTIVE_ATTEMPTS_SQL = f"state IN ({', '.join(map(repr, ACTIVE_ATTEMPT_STATES))})"  # the state index's rows
CANDIDATE_STATUSES = ("generated", "compiled", "rejected", "measured", "duplicate")
FINISHED_JOB_STATUSES = ("completed", "cancelled", "failed")


def sa_true() -> Any:
    """A boolean server default that reads alike on SQLite and Postgres."""
    return true()


def sa_false() -> Any:
    """The false counterpart of `sa_true`."""
    return false()


class Team(Base):
    """A tenant: owns tokens, problems and jobs."""

    __tablename__ = "teams"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(120), unique=True)
    # Off: the team's verified improvements are neither stored nor retrieved as examples.
    skill_library: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sa_true())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Operator-set quotas (None: no limit beyond the service-wide settings); kernelband/usage.py.
    quota_concurrent_jobs: Mapped[int | None] = mapped_column(Integer, default=None)
    quota_gpu_s_per_day: Mapped[float | None] = mapped_column(Float, default=None)
    quota_usd_per_day: Mapped[float | None] = mapped_column(Float, default=None)


class ApiToken(Base):
    """A bearer token; only its sha256 hash and a short display prefix are stored."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(120), default="")
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    # read | submit | admin (kernelband/auth_tokens.py SCOPES); the operator's CLI tokens and those
    # made before scopes existed are admin (the full power they had).
    scope: Mapped[str] = mapped_column(String(16), default="admin", server_default="admin")
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class Problem(Base):
    """A submitted kernel problem; the same content is stored once per team."""

    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("team_id", "content_hash", name="uq_problems_team_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(16))
    content_hash: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(Text)
    # KernelProblem.to_dict() from the sandboxed loader (cases, editable region, entry, ...).
    loaded: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Suite(Base):
    """A benchmark campaign: one job per (problem, policy) shares its id in `jobs.suite_id`."""

    __tablename__ = "suites"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    format: Mapped[str] = mapped_column(String(16))
    # Shared job settings (targets, policies, generator, budget) as submitted.
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # [{name, reason, line}] for problems the sandboxed loader refused.
    load_failures: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(Base):
    """One optimization run of a problem over one or more targets (one track each)."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    targets: Mapped[list[Any]] = mapped_column(default=list)
    policy: Mapped[str] = mapped_column(String(40), default=DEFAULT_POLICY)
    policy_params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    generator: Mapped[str] = mapped_column(String(16), default="rules")  # rules | llm
    model: Mapped[str] = mapped_column(String(200), default="")
    seed: Mapped[int] = mapped_column(Integer, default=0)
    budget_iterations: Mapped[int] = mapped_column(Integer, default=20)
    budget_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    budget_usd: Mapped[float | None] = mapped_column(Float, default=None)
    budget_wall_s: Mapped[float | None] = mapped_column(Float, default=None)
    parallelism: Mapped[int] = mapped_column(Integer, default=1)  # pulls in flight per track
    # Repair turns a failed child gets inside its pull (LLM generator only), and whether a
    # child equal (normalised source) to one already in the track is recorded, not re-evaluated.
    repair_turns: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    dedupe: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sa_true())
    # Sandbox limits of the job's runs (run_s, compile_s, config_compile_s; kernelband/sandbox/
    # limits.py, JOB_LIMITS); empty: the node's settings.
    limits: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    suite_id: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    # The name this job's problem was submitted with (problems are stored once per content, so
    # the problem row keeps the first name); None for jobs made before it was recorded.
    problem_name: Mapped[str | None] = mapped_column(String(200), default=None)
    tokens_used: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    cost_known: Mapped[bool] = mapped_column(Boolean, default=True)
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    # Bumped by the scheduler in every transaction that appends an event to the job (each
    # change the job detail shows comes with one) and by a cancel request; the API's ETags.
    # Not an ORM version counter: the API and the scheduler both write job rows.
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


class Track(Base):
    """One bandit run of a job on one target; `version` fences concurrent writers."""

    __tablename__ = "tracks"
    # Small rows rewritten in place where nothing vacuums (migration 0014_tracks_hot_updates)
    __table_args__ = (UniqueConstraint("job_id", "target", name="uq_tracks_job_target"),
                      {"postgresql_with": {"fillfactor": 50, "toast_tuple_target": 128}})
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    target: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    # The policy state without its frontier (PolicyState.to_dict(frontier=False)); deferred, as
    # only select/update read it. The frontier is append-only and lives in `frontier_entries`
    # (rows 0 .. frontier_size-1), so a pull writes its new entries, not the whole frontier.
    policy_state: Mapped[dict[str, Any] | None] = mapped_column(default=None, deferred=True)
    frontier_size: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    iterations_dispatched: Mapped[int] = mapped_column(Integer, default=0)
    iterations_done: Mapped[int] = mapped_column(Integer, default=0)
    original_candidate_id: Mapped[int | None] = mapped_column(
        ForeignKey("candidates.id", use_alter=True, ondelete="SET NULL"), default=None
    )
    best_candidate_id: Mapped[int | None] = mapped_column(
        ForeignKey("candidates.id", use_alter=True, ondelete="SET NULL"), default=None
    )
    original_time_ms: Mapped[float | None] = mapped_column(Float, default=None)
    best_time_ms: Mapped[float | None] = mapped_column(Float, default=None)
    best_speedup: Mapped[float | None] = mapped_column(Float, default=None)
    best_label: Mapped[str | None] = mapped_column(String(16), default=None)
    # The best's paired speedup interval (95%) and how it was measured; None for estimates,
    # the original itself and rows from before paired measurements. `best_speedup_final`: the
    # job's final step re-measured the best against the original, and these are that result.
    best_speedup_low: Mapped[float | None] = mapped_column(Float, default=None)
    best_speedup_high: Mapped[float | None] = mapped_column(Float, default=None)
    best_speedup_method: Mapped[str | None] = mapped_column(Text, default=None)
    best_speedup_final: Mapped[bool] = mapped_column(Boolean, default=False,
                                                     server_default=sa_false())
    held_out: Mapped[str | None] = mapped_column(String(16), default=None)  # passed | failed
    held_out_reason: Mapped[str | None] = mapped_column(Text, default=None)
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    version: Mapped[int] = mapped_column(Integer, default=1)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)

    __mapper_args__ = {"version_id_col": version}


class Attempt(Base):
    """One unit of work sent to a worker; applied at most once, re-dispatched up to max tries."""

    __tablename__ = "attempts"
    # Read: unfinished attempts by state; finished ones by time (the fleet view, usage). Postgres
    # indexes only those rows (0015), so finishing an attempt adds no state entry (nor inserting one a finished entry).
    __table_args__ = (Index("ix_attempts_state_lease", "state", "lease_expires_at",
                            postgresql_where=text(ACTIVE_ATTEMPTS_SQL)),
                      Index("ix_attempts_finished_at", "finished_at",
                            postgresql_where=text("finished_at IS NOT NULL")))
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    track_id: Mapped[int] = mapped_column(ForeignKey("tracks.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default="pending")
    decision_id: Mapped[str | None] = mapped_column(String(40), default=None)
    candidate_id: Mapped[int | None] = mapped_column(
        ForeignKey("candidates.id", use_alter=True, ondelete="SET NULL"), default=None
    )
    queue: Mapped[str] = mapped_column(String(40), default="")
    task_id: Mapped[str | None] = mapped_column(String(80), default=None)
    tries: Mapped[int] = mapped_column(Integer, default=0)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    lease_expires_at: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    dispatched_at: Mapped[datetime | None] = mapped_column(default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)  # a worker took this try
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class Candidate(Base):
    """A kernel variant in a track: the original (depth 0) or a generated child."""

    __tablename__ = "candidates"
    # The duplicate lookup probes (source, track) pairs (`loop.dedupe`): a source shared by
    # many tracks is read for the track asked about only.
    __table_args__ = (Index("ix_candidates_source_hash_track", "source_hash", "track_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    track_id: Mapped[int] = mapped_column(ForeignKey("tracks.id", ondelete="CASCADE"), index=True)
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("candidates.id", ondelete="SET NULL"), default=None
    )
    decision_id: Mapped[str | None] = mapped_column(String(40), default=None)
    strategy: Mapped[str | None] = mapped_column(String(40), default=None)
    editable: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="generated")
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    lineage_depth: Mapped[int] = mapped_column(Integer, default=0)
    # sha256 of the normalised source (kernelband.generate.normalize): duplicates share it.
    source_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    duplicate_of: Mapped[int | None] = mapped_column(
        ForeignKey("candidates.id", ondelete="SET NULL"), default=None
    )
    repair_of: Mapped[int | None] = mapped_column(  # the failed child this one repairs
        ForeignKey("candidates.id", ondelete="SET NULL"), default=None
    )
    turn: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # 0: first reply
    static_profile: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Measurement(Base):
    """A time for a candidate, always labelled measured or estimated."""

    __tablename__ = "measurements"
    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(
        ForeignKey("candidates.id", ondelete="CASCADE"), index=True
    )
    label: Mapped[str] = mapped_column(String(16))  # measured | estimated
    method: Mapped[str] = mapped_column(Text)  # how it was timed (protocol, checks, pairing)
    device: Mapped[str] = mapped_column(String(120))
    target: Mapped[str] = mapped_column(String(16))
    time_ms: Mapped[float] = mapped_column(Float)
    case_times: Mapped[list[Any]] = mapped_column(default=list)
    cv: Mapped[float | None] = mapped_column(Float, default=None)
    noisy: Mapped[bool] = mapped_column(Boolean, default=False)
    paired_ratio: Mapped[float | None] = mapped_column(Float, default=None)
    # PairedSpeedup against the original (kernelband.profile.paired): measured rows only.
    speedup: Mapped[float | None] = mapped_column(Float, default=None)
    speedup_low: Mapped[float | None] = mapped_column(Float, default=None)
    speedup_high: Mapped[float | None] = mapped_column(Float, default=None)
    speedup_rounds: Mapped[int | None] = mapped_column(Integer, default=None)
    speedup_method: Mapped[str | None] = mapped_column(Text, default=None)
    speedup_baseline: Mapped[str | None] = mapped_column(Text, default=None)
    features: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class FrontierRow(Base):
    """One entry of a track's bandit frontier (FrontierEntry.to_dict()), at its position."""

    __tablename__ = "frontier_entries"
    track_id: Mapped[int] = mapped_column(
        ForeignKey("tracks.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    entry: Mapped[dict[str, Any]] = mapped_column()


class ArmStat(Base):
    """Derived view of a track's policy state, rewritten at each update for dashboards."""

    __tablename__ = "arm_stats"
    __table_args__ = (
        UniqueConstraint("track_id", "cluster", "strategy", name="uq_arm_stats_arm"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    track_id: Mapped[int] = mapped_column(ForeignKey("tracks.id", ondelete="CASCADE"), index=True)
    cluster: Mapped[int] = mapped_column(Integer)
    strategy: Mapped[str] = mapped_column(String(40))
    pulls: Mapped[float] = mapped_column(Float, default=0.0)
    mean_reward: Mapped[float] = mapped_column(Float, default=0.0)
    masked: Mapped[bool] = mapped_column(Boolean, default=False)
    ucb_score: Mapped[float | None] = mapped_column(Float, default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Cluster(Base):
    """A behaviour cluster of a track's frontier (derived view of the policy state)."""

    __tablename__ = "clusters"
    __table_args__ = (UniqueConstraint("track_id", "cluster", name="uq_clusters_track_cluster"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    track_id: Mapped[int] = mapped_column(ForeignKey("tracks.id", ondelete="CASCADE"), index=True)
    cluster: Mapped[int] = mapped_column(Integer)
    size: Mapped[int] = mapped_column(Integer, default=0)
    representative_id: Mapped[int | None] = mapped_column(Integer, default=None)
    members: Mapped[list[Any]] = mapped_column(default=list)
    centroid: Mapped[list[Any]] = mapped_column(default=list)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    """An append-only progress record; `seq` increases strictly per job."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("job_id", "seq", name="uq_events_job_seq"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(40))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Worker(Base):
    """A worker process as last seen by its heartbeat."""

    __tablename__ = "workers"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    queue: Mapped[str] = mapped_column(String(40))
    target: Mapped[str | None] = mapped_column(String(16), default=None)
    gpu_name: Mapped[str | None] = mapped_column(String(120), default=None)
    versions: Mapped[dict[str, Any]] = mapped_column(default=dict)
    last_heartbeat: Mapped[datetime] = mapped_column(default=utcnow)
    current_attempt_id: Mapped[int | None] = mapped_column(Integer, default=None)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)


class LlmUsage(Base):
    """Tokens and cost of one generation; `cost_known` is False when the model has no price."""

    __tablename__ = "llm_usage"
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("attempts.id", ondelete="SET NULL"), default=None
    )
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    usd: Mapped[float] = mapped_column(Float, default=0.0)
    cost_known: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LeaderEpoch(Base):
    """Single row (id=1) whose epoch increases each time a scheduler becomes leader."""

    __tablename__ = "leader_epoch"
    id: Mapped[int] = mapped_column(primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    holder: Mapped[str] = mapped_column(String(200), default="")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
