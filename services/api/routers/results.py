"""What a job has produced: candidates, best kernels, bandit arms, events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse

from kernelband.db import session_scope
from kernelband.db.models import CANDIDATE_STATUSES, Problem
from kernelband.public_ids import public_payload
from kernelband.scheduling.stages import stage_times
from services.api import queries
from services.api.auth import authenticate_for_job
from services.api.best import best_kernel_file
from services.api.conditional import (
    NOT_MODIFIED,
    events_etag,
    is_current,
    not_modified,
    tag_response,
)
from services.api.deps import (
    EVENTS_LIMIT_DEFAULT,
    EVENTS_LIMIT_MAX,
    MAX_ID,
    BearerToken,
    CurrentTeam,
    DbDep,
    JobId,
)
from services.api.errors import ERROR_RESPONSES, ApiError
from services.api.ids import CandidateId, public
from services.api.schemas import (
    ArmOut,
    BanditOut,
    CandidateDetail,
    CandidateList,
    EventOut,
    EventPage,
    StageOut,
    Target,
)
from services.api.sse import (
    EVENT_STREAM,
    STREAM_HEADERS,
    job_stream,
    last_event_id,
    read_job_events,
    wants_stream,
)
from services.api.views import candidate_detail, candidate_out

router = APIRouter(prefix="/v1/jobs/{job_id}", tags=["results"], responses=ERROR_RESPONSES)


@router.get(
    "/candidates",
    summary="List a job's candidate kernels",
    description="Lineage (parent, depth), strategy, status, rejection reason and every "
    "measurement with its label.",
)
def list_candidates(
    job_id: JobId, team: CurrentTeam, db: DbDep,
    target: Annotated[Target | None, Query(description="Only this target's track.")] = None,
    status: Annotated[str | None, Query(description=f"One of {', '.join(CANDIDATE_STATUSES)}.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> CandidateList:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        if status is not None and status not in CANDIDATE_STATUSES:
            raise ApiError(
                422, "invalid_request",
                f"'status' must be one of {', '.join(CANDIDATE_STATUSES)}; got '{status}'.",
            )
        rows = queries.job_candidates(
            session, job.id, target.value if target else None, status, limit, offset
        )
        ms = queries.measurements_by_candidate(session, [c.id for c, _ in rows])
        return CandidateList(candidates=[candidate_out(c, t, ms[c.id]) for c, t in rows])


@router.get(
    "/candidates/{candidate_id}",
    summary="One candidate with its kernel source",
    description="Like an entry of the candidate list, plus the rewritten region (`editable`).",
)
def get_candidate(
    job_id: JobId, candidate_id: CandidateId, team: CurrentTeam, db: DbDep,
) -> CandidateDetail:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        candidate, track = queries.job_candidate(session, job.id, candidate_id)
        ms = queries.measurements_by_candidate(session, [candidate.id])
        return candidate_detail(candidate, track, ms[candidate.id])


@router.get(
    "/best",
    summary="Download the best kernel for a target",
    description="The complete problem module with the best verified kernel spliced in, "
    "headed by a provenance comment (job, candidate, lineage, time and its label).",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/x-python": {}}, "description": "The kernel module."}},
)
def download_best(
    job_id: JobId, team: CurrentTeam, db: DbDep,
    target: Annotated[Target | None, Query(
        description="Which GPU type's best kernel; may be left out when the job has one target.",
    )] = None,
) -> PlainTextResponse:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        name = _best_target(job_id, list(job.targets), target)
        track = queries.job_track(session, job, name)
        if track is None or track.best_candidate_id is None:
            raise ApiError(
                404, "no_best_kernel",
                f"Job {public('job', job_id)} has no measured kernel for '{name}' yet; poll "
                f"GET /v1/jobs/{public('job', job_id)} until its track shows a best result.",
            )
        problem = session.get(Problem, job.problem_id)
        assert problem is not None
        text = best_kernel_file(session, job, problem, track)
        filename = f"{job.problem_name or problem.name}.{name}.{public('job', job.id)}.py"
        return PlainTextResponse(
            text, media_type="text/x-python",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )


def _best_target(job_id: int, targets: list[str], target: Target | None) -> str:
    """The asked target, or the job's only one; 422 naming the choices when it is ambiguous."""
    if target is not None:
        return target.value
    if len(targets) == 1:
        return str(targets[0])
    raise ApiError(422, "target_required", f"Job {public('job', job_id)} has several targets "
                   f"({', '.join(targets)}); say which best kernel you want with "
                   f"?target=, e.g. ?target={targets[0]}.")


