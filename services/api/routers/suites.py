"""Suites: a whole benchmark (JSON problems or an uploaded archive) as one campaign."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import UploadFile

from kernelband.config import Settings
from kernelband.db import session_scope
from kernelband.db.models import Job, Suite
from kernelband.problem.model import KernelProblem
from kernelband.problem.translate import suite_translation_refusal
from kernelband.sandbox import job_limits
from kernelband.suite import (
    LoadFailure,
    SuiteNotFoundError,
    SuiteSettings,
    SuiteSource,
    SuiteSourceError,
    create_suite,
    load_sources,
    read_archive,
    suite_report,
    to_csv,
    to_json,
)
from services.api.auth import TeamRef
from services.api.deps import (
    CurrentTeam,
    DbDep,
    ProblemLoaderDep,
    SettingsDep,
    SubmittingTeam,
)
from services.api.errors import ERROR_RESPONSES, ApiError, not_found
from services.api.ids import public_report
from services.api.problems import check_size
from services.api.sse import (
    EVENT_STREAM,
    STREAM_HEADERS,
    last_event_id,
    read_suite_progress,
    suite_stream,
    wants_stream,
)
from services.api.submission import check_model, check_suite_concurrency, validate_policy
from services.api.suite_schemas import SuiteCreate, SuiteOut, SuiteSettingsIn

router = APIRouter(prefix="/v1/suites", tags=["suites"], responses=ERROR_RESPONSES)
SuiteId = Annotated[str, Path(min_length=1, max_length=64, description="From POST /v1/suites.")]

_UPLOAD_DOC = {"requestBody": {"content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/SuiteCreate"}},
    "multipart/form-data": {"schema": {"type": "object", "required": ["archive"], "properties": {
        "archive": {"type": "string", "format": "binary",
                    "description": "A .zip or .tar.gz of problem files (*.py)."},
        "settings": {"type": "string", "description": "SuiteSettingsIn as a JSON string."},
    }}},
}, "required": True}}


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=SuiteOut,
    summary="Submit a suite of problems (JSON list or uploaded archive)",
    description=(
        "Loads every problem in the sandbox (files that fail are listed with the loader's "
        "reason, not fatal), then queues one job per (problem, policy) with the shared targets, "
        "generator and budget. Send JSON (`SuiteCreate`) or multipart with `archive` "
        "(.zip/.tar.gz) and `settings` (JSON). A suite counts as one job against the team's "
        "job limit and has its own limit of unfinished suites (429 `too_many_suites`)."
    ),
    openapi_extra=_UPLOAD_DOC,
)
async def submit_suite(request: Request, team: SubmittingTeam, db: DbDep,
                       settings: SettingsDep, loader: ProblemLoaderDep,
                       response: Response) -> dict[str, Any]:
    body, sources = await _parse_submission(request)
    for item in sources:
        check_size(item.source, settings.max_source_bytes)
    for policy in body.policies:
        validate_policy(policy, {})
    check_model(body.generator.model, settings)
    named = [(item.name, item.source) for item in sources]
    if refusal := suite_translation_refusal(named, body.format, body.generator.model):
        raise ApiError(422, "llm_model_required", f"The suite is refused: {refusal}.")
    suite_settings = SuiteSettings(
        targets=tuple(t.value for t in body.targets), policies=tuple(body.policies),
        model=body.generator.model, budget=body.budget.iterations, parallelism=body.parallelism,
        seed=body.seed, limits=body.limits.fields())
    # Database work runs in worker threads, each in a short session of its own: none blocks the
    # event loop, and no connection is held during the sandboxed loads (seconds).
    await run_in_threadpool(_check_quota, db, team.id, settings)
    problems, failures = await run_in_threadpool(_load_sources, sources, body, loader)
    report = await run_in_threadpool(_store_suite, db, team, settings, body, problems, failures,
                                     suite_settings)
    response.headers["Location"] = f"/v1/suites/{report['suite_id']}"
    return report


def _load_sources(sources: list[SuiteSource], body: SuiteSettingsIn,
                  loader: Any) -> tuple[list[KernelProblem], list[LoadFailure]]:
    with job_limits(body.limits.fields()):  # loading runs each file: the suite's limits apply
        return load_sources(sources, body.format, loader)


def _check_quota(db: sessionmaker[Session], team_id: int, settings: Settings) -> None:
    with session_scope(db) as session:
        check_suite_concurrency(session, team_id, settings)


def _store_suite(db: sessionmaker[Session], team: TeamRef, settings: Settings,
                 body: SuiteSettingsIn, problems: list[KernelProblem],
                 failures: list[LoadFailure],
                 suite_settings: SuiteSettings) -> dict[str, Any]:
    with session_scope(db) as session:
        check_suite_concurrency(session, team.id, settings)  # again, under the team lock
        suite = create_suite(session, team.id, body.name, body.format, problems, failures,
                             suite_settings)
        session.commit()
        return public_report(suite_report(session, suite.id, team.id)).to_dict()


@router.get("/{suite_id}", response_model=SuiteOut, summary="Suite metrics and per-problem table")
def get_suite(suite_id: SuiteId, team: CurrentTeam, db: DbDep) -> dict[str, Any]:
    try:
        with session_scope(db) as session:
            return public_report(suite_report(session, suite_id, team.id)).to_dict()
    except SuiteNotFoundError as exc:
        raise not_found("suite", suite_id) from exc


class SuiteProgressOut(BaseModel):
    """A suite's progress: its jobs per status; `progress_id` grows with every change."""

    suite_id: str
    jobs: int
    jobs_finished: int
    finished: bool
    by_status: dict[str, int]
    progress_id: int


