"""The fleet view: each worker with whether it is alive or gone and how its runners are
isolated, and queue depths (Redis LLEN per Celery queue when a broker is configured, else
pending attempts)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from kernelband.config import Settings
from kernelband.db.models import Worker
from kernelband.scheduling.dispatch import QUEUE_CPU, QUEUE_LLM, QUEUE_RESULTS, gpu_queue
from services.api import queries
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


class FleetView(BaseModel):
    """GET /v1/fleet."""

    workers: list[FleetWorkerOut]
    queues: list[QueueDepth]


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
