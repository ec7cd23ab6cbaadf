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
from services.api.fleet import FleetView, fleet_worker, local_worker, queue_depths

router = APIRouter(prefix="/v1/fleet", tags=["fleet"], responses=ERROR_RESPONSES)


@router.get(
    "",
    summary="Workers and queue depths",
    description="Every worker and scheduler with its last heartbeat (and its age), current "
    "attempt, runner isolation level and status (`gone` once silent for `gone_after_s`, with "
    "`gone_at`); the depth of each queue, from the broker (Redis LLEN) when one is "
    "configured, else from pending attempts. Send the `ETag` of the last answer in "
    "`If-None-Match` to get 304 while no heartbeat arrived and no depth changed (ages and "
    "status aside: compute them from `last_heartbeat` and `gone_at`).",
    response_model=FleetView,
    responses=NOT_MODIFIED,
)
def fleet(request: Request, response: Response, token: BearerToken,
          db: DbDep) -> FleetView | Response:
    local = request.app.state.local_workers() if request.app.state.local_workers else []
    with session_scope(db) as session:
        authenticate(session, token)  # in this session: one connection per poll
        queues = queue_depths(session, request.app.state.broker_url)
        tag = fleet_tag(queries.workers_fingerprint(session),
                        [(q.queue, q.depth, q.source) for q in queues],
                        [w.model_dump(exclude={"heartbeat_age_s"}) for w in local])
        if is_current(request, tag):
            return not_modified(tag)
        settings = request.app.state.settings
        workers = [fleet_worker(w, settings) for w in queries.workers(session)]
        tag_response(response, tag)
        return FleetView(workers=workers + [local_worker(w) for w in local], queues=queues)
