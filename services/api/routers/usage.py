"""GET /v1/usage: what the team spent, per job and per day, and its quotas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from kernelband import usage
from kernelband.db import session_scope
from services.api import queries
from services.api.deps import CurrentTeam, DbDep, SettingsDep
from services.api.errors import ERROR_RESPONSES
from services.api.ids import public
from services.api.timefmt import UtcTime

router = APIRouter(tags=["usage"], responses=ERROR_RESPONSES)


class SpendOut(BaseModel):
    """Worker seconds by kind, LLM tokens and cost (`usd_known` False: a model had no price)."""

    gpu_s: dict[str, float] = Field(description="GPU worker seconds by GPU type.")
    gpu_s_total: float
    cpu_s: float = Field(description="CPU worker seconds (compile; the cpu target's checks).")
    llm_tokens: int
    usd: float
    usd_known: bool


class DayUsage(SpendOut):
    """One UTC day."""

    day: str = Field(description="YYYY-MM-DD (UTC).")


class JobUsage(SpendOut):
    """One job, within the window."""

    job_id: str


class QuotasOut(BaseModel):
    """The operator's limits for the team (null: the service default or none)."""

    concurrent_jobs: int = Field(description="Unfinished jobs at once (a suite counts once).")
    gpu_s_per_day: float | None
    usd_per_day: float | None


class TodayOut(BaseModel):
    """What today's quotas are measured against; they reset at `resets_at`."""

    unfinished_jobs: int
    gpu_s: float
    usd: float
    resets_at: UtcTime
    over_quota: str | None = Field(description="The daily quota used up, if any.")


class UsageOut(BaseModel):
    """GET /v1/usage."""

    since: UtcTime
    until: UtcTime
    quotas: QuotasOut
    today: TodayOut
    days: list[DayUsage]
    jobs: list[JobUsage]


@router.get(
    "/v1/usage", summary="What your team spent, per job and per day",
    description="From the attempts' recorded times (a finished attempt's worker seconds, on "
    "the day it finished, by queue: gpu.<type> or cpu) and the LLM calls' tokens and cost, "
    "over the last `days` UTC days; with the team's quotas and today's use against them.",
)
def get_usage(team: CurrentTeam, db: DbDep, settings: SettingsDep,
              days: Annotated[int, Query(ge=1, le=90, description="UTC days, today included.")] = 7,
              ) -> UsageOut:
    now = datetime.now(UTC)
    since = usage.day_start(now) - timedelta(days=days - 1)
    with session_scope(db) as session:
        by_job, by_day = usage.team_usage(session, team.id, since, now)
        quotas = usage.team_quotas(session, team.id)
        unfinished = queries.active_job_count(session, team.id)
        gpu = usage.gpu_seconds_today(session, [team.id], now).get(team.id, 0.0)
        usd = usage.usd_today(session, [team.id], now).get(team.id, 0.0)
        breach = usage.teams_over_quota(session, now).get(team.id)
    concurrent = quotas["concurrent_jobs"]
    return UsageOut(
        since=since, until=now,
        quotas=QuotasOut(concurrent_jobs=int(concurrent if concurrent is not None
                                             else settings.max_concurrent_jobs_per_team),
                         gpu_s_per_day=quotas["gpu_s_per_day"], usd_per_day=quotas["usd_per_day"]),
        today=TodayOut(unfinished_jobs=unfinished, gpu_s=round(gpu, 3), usd=round(usd, 6),
                       resets_at=usage.day_start(now) + timedelta(days=1),
                       over_quota=breach.limit if breach else None),
        days=[DayUsage(day=d.isoformat(), **s.to_dict()) for d, s in sorted(by_day.items())],
        jobs=[JobUsage(job_id=public("job", j), **s.to_dict()) for j, s in sorted(by_job.items())],
    )
