"""The fleet view: what the service sells (candidates judged per GPU-hour over a recent
window, and how busy the devices were), each worker with whether it is alive or gone and how
its runners are isolated, and queue depths (Redis LLEN per Celery queue when a broker is
configured, else pending attempts)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.config import Settings
from kernelband.db.models import Attempt, Track, Worker
from kernelband.scheduling.dispatch import QUEUE_CPU, QUEUE_LLM, QUEUE_RESULTS, gpu_queue
from kernelband.suite.throughput import AttemptSpan, TargetThroughput, by_target
from services.api import queries
from services.api.errors import ApiError
from services.api.ids import public_or_none
from services.api.redisllen import QueueLengths
from services.api.schemas import QueueDepth, Target, WorkerOut
from services.api.timefmt import UtcTime

log = logging.getLogger(__name__)

KNOWN_QUEUES: tuple[str, ...] = (
    QUEUE_LLM, QUEUE_CPU, *(gpu_queue(t.value) for t in Target if t is not Target.cpu),
    QUEUE_RESULTS,
)


@lru_cache(maxsize=4)
def _redis_client(broker_url: str) -> Any:
    """One client (with its connection pool) per broker URL: a poll reuses connections."""
    import redis

    return redis.Redis.from_url(broker_url, socket_connect_timeout=0.5, socket_timeout=0.5)


class FleetWorkerOut(WorkerOut):
    """A worker or scheduler as last reported by its heartbeat, alive or gone."""

    status: Literal["alive", "gone"] = Field(
        "alive", description="At answer time: gone once no heartbeat arrived for "
        "`gone_after_s` (the scheduler then sends a gone worker's attempts again). Between "
        "polls, recompute it from `last_heartbeat` + `gone_after_s`.")
    gone_after_s: float | None = Field(
        None, description="Silence after which it counts as gone: the missed beats the "
        "scheduler allows times its heartbeat interval.")
    gone_at: UtcTime | None = Field(
        None, description="When it counted (or will count) as gone without another heartbeat.")
    isolation: str | None = Field(
        None, description="How its runners confine submitted code (`jail:bwrap`, "
        "`weak:setuid`, ...); null: not reported (a scheduler, an older worker).")


# GET /v1/fleet?window_s=: the last hour unless asked; a day at most keeps the read small.
WINDOW_S_DEFAULT, WINDOW_S_MIN, WINDOW_S_MAX = 3600, 60, 24 * 3600


class TargetThroughputOut(BaseModel):
    """What one target's devices did in the window, as `kernelband suite` reports a suite."""

    target: str
    judged: int = Field(description="Profile attempts a worker finished in the window: "
                        "candidates accepted or refused on the target.")
    devices: int = Field(description="Distinct workers that ran a profile or verify attempt of "
                         "the target in the window (attempts with no worker recorded, as in "
                         "embedded mode, count as one).")
    active_s: float = Field(description="The active window in seconds: from the first attempt "
                            "of any kind started (from `since` on) to the last one finished, "
                            "shared by every target.")
    busy_s: float = Field(description="Device-seconds busy: per device, the time at least one "
                          "of its profile or verify attempts was running (two at once count "
                          "once), summed over the devices.")
    per_hour: float = Field(description="Candidates judged per GPU-hour (per worker-hour on "
                            "cpu): `judged` x 3600 divided by (`devices` x `active_s`).")
    busy_pct: float = Field(description="100 x `busy_s` divided by (`devices` x `active_s`).")
    unit: Literal["GPU-hour", "worker-hour"] = Field(description="What `per_hour` is per.")
    estimated: bool = Field(description="True on cpu: timings are cost-model estimates and no "
                            "GPU ran.")
    summary: str = Field(description="The figures in words, as `kernelband suite` prints them.")


class FleetThroughput(BaseModel):
    """Candidates judged per GPU-hour and busy %, per target, over a recent window."""

    window_s: int = Field(description="The window asked for (`window_s`, default the last hour).")
    since: UtcTime | None = Field(description="Start of the window: `until` - `window_s`.")
    until: UtcTime | None = Field(description="End of the window: the newest heartbeat this view "
                                  "shows (never after answer time), so the figures change only "
                                  "together with the ETag; null: no heartbeat yet, no figures.")
    targets: list[TargetThroughputOut] = Field(description="Targets with an attempt a worker "
                                               "started and finished in the window.")


class FleetView(BaseModel):
    """GET /v1/fleet."""

    throughput: FleetThroughput
    workers: list[FleetWorkerOut]
    queues: list[QueueDepth]


def check_window(window_s: int) -> None:
    """422 for a window the view does not offer, saying which it does."""
    if not WINDOW_S_MIN <= window_s <= WINDOW_S_MAX:
        raise ApiError(422, "invalid_request",
                       f"'window_s': {window_s} is out of range; give the window in seconds, "
                       f"from {WINDOW_S_MIN} to {WINDOW_S_MAX} (default {WINDOW_S_DEFAULT}: "
                       "the last hour).")


