"""The worker fleet and its queues."""

from __future__ import annotations

from fastapi import APIRouter, Request

from kernelband.db import session_scope
from services.api import queries
from services.api.deps import CurrentTeam, DbDep
from services.api.errors import ERROR_RESPONSES
from services.api.fleet import queue_depths
from services.api.schemas import FleetOut, WorkerOut

router = APIRouter(prefix="/v1/fleet", tags=["fleet"], responses=ERROR_RESPONSES)


@router.get(
    "",
    summary="Workers and queue depths",
    description="Every worker with its heartbeat age and current attempt; the depth of each "
    "queue, from the broker (Redis LLEN) when one is configured, else from pending attempts.",
)
def fleet(request: Request, _team: CurrentTeam, db: DbDep) -> FleetOut:
    with session_scope(db) as session:
        workers = [
            WorkerOut(
                name=w.name, queue=w.queue, target=w.target, gpu_name=w.gpu_name,
                heartbeat_age_s=round(queries.age_s(w.last_heartbeat) or 0.0, 3),
                current_attempt_id=w.current_attempt_id,
            )
            for w in queries.workers(session)
        ]
        if request.app.state.local_workers is not None:
            workers += request.app.state.local_workers()
        return FleetOut(workers=workers, queues=queue_depths(session, request.app.state.broker_url))
