"""Queue depths: Redis LLEN per Celery queue when a broker is configured, else pending attempts."""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from kernelband.scheduling.dispatch import QUEUE_CPU, QUEUE_LLM, QUEUE_RESULTS, gpu_queue
from services.api import queries
from services.api.redisllen import QueueLengths
from services.api.schemas import QueueDepth, Target

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
