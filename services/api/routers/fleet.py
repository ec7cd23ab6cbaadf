"""The worker fleet, what it judged in a recent window, and its queues."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from kernelband.db import session_scope
from services.api import queries
from services.api.auth import authenticate
from services.api.conditional import (
    NOT_MODIFIED,
    digest_etag,
    fleet_tag,
    is_current,
    not_modified,
    tag_response,
)
from services.api.deps import BearerToken, DbDep
from services.api.errors import ERROR_RESPONSES
from services.api.fleet import (
    WINDOW_S_DEFAULT,
    WINDOW_S_MAX,
    WINDOW_S_MIN,
    FleetView,
    check_window,
    fleet_throughput,
    fleet_worker,
    local_worker,
    queue_depths,
    window_end,
)

router = APIRouter(prefix="/v1/fleet", tags=["fleet"], responses=ERROR_RESPONSES)

WindowS = Annotated[int, Query(description=(
    f"Seconds of the throughput window, up to the newest heartbeat: {WINDOW_S_MIN} to "
    f"{WINDOW_S_MAX}; default {WINDOW_S_DEFAULT}, the last hour."))]


@router.get(
    "",
    summary="Throughput, workers and queue depths",
    description="Per target, candidates judged per GPU-hour (per worker-hour on cpu, "
    "estimated: no GPU) and how busy its devices were over the last hour (`window_s` to "
    "choose), from the attempts a worker finished, as `kernelband suite` reports a suite. "
    "Every worker and scheduler with its last heartbeat (and its age), current "
    "attempt, runner isolation level and status (`gone` once silent for `gone_after_s`, with "
    "`gone_at`); the depth of each queue, from the broker (Redis LLEN) when one is "
    "configured, else from pending attempts. Send the `ETag` of the last answer in "
    "`If-None-Match` to get 304 while no heartbeat arrived and no depth changed (ages and "
    "status aside: compute them from `last_heartbeat` and `gone_at`); the throughput window "
    "ends at the newest heartbeat, so it moves only with the ETag.",
    response_model=FleetView,
    responses=NOT_MODIFIED,
)
def fleet(request: Request, response: Response, token: BearerToken, db: DbDep,
          window_s: WindowS = WINDOW_S_DEFAULT) -> FleetView | Response:
    check_window(window_s)
    local = request.app.state.local_workers() if request.app.state.local_workers else []
    with session_scope(db) as session:
        authenticate(session, token)  # in this session: one connection per poll
        queues = queue_depths(session, request.app.state.broker_url)
        fingerprint = queries.workers_fingerprint(session)
        # The default window keeps the plain tag, the one the 304 fast path also builds.
        tag = fleet_tag(fingerprint, [(q.queue, q.depth, q.source) for q in queues],
                        [w.model_dump(exclude={"heartbeat_age_s"}) for w in local])
        if window_s != WINDOW_S_DEFAULT:
            tag = digest_etag("fleet", (tag, window_s))
        if is_current(request, tag):
            return not_modified(tag)
        settings = request.app.state.settings
        workers = [fleet_worker(w, settings) for w in queries.workers(session)]
        throughput = fleet_throughput(session, window_end(fingerprint[2], local), window_s)
        tag_response(response, tag)
        return FleetView(throughput=throughput, workers=workers + [local_worker(w) for w in local],
                         queues=queues)
