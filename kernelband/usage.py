"""What teams spend (GPU and CPU seconds, LLM tokens, USD) and the operator's per-team quotas.

Seconds come from the attempts' recorded times: a finished attempt's worker time is
`finished_at - started_at` (the worker took the try; `dispatched_at` where no start was
recorded), counted on the day it finished (UTC), on its queue: `gpu.<type>` is GPU time of that
type, `cpu` CPU time (compile, and the `cpu` target's checks and estimates); generation time on
the `llm` queue is counted as tokens and USD from `llm_usage`, not as seconds.

`teams_over_quota` is what the scheduler asks before dispatching: the teams that spent their
GPU-seconds or USD of the day; the API refuses their submissions with 429 as well.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Float, cast, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from kernelband.db.models import Attempt, Job, LlmUsage, Team

GPU_QUEUE_PREFIX = "gpu."
CPU_QUEUE = "cpu"
QUOTA_NAMES = ("concurrent_jobs", "gpu_s_per_day", "usd_per_day")


@dataclass
class Spend:
    """Spend of one job or one day."""

    gpu_s: dict[str, float] = field(default_factory=dict)  # by GPU type (h100, ...)
    cpu_s: float = 0.0
    llm_tokens: int = 0
    usd: float = 0.0
    usd_known: bool = True

    def add_seconds(self, queue: str, seconds: float) -> None:
        """Count one finished attempt's worker seconds on its queue."""
        if queue.startswith(GPU_QUEUE_PREFIX):
            kind = queue.removeprefix(GPU_QUEUE_PREFIX)
            self.gpu_s[kind] = self.gpu_s.get(kind, 0.0) + seconds
        elif queue == CPU_QUEUE:
            self.cpu_s += seconds

    def to_dict(self) -> dict[str, Any]:
        """Rounded for answers (milliseconds, micro-dollars)."""
        return {"gpu_s": {k: round(v, 3) for k, v in sorted(self.gpu_s.items())},
                "gpu_s_total": round(sum(self.gpu_s.values()), 3), "cpu_s": round(self.cpu_s, 3),
                "llm_tokens": self.llm_tokens, "usd": round(self.usd, 6),
                "usd_known": self.usd_known}


@dataclass(frozen=True)
class QuotaBreach:
    """A team over one of its daily quotas: which, how much, and when it resets."""

    team_id: int
    limit: str  # gpu_s_per_day | usd_per_day | concurrent_jobs
    used: float
    allowed: float
    resets_at: datetime | None  # None: when one of the team's jobs finishes

    def message(self) -> str:
        """What was exceeded and when it frees up, for a 429 or a scheduler log line."""
        if self.limit == "concurrent_jobs":
            return (f"Your team has {self.used:.0f} unfinished jobs and the limit is "
                    f"{self.allowed:g} (quota concurrent_jobs); it frees up when one of your "
                    "jobs finishes.")
        when = (f"it resets at {self.resets_at.isoformat().replace('+00:00', 'Z')}"
                if self.resets_at else "it resets at the next UTC midnight")
        what = {"gpu_s_per_day": f"{self.used:.1f} GPU-seconds today",
                "usd_per_day": f"${self.used:.4f} of LLM cost today"}[self.limit]
        return (f"Your team's quota {self.limit} ({self.allowed:g}) is used up: {what}; {when}. "
                "Ask the operator to raise it (kernelband quotas set) if you need more.")


def day_start(moment: datetime) -> datetime:
    """00:00 UTC of the moment's day."""
    return datetime.combine(moment.astimezone(UTC).date(), time(), tzinfo=UTC)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite


def _worker_seconds(started: datetime | None, dispatched: datetime | None,
                    finished: datetime | None) -> float:
    begin = started or dispatched
    if begin is None or finished is None:
        return 0.0
    return max(0.0, (_aware(finished) - _aware(begin)).total_seconds())


def team_usage(session: Session, team_id: int, since: datetime,
               until: datetime) -> tuple[dict[int, Spend], dict[date, Spend]]:
    """The team's spend per job and per UTC day, over attempts and LLM calls in [since, until)."""
    jobs: dict[int, Spend] = defaultdict(Spend)
    days: dict[date, Spend] = defaultdict(Spend)
    attempts = session.execute(
        select(Attempt.job_id, Attempt.queue, Attempt.started_at, Attempt.dispatched_at,
               Attempt.finished_at).join(Job, Job.id == Attempt.job_id)
        .where(Job.team_id == team_id, Attempt.finished_at >= since, Attempt.finished_at < until))
    for job_id, queue, started, dispatched, finished in attempts:
        seconds = _worker_seconds(started, dispatched, finished)
        jobs[job_id].add_seconds(queue or "", seconds)
        days[_aware(finished or until).date()].add_seconds(queue or "", seconds)
    calls = session.execute(
        select(LlmUsage.job_id, LlmUsage.tokens, LlmUsage.usd, LlmUsage.cost_known,
               LlmUsage.created_at).join(Job, Job.id == LlmUsage.job_id)
        .where(Job.team_id == team_id, LlmUsage.created_at >= since,
               LlmUsage.created_at < until))
    for job_id, tokens, usd, known, created in calls:
        for spend in (jobs[job_id], days[_aware(created).date()]):
            spend.llm_tokens += int(tokens or 0)
            spend.usd += float(usd or 0.0)
            spend.usd_known = spend.usd_known and bool(known)
    return dict(jobs), dict(days)