@router.get(
    "/tracks/{target}/bandit",
    summary="Bandit arm statistics of one track",
    description="One row per (cluster, strategy) arm: pulls, mean reward, whether the arm is "
    "masked (dimension saturated) and its UCB score as of the arm's last change.",
)
def bandit_arms(job_id: JobId, target: Target, team: CurrentTeam, db: DbDep) -> BanditOut:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        track = queries.job_track(session, job, target.value)
        arms = queries.arm_stats(session, track.id) if track is not None else []
        return BanditOut(
            job_id=public("job", job.id), target=target.value, total_pulls=sum(a.pulls for a in arms),
            pulls_done=track.iterations_done if track is not None else 0,
            pulls_dispatched=track.iterations_dispatched if track is not None else 0,
            arms=[
                ArmOut(cluster=a.cluster, strategy=a.strategy, pulls=a.pulls,
                       mean_reward=a.mean_reward, masked=a.masked, ucb_score=a.ucb_score)
                for a in arms
            ],
        )


@router.get(
    "/events",
    summary="A job's events: a page to poll, or a stream of server-sent events",
    description="Events with seq > after, oldest first. Poll again with after=next_after; "
    "has_more says a full page was returned and more are waiting. Send the `ETag` of the "
    "last answer in `If-None-Match` to get 304 while the job has not changed.\n\n"
    "With `Accept: text/event-stream` the answer is a stream instead: every event after "
    "`after` (or after the `Last-Event-ID` header a reconnecting client sends), then each new "
    "one as the scheduler commits it (`id:` its seq, `event:` its kind, `data:` the event as "
    "JSON), a `: heartbeat` comment when idle, and the end of the stream after the event that "
    "finishes the job. A finished job with nothing left to send answers 204.",
    response_model=EventPage,
    responses={**NOT_MODIFIED, 200: {"content": {EVENT_STREAM: {}}, "description": (
        "A page of events (JSON), or the event stream when asked for")},
        204: {"description": "Stream asked for, the job finished and every event was sent."}},
)
def list_events(
    job_id: JobId, token: BearerToken, db: DbDep, request: Request, response: Response,
    after: Annotated[int, Query(ge=0, le=MAX_ID, description="Return events with a larger seq.")] = 0,
    limit: Annotated[int, Query(ge=1, le=EVENTS_LIMIT_MAX)] = EVENTS_LIMIT_DEFAULT,
) -> EventPage | Response:
    streaming = wants_stream(request.headers.get("accept"))
    with session_scope(db) as session:
        _, version = authenticate_for_job(session, token, job_id)
        tag = events_etag(job_id, queries.found_version(job_id, version), after, limit)
        if not streaming:
            if is_current(request, tag):
                return not_modified(tag)
            events, more = queries.events_after(session, job_id, after, limit)
            tag_response(response, tag)
            return EventPage(
                events=[EventOut(seq=e.seq, kind=e.kind, payload=public_payload(e.payload),
                                 created_at=e.created_at) for e in events],
                next_after=events[-1].seq if events else after,
                has_more=more,
            )
    return _event_stream(request, db, token, job_id, after)  # its session comes after this one


def _event_stream(request: Request, db: DbDep, token: str, job_id: int, after: int) -> Response:
    """The job's event stream from `after` (or Last-Event-ID); 204 when there is nothing left."""
    start = last_event_id(request.headers.get("last-event-id"), after)
    events, _, finished, _ = read_job_events(db, job_id, start)
    if finished and not events:
        return Response(status_code=204)

    def still_allowed() -> bool:
        try:
            with session_scope(db) as session:
                return authenticate_for_job(session, token, job_id)[1] is not None
        except ApiError:
            return False

    settings = request.app.state.settings
    stream = job_stream(db, request.app.state.job_watcher, job_id, start,
                        settings.sse_heartbeat_s, still_allowed)
    return StreamingResponse(stream, media_type=EVENT_STREAM, headers=STREAM_HEADERS)


@router.get(
    "/stages",
    summary="Where a job's time goes",
    description="Per task kind (generate, compile, profile, verify): finished attempts, the "
    "workers' wall seconds per attempt (median, p90, total), the queue wait, and the parts a "
    "worker reported (correctness check, static profile, measurement).",
)
def list_stages(job_id: JobId, team: CurrentTeam, db: DbDep) -> list[StageOut]:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        return [StageOut(**s.to_dict()) for s in stage_times(session, job.id)]