def as_utc(moment: datetime) -> datetime:
    """An aware UTC instant; SQLite hands back naive UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def window_end(newest_beat: datetime | None, local: list[WorkerOut],
               now: datetime | None = None) -> datetime | None:
    """The newest heartbeat of the view (workers table or in-process workers), at most now.

    The ETag follows the heartbeats, so a window ending there changes when the ETag does: a
    304 never hides newer figures (results ingested since the newest beat wait for the next)."""
    beats = [as_utc(b) for b in (newest_beat, *(w.last_heartbeat for w in local)) if b is not None]
    return min(max(beats), now or datetime.now(UTC)) if beats else None


def recent_attempts(session: Session, since: datetime, until: datetime) -> list[AttemptSpan]:
    """Attempts a worker started and finished in (since, until], with the worker that answered
    (the scheduler keeps its name in the result); only the rows of the window are read."""
    worker = Attempt.result[("_worker", "name")].as_string()
    rows = session.execute(
        select(Track.target, Attempt.kind, Attempt.started_at, Attempt.finished_at, worker)
        .join(Track, Track.id == Attempt.track_id)
        .where(Attempt.finished_at > since, Attempt.finished_at <= until,
               Attempt.started_at.is_not(None))).all()
    return [AttemptSpan(str(target), str(kind), as_utc(start), as_utc(stop), name)
            for target, kind, start, stop, name in rows]


def throughput_out(cost: TargetThroughput) -> TargetThroughputOut:
    return TargetThroughputOut(
        target=cost.target, judged=cost.judged, devices=cost.devices, active_s=cost.window_s,
        busy_s=cost.busy_s, per_hour=cost.per_hour, busy_pct=cost.busy_pct,
        unit=cost.unit, estimated=cost.estimated,
        summary=cost.describe())


def fleet_throughput(session: Session, until: datetime | None,
                     window_s: int = WINDOW_S_DEFAULT) -> FleetThroughput:
    """Per target over the `window_s` seconds up to `until` (kernelband/suite/throughput.py)."""
    if until is None:
        return FleetThroughput(window_s=window_s, since=None, until=None, targets=[])
    since = until - timedelta(seconds=window_s)
    costs = by_target(recent_attempts(session, since, until), since=since)
    return FleetThroughput(window_s=window_s, since=since, until=until,
                           targets=[throughput_out(c) for c in costs])


def fleet_worker(row: Worker, settings: Settings, now: datetime | None = None) -> FleetWorkerOut:
    """One workers row as the fleet view shows it."""
    versions = row.versions or {}
    beat = row.last_heartbeat if row.last_heartbeat is None or row.last_heartbeat.tzinfo \
        else row.last_heartbeat.replace(tzinfo=UTC)
    interval = float(versions.get("heartbeat_interval_s") or settings.heartbeat_interval_s)
    gone_after = settings.worker_missed_beats * interval
    gone_at = None if beat is None else beat + timedelta(seconds=gone_after)
    at = now or datetime.now(UTC)
    isolation = versions.get("isolation")
    return FleetWorkerOut(
        name=row.name, queue=row.queue, target=row.target, gpu_name=row.gpu_name,
        heartbeat_age_s=round(queries.age_s(row.last_heartbeat) or 0.0, 3),
        last_heartbeat=row.last_heartbeat, current_attempt_id=public_or_none("att", row.current_attempt_id),
        status="gone" if gone_at is not None and at > gone_at else "alive",
        gone_after_s=gone_after, gone_at=gone_at,
        isolation=str(isolation) if isolation else None)


def local_worker(worker: WorkerOut) -> FleetWorkerOut:
    """An in-process worker (embedded mode): alive while the process answers."""
    return FleetWorkerOut(**worker.model_dump())


def broker_depths(broker_url: str, queues: tuple[str, ...] = KNOWN_QUEUES) -> dict[str, int]:
    """LLEN of each Celery queue list in Redis; raises when the broker cannot be reached."""
    pipe = _redis_client(broker_url).pipeline()
    for name in queues:
        pipe.llen(name)
    return {q: int(n) for q, n in zip(queues, pipe.execute(), strict=True)}


def queue_depths(session: Session, broker_url: str | None) -> list[QueueDepth]:
    """Depth per queue with its source; falls back to pending attempts if Redis is down."""
    if broker_url and broker_url.startswith(("redis://", "rediss://")):
        try:
            depths = broker_depths(broker_url)
            return [QueueDepth(queue=q, depth=n, source="broker") for q, n in depths.items()]
        except Exception as exc:  # the fleet view must still answer when the broker is down
            log.warning("broker unreachable for queue depths (%s); using pending attempts", exc)
    return pending_depths(queries.pending_attempts_by_queue(session))


def pending_depths(pending: dict[str, int]) -> list[QueueDepth]:
    """Depth per queue from pending attempts: every known queue, then any other in order."""
    names = list(KNOWN_QUEUES) + sorted(set(pending) - set(KNOWN_QUEUES))
    return [QueueDepth(queue=q, depth=pending.get(q, 0), source="pending_attempts") for q in names]


_lengths: dict[str, QueueLengths] = {}


async def broker_depths_async(broker_url: str,
                              queues: tuple[str, ...] = KNOWN_QUEUES) -> dict[str, int]:
    """`broker_depths` on the event loop (services/api/redisllen.py); raises where it cannot."""
    lengths = _lengths.get(broker_url)
    if lengths is None:
        lengths = _lengths[broker_url] = QueueLengths(broker_url)
    return await lengths(queues)