def _seconds_sql(session: Session) -> ColumnElement[Any]:
    """finished_at - coalesce(started_at, dispatched_at) in seconds, in this database's SQL."""
    begin = func.coalesce(Attempt.started_at, Attempt.dispatched_at)
    if session.get_bind().dialect.name == "postgresql":
        return func.extract("epoch", Attempt.finished_at - begin)
    return (func.julianday(Attempt.finished_at) - func.julianday(begin)) * 86400.0


def gpu_seconds_today(session: Session, team_ids: list[int], now: datetime) -> dict[int, float]:
    """GPU worker seconds of attempts finished today (UTC), per team."""
    if not team_ids:
        return {}
    rows = session.execute(
        select(Job.team_id, func.sum(cast(_seconds_sql(session), Float)))
        .join(Job, Job.id == Attempt.job_id)
        .where(Job.team_id.in_(team_ids), Attempt.queue.startswith(GPU_QUEUE_PREFIX),
               Attempt.finished_at >= day_start(now))
        .group_by(Job.team_id))
    return {int(team): float(total or 0.0) for team, total in rows}


def usd_today(session: Session, team_ids: list[int], now: datetime) -> dict[int, float]:
    """LLM cost of calls made today (UTC), per team."""
    if not team_ids:
        return {}
    rows = session.execute(
        select(Job.team_id, func.sum(LlmUsage.usd)).join(Job, Job.id == LlmUsage.job_id)
        .where(Job.team_id.in_(team_ids), LlmUsage.created_at >= day_start(now))
        .group_by(Job.team_id))
    return {int(team): float(total or 0.0) for team, total in rows}


def teams_over_quota(session: Session, now: datetime | None = None) -> dict[int, QuotaBreach]:
    """Teams that used up a daily quota (GPU-seconds or USD per day), by team id.

    Only teams with a daily quota set are read, with one aggregate query per kind, so the
    scheduler can ask before each dispatch pass. Concurrent jobs are a submission limit
    (`concurrency_breach`): running jobs of a team over it are not stopped."""
    now = now or datetime.now(UTC)
    limited = session.execute(select(Team.id, Team.quota_gpu_s_per_day, Team.quota_usd_per_day)
                              .where((Team.quota_gpu_s_per_day.is_not(None))
                                     | (Team.quota_usd_per_day.is_not(None)))).all()
    if not limited:
        return {}
    resets = day_start(now) + timedelta(days=1)
    gpu = gpu_seconds_today(session, [t for t, g, _ in limited if g is not None], now)
    usd = usd_today(session, [t for t, _, u in limited if u is not None], now)
    over: dict[int, QuotaBreach] = {}
    for team_id, gpu_quota, usd_quota in limited:
        if gpu_quota is not None and gpu.get(team_id, 0.0) >= gpu_quota:
            over[team_id] = QuotaBreach(team_id, "gpu_s_per_day", gpu[team_id], gpu_quota, resets)
        elif usd_quota is not None and usd.get(team_id, 0.0) >= usd_quota:
            over[team_id] = QuotaBreach(team_id, "usd_per_day", usd[team_id], usd_quota, resets)
    return over


def concurrency_breach(session: Session, team_id: int, active: int,
                       default_limit: int) -> QuotaBreach | None:
    """`active` unfinished jobs at or over the team's limit (its quota, else `default_limit`)."""
    quota = session.scalar(select(Team.quota_concurrent_jobs).where(Team.id == team_id))
    allowed = quota if quota is not None else default_limit
    if active >= allowed:
        return QuotaBreach(team_id, "concurrent_jobs", float(active), float(allowed), None)
    return None


def team_quotas(session: Session, team_id: int) -> dict[str, float | None]:
    """The operator's quotas of one team (None: not set)."""
    row = session.execute(select(Team.quota_concurrent_jobs, Team.quota_gpu_s_per_day,
                                 Team.quota_usd_per_day).where(Team.id == team_id)).one()
    return dict(zip(QUOTA_NAMES, row, strict=True))


def set_quotas(session: Session, team_id: int, **quotas: float | None) -> None:
    """Set (a number) or clear (None) the named quotas of a team; unnamed ones stay."""
    team = session.get_one(Team, team_id)
    for name, value in quotas.items():
        if name not in QUOTA_NAMES:
            raise ValueError(f"unknown quota '{name}'; quotas are {', '.join(QUOTA_NAMES)}")
        setattr(team, f"quota_{name}", int(value) if name == "concurrent_jobs" and value is not None
                else value)