@router.get(
    "/{suite_id}/events", response_model=SuiteProgressOut,
    summary="A suite's progress, once or as a stream of server-sent events",
    description="Without `Accept: text/event-stream`: the progress now. With it: a `progress` "
    "event now and after every change of one of the suite's jobs (`id:` progress_id; resume "
    "with `Last-Event-ID`), heartbeats while idle, ending after the event that says the "
    "suite finished.",
    responses={200: {"content": {EVENT_STREAM: {}}, "description": "Progress or its stream."}},
)
def suite_events(suite_id: SuiteId, team: CurrentTeam, db: DbDep, request: Request,
                 after: Annotated[int, Query(ge=0, le=2**62)] = 0) -> Any:
    with session_scope(db) as session:
        suite = session.get(Suite, suite_id)
        if suite is None or suite.team_id != team.id:
            raise not_found("suite", suite_id)
        job_ids = list(session.scalars(select(Job.id).where(Job.suite_id == suite_id,
                                                            Job.team_id == team.id)))
    if not wants_stream(request.headers.get("accept")):
        progress = read_suite_progress(db, job_ids)
        progress.pop("versions")
        return SuiteProgressOut(suite_id=suite_id, **progress)
    start = last_event_id(request.headers.get("last-event-id"), after)
    stream = suite_stream(db, request.app.state.job_watcher, suite_id, job_ids, start,
                          request.app.state.settings.sse_heartbeat_s)
    return StreamingResponse(stream, media_type=EVENT_STREAM, headers=STREAM_HEADERS)


@router.get(
    "/{suite_id}/export", summary="Export a suite's results as CSV or JSON",
    responses={200: {"content": {"text/csv": {}, "application/json": {}}}},
)
def export_suite(
    suite_id: SuiteId, team: CurrentTeam, db: DbDep,
    format: Annotated[str, Query(pattern="^(csv|json)$", description="csv or json")] = "csv",
) -> Response:
    try:
        with session_scope(db) as session:
            report = public_report(suite_report(session, suite_id, team.id))
    except SuiteNotFoundError as exc:
        raise not_found("suite", suite_id) from exc
    filename = f"{report.name}-{report.suite_id}.{format}"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if format == "json":
        return Response(to_json(report), media_type="application/json", headers=headers)
    return Response(to_csv(report), media_type="text/csv", headers=headers)


async def _parse_submission(request: Request) -> tuple[SuiteSettingsIn, list[SuiteSource]]:
    """JSON body or multipart upload -> shared settings and problem sources."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        return await _parse_upload(request)
    try:
        body = SuiteCreate.model_validate(await request.json())
    except (ValueError, ValidationError) as exc:
        raise _invalid(exc) from exc
    names = [p.name for p in body.problems]
    if len(set(names)) != len(names):
        raise ApiError(422, "invalid_suite", "Problem names repeat; give every problem a "
                       "distinct name and submit again.")
    return body, [SuiteSource(p.name, p.source, p.perf_source) for p in body.problems]


async def _parse_upload(request: Request) -> tuple[SuiteSettingsIn, list[SuiteSource]]:
    form = await request.form()
    archive, raw = form.get("archive"), form.get("settings") or "{}"
    if not isinstance(archive, UploadFile) or not isinstance(raw, str):
        raise ApiError(422, "invalid_suite", "A multipart suite needs a file field `archive` "
                       "(.zip or .tar.gz) and an optional text field `settings` (JSON).")
    try:
        body = SuiteSettingsIn.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise _invalid(exc) from exc
    try:
        sources = read_archive(await archive.read(), archive.filename or "")
    except SuiteSourceError as exc:
        raise ApiError(422, "invalid_archive", f"The archive could not be used: {exc}.") from exc
    return body, sources


def _invalid(exc: Exception) -> RequestValidationError:
    """The same 422 body as every other request body: a sentence and a field per problem."""
    if isinstance(exc, ValidationError):
        return RequestValidationError(exc.errors(include_url=False))
    return RequestValidationError([{"type": "json_invalid", "loc": ("body",),
                                    "msg": "Invalid JSON", "ctx": {"error": str(exc)}}])
