"""The worker fleet and its queues."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from kernelband.db import session_scope
from services.api import queries
from services.api.auth import authenticate
from services.api.conditional import (
    NOT_MODIFIED,
    fleet_tag,
    is_current,
    not_modified,
    tag_response,
)
from services.api.deps import BearerToken, DbDep
from services.api.errors import ERROR_RESPONSES
from services.api.fleet import queue_depths
from services.api.schemas import FleetOut, WorkerOut

router = APIRouter(prefix="/v1/fleet", tags=["fleet"], responses=ERROR_RESPONSES)


@router.get(
    "",
    summary="Workers and queue depths",
    description="Every worker with its last heartbeat (and its age) and current attempt; the "
    "depth of each queue, from the broker (Redis LLEN) when one is configured, else from "
    "pending attempts. Send the `ETag` of the last answer in `If-None-Match` to get 304 while "
    "no heartbeat arrived and no depth changed (ages aside: compute them from "
    "`last_heartbeat`).",
    response_model=FleetOut,
    responses=NOT_MODIFIED,
)
def fleet(request: Request, response: Response, token: BearerToken,
          db: DbDep) -> FleetOut | Response:
    local = request.app.state.local_workers() if request.app.state.local_workers else []
    with session_scope(db) as session:
        authenticate(session, token)  # in this session: one connection per poll
        queues = queue_depths(session, request.app.state.broker_url)
        tag = fleet_tag(queries.workers_fingerprint(session),
                        [(q.queue, q.depth, q.source) for q in queues],
                        [w.model_dump(exclude={"heartbeat_age_s"}) for w in local])
        if is_current(request, tag):
            return not_modified(tag)
        workers = [
            WorkerOut(
                name=w.name, queue=w.queue, target=w.target, gpu_name=w.gpu_name,
                heartbeat_age_s=round(queries.age_s(w.last_heartbeat) or 0.0, 3),
                last_heartbeat=w.last_heartbeat, current_attempt_id=w.current_attempt_id,
            )
            for w in queries.workers(session)
        ]
        tag_response(response, tag)
        return FleetOut(workers=workers + local, queues=queues)
