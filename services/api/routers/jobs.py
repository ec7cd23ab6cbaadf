"""Jobs: submit, list, inspect, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from kernelband.db import session_scope
from kernelband.db.models import FINISHED_JOB_STATUSES, JOB_STATUSES, Job, Problem
from kernelband.sandbox import job_limits
from services.api import queries, submission
from services.api.auth import authenticate_for_job
from services.api.conditional import NOT_MODIFIED, is_current, job_etag, not_modified, tag_response
from services.api.deps import (
    MAX_ID,
    BearerToken,
    CurrentTeam,
    DbDep,
    JobId,
    ProblemLoaderDep,
    SettingsDep,
    SubmittingTeam,
)
from services.api.errors import ERROR_RESPONSES, ApiError, ErrorBody
from services.api.ids import public
from services.api.problems import check_size
from services.api.schemas import JobCreate, JobList, JobOut, Target
from services.api.views import job_out, job_summary

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERROR_RESPONSES)

JobStatus = Annotated[str | None, Query(description=f"One of {', '.join(JOB_STATUSES)}.")]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Submit a kernel problem for optimization",
    description=(
        "Validates the problem in a sandbox (an invalid file is rejected with the loader's "
        "reason), stores it content-hashed, and queues a job with one bandit track per target."
    ),
    responses={
        413: {"model": ErrorBody, "description": "The source is larger than the server accepts."},
        429: {"model": ErrorBody, "description": "The team has too many unfinished jobs."},
    },
)
def create_job(
    body: JobCreate, team: SubmittingTeam, db: DbDep, settings: SettingsDep,
    loader: ProblemLoaderDep, response: Response,
) -> JobOut:
    team_id = team.id
    check_size(body.problem.source, settings.max_source_bytes)
    submission.check_model(body.generator.model, settings)
    submission.check_translation(body)
    submission.validate_policy(body.policy, body.policy_params)
    with session_scope(db) as session:
        submission.check_concurrency(session, team_id, settings)
        with job_limits(body.limits.fields()):  # loading runs the file: the job's limits apply
            problem = submission.stored_problem(session, team_id, body, loader)
        # The load may have taken seconds: count again, under the team lock, before inserting.
        submission.check_concurrency(session, team_id, settings, lock=True)
        job = submission.new_job(team_id, problem, body)
        session.add(job)
        session.commit()
        response.headers["Location"] = f"/v1/jobs/{public('job', job.id)}"
        return job_out(session, job, problem)


@router.get(
    "",
    summary="List your team's jobs",
    description="Newest first; filter by status, target or suite.",
)
def list_jobs(
    team: CurrentTeam, db: DbDep,
    status_: Annotated[str | None, Query(alias="status", description=f"One of {', '.join(JOB_STATUSES)}.")] = None,
    target: Annotated[Target | None, Query(description="Jobs that include this target.")] = None,
    suite: Annotated[str | None, Query(max_length=64, description="Suite label or suite id.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> JobList:
    if status_ is not None and status_ not in JOB_STATUSES:
        raise ApiError(
            422, "invalid_request",
            f"'status' must be one of {', '.join(JOB_STATUSES)}; got '{status_}'.",
        )
    with session_scope(db) as session:
        rows, total = queries.list_jobs(
            session, team.id, status=status_, target=target.value if target else None,
            suite=suite, limit=limit, offset=offset,
        )
        return JobList(jobs=[job_summary(j, p) for j, p in rows], total=total)


@router.get(
    "/{job_id}",
    summary="Inspect a job",
    description="Status per track, the best speedup per target with its label "
    "(measured | estimated), and what the job has spent. Send the `ETag` of the last answer "
    "in `If-None-Match` to get 304 while nothing changed (elapsed time aside).",
    response_model=JobOut,
    responses=NOT_MODIFIED,
)
def get_job(job_id: JobId, token: BearerToken, db: DbDep, request: Request,
            response: Response) -> JobOut | Response:
    with session_scope(db) as session:
        # The version is read before the job: content can only be newer than its tag.
        team, version = authenticate_for_job(session, token, job_id)
        tag = job_etag(job_id, queries.found_version(job_id, version))
        if is_current(request, tag):
            return not_modified(tag)
        job, problem = queries.team_job_and_problem(session, team.id, job_id)
        tag_response(response, tag)
        return job_out(session, job, problem)


@router.post(
    "/{job_id}/cancel",
    summary="Request cancellation",
    description="Sets the job's cancel flag; the scheduler stops dispatching and finishes the "
    "job as cancelled. Cancelling a finished job is refused with 409.",
    responses={409: {"model": ErrorBody, "description": "The job has already finished."}},
)
def cancel_job(job_id: JobId, team: SubmittingTeam, db: DbDep) -> JobOut:
    with session_scope(db) as session:
        job = queries.team_job(session, team.id, job_id)
        if job.status in FINISHED_JOB_STATUSES:
            raise ApiError(
                409, "job_finished",
                f"Job {public('job', job_id)} is already {job.status}; there is nothing to "
                "cancel.",
            )
        job.cancel_requested = True
        job.version = Job.version + 1  # pollers' ETags change with the flag
        session.commit()
        problem = session.get(Problem, job.problem_id)
        assert problem is not None
        return job_out(session, job, problem)
