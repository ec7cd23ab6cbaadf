"""The FastAPI application: routers composed in one place, one error body, one settings object."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kernelband.config import Settings, get_settings
from kernelband.db import open_database
from services.api.dashboard import router as dashboard_router
from services.api.deps import API_WORKER_THREADS
from services.api.errors import ErrorBody, install_error_handlers
from services.api.fastpoll import FastPoll, FastPollMiddleware
from services.api.ids import PublicIdsMiddleware, codec_for
from services.api.logs import install_log_redaction
from services.api.metrics import ApiMetrics, MetricsMiddleware
from services.api.openapi import install_openapi
from services.api.problems import ProblemLoader, sandboxed_loader
from services.api.routers import (
    fleet,
    health,
    jobs,
    loop,
    results,
    suites,
    tokens,
    usage,
    webhooks,
)
from services.api.schemas import WorkerOut
from services.api.sse import JobWatcher
from services.api.suite_schemas import SuiteCreate
from services.api.teams import register_bootstrap_token

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Submit Triton kernel problems and get faster kernels per GPU type, found by a "
    "hardware-aware multi-armed bandit (KernelBand). Every time is labelled `measured` or "
    "`estimated`. Authenticate with `Authorization: Bearer <token>` "
    "(`kernelband tokens create --team NAME`)."
)


def _body_limit(settings: Settings) -> int:
    # JSON escaping can grow source text several-fold; this only stops absurd bodies early,
    # the exact source limit is checked on the decoded field.
    return 8 * settings.max_source_bytes + 64 * 1024


def create_app(
    settings: Settings | None = None,
    *,
    session_factory: sessionmaker[Session] | None = None,
    problem_loader: ProblemLoader = sandboxed_loader,
    embedded: bool = False,
    local_workers: Callable[[], list[WorkerOut]] | None = None,
) -> FastAPI:
    """Build the app; without a session factory the database is opened (and, on SQLite,
    migrated) at startup. `embedded` reads queue depths from attempts instead of Redis;
    `local_workers` lists in-process workers (the embedded scheduler) in GET /v1/fleet."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if app.state.session_factory is None:
            url = settings.effective_database_url
            _, app.state.session_factory = open_database(url, migrate=url.startswith("sqlite"))
        if bootstrap := settings.bootstrap_token.get_secret_value():
            # However the API is started (kernelband serve, uvicorn --factory, a container):
            # KERNELBAND_BOOTSTRAP_TOKEN becomes the "default" team's admin token.
            register_bootstrap_token(app.state.session_factory, bootstrap, "default")
        try:  # the public-id key now rather than at the first request (services/api/ids.py)
            codec_for(app)
        except Exception:  # the database is not there yet: the first request reads it
            log.warning("public-id key not read at start; the first request reads it")
        install_log_redaction()  # again: uvicorn configures its loggers after create_app
        # No more threads than pooled connections (each holds at most one): a request then
        # never waits for a connection inside a thread; excess requests queue on the loop.
        anyio.to_thread.current_default_thread_limiter().total_tokens = API_WORKER_THREADS
        try:
            yield
        finally:
            app.state.fast_poll.close()

    app = FastAPI(
        title="KernelBand Service", version="0.1.0", description=DESCRIPTION, lifespan=lifespan
    )
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.problem_loader = problem_loader
    app.state.broker_url = None if embedded else settings.broker_url
    app.state.local_workers = local_workers
    app.state.public_ids = None  # read at the first request (services/api/ids.py)
    app.state.metrics = ApiMetrics(lambda: app.state.session_factory)
    app.state.fast_poll = FastPoll(app)
    app.state.job_watcher = JobWatcher(lambda: app.state.session_factory, settings.sse_poll_s)
    install_error_handlers(app)
    install_log_redaction()
    _install_middleware(app, _body_limit(settings))
    for module in (health, jobs, results, loop, fleet, suites, tokens, usage, webhooks):
        app.include_router(module.router)
    # The dashboard (/ui) is served by the same app, so a team needs no second server; its
    # pages read the JSON routes above with the team's own token.
    app.include_router(dashboard_router)
    install_openapi(app, [SuiteCreate])  # POST /v1/suites reads JSON or multipart by hand
    return app


def _install_middleware(app: FastAPI, max_body: int) -> None:
    # Plain ASGI middleware: the decorator form (BaseHTTPMiddleware) costs a task and a memory
    # stream per request, which a polled API pays on every call. Added last = outermost: an
    # unchanged conditional poll is answered 304 (and counted) before body checks and routing.
    app.add_middleware(FastPollMiddleware, fast=app.state.fast_poll)
    app.add_middleware(BodyLimitMiddleware, max_body=max_body)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(PublicIdsMiddleware, owner=app)  # outermost: every layer reads ids


class BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` once a body passes the limit; rendered as the 413 error body."""


class BodyLimitMiddleware:
    """413 with an explanation for a body larger than `max_body`: at once for a declared
    length, and for a chunked body as soon as the bytes received pass the limit (nothing more
    is read; the rest of the body is never buffered)."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    def _message(self, size: str) -> str:
        return (f"The request body is {size} bytes; this server accepts at most "
                f"{self.max_body} bytes. Submit a smaller problem file.")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            body = ErrorBody(error="payload_too_large", message=self._message(length))
            await JSONResponse(body.model_dump(exclude_none=True), 413)(scope, receive, send)
            return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    # FastAPI re-raises HTTPExceptions met while reading a body, so the
                    # error handlers answer 413 and the server reads no further.
                    raise BodyTooLarge(413, self._message(f"more than {self.max_body}"))
            return message

        return counted
