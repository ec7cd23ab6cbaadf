"""Public ids in the API: the app's codec, set for each request, and path parameters.

Every id in a path, body or answer is a public id (kernelband/public_ids.py); routes still
work on the integer ids, which these dependencies decode. A malformed, forged or other-kind
id answers 404, exactly as another team's id does.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, Path, Request
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.types import ASGIApp, Receive, Scope, Send

from kernelband import public_ids
from kernelband.db import DatabaseError, session_scope
from kernelband.public_ids import Kind, PublicIds
from kernelband.suite import SuiteReport
from services.api.auth import authenticate, missing_token
from services.api.errors import ApiError, database_failure, not_found

_LOADING = threading.Lock()


def codec_for(app: Any) -> PublicIds:
    """The app's codec: `KERNELBAND_ID_KEY`, else the key kept in its database (read once)."""
    codec: PublicIds | None = getattr(app.state, "public_ids", None)
    if codec is None:
        with _LOADING:
            codec = getattr(app.state, "public_ids", None)
            if codec is None:
                configured = app.state.settings.id_key.get_secret_value()
                if configured:
                    codec = public_ids.load(configured, None)
                else:
                    with session_scope(app.state.session_factory) as session:
                        codec = public_ids.load("", session)
                app.state.public_ids = codec
    return codec


class PublicIdsMiddleware:
    """Makes the app's codec the current one for each request (the threads it starts too)."""

    def __init__(self, app: ASGIApp, owner: Any) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(("/v1/", "/ui/")):
            await self.app(scope, receive, send)  # health, metrics, docs: no ids, no database
            return
        codec: PublicIds | None = getattr(self.owner.state, "public_ids", None)
        if codec is None:  # the first request: the key may have to be read from the database
            try:
                codec = await anyio.to_thread.run_sync(codec_for, self.owner)
            except (DatabaseError, PoolTimeoutError) as exc:
                await database_failure(exc)(scope, receive, send)
                return
        token = public_ids.activate(codec)
        try:
            await self.app(scope, receive, send)
        finally:
            public_ids.deactivate(token)


async def _decode(request: Request, kind: Kind, text: str, refusal: ApiError) -> int:
    """The row id behind `text`; else the token's 401 when it has one, then `refusal` (404).

    A request without a valid token learns nothing about ids, as on every other route; the
    token is only read here for an id that does not decode (a valid one is checked by the
    route, in the session it reads with)."""
    value = public_ids.internal(kind, text)
    if value is not None:
        return value
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise missing_token()
    await anyio.to_thread.run_sync(_check_token, request.app.state.session_factory,
                                   token.strip())
    raise refusal


def _check_token(factory: Any, token: str) -> None:
    with session_scope(factory) as session:
        authenticate(session, token)


async def _job_id(request: Request, job_id: Annotated[str, Path(
        description="The job id from POST /v1/jobs, e.g. job_3k9fz0q1b2c4d.")]) -> int:
    return await _decode(request, "job", job_id, not_found("job", job_id))


JobId = Annotated[int, Depends(_job_id)]


async def _candidate_id(request: Request, candidate_id: Annotated[str, Path(
        description="A candidate id from the job's candidate list, e.g. cand_7w1ag55vj0dyr.",
)]) -> int:
    return await _decode(request, "cand", candidate_id, ApiError(
        404, "not_found", f"This job has no candidate {candidate_id}; list its candidates "
        "with GET /v1/jobs/{job_id}/candidates."))


CandidateId = Annotated[int, Depends(_candidate_id)]


async def _hook_id(request: Request, hook_id: Annotated[str, Path(
        description="A webhook id from GET /v1/webhooks.")]) -> int:
    return await _decode(request, "hook", hook_id, ApiError(
        404, "not_found", f"Your team has no webhook {hook_id}; list them with "
        "GET /v1/webhooks."))


HookId = Annotated[int, Depends(_hook_id)]


async def _skill_id(request: Request, skill_id: Annotated[str, Path(
        description="A skill id from GET /v1/skills.")]) -> int:
    return await _decode(request, "skill", skill_id, ApiError(
        404, "not_found", f"Your team has no skill {skill_id}; list them with "
        "GET /v1/skills."))


SkillId = Annotated[int, Depends(_skill_id)]


def public(kind: Kind, value: int) -> str:
    """`value`'s public id (the request's codec)."""
    return public_ids.public(kind, value)


def public_or_none(kind: Kind, value: int | None) -> str | None:
    """Like `public`, keeping None."""
    return public_ids.public_or_none(kind, value)


def public_report(report: SuiteReport) -> SuiteReport:
    """A suite's report with public job ids (answers and exports)."""
    return replace(report, job_ids=tuple(public("job", int(j)) for j in report.job_ids),
                   problems=tuple(replace(p, job_id=public("job", int(p.job_id)))
                                  for p in report.problems))
