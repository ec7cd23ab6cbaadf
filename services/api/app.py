"""The FastAPI application: routers composed in one place, one error body, one settings object."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kernelband.config import Settings, get_settings
from kernelband.db import open_database
from services.api.dashboard import router as dashboard_router
from services.api.deps import API_WORKER_THREADS
from services.api.errors import ErrorBody, install_error_handlers
from services.api.fastpoll import FastPoll, FastPollMiddleware
from services.api.logs import install_log_redaction
from services.api.metrics import ApiMetrics, MetricsMiddleware
from services.api.problems import ProblemLoader, sandboxed_loader
from services.api.routers import fleet, health, jobs, loop, results, suites
from services.api.schemas import WorkerOut

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
    app.state.metrics = ApiMetrics(lambda: app.state.session_factory)
    app.state.fast_poll = FastPoll(app)
    install_error_handlers(app)
    install_log_redaction()
    _install_middleware(app, _body_limit(settings))
    for module in (health, jobs, results, loop, fleet, suites):
        app.include_router(module.router)
    app.include_router(dashboard_router)  # HTML dashboard under /ui (engineer H)
    return app


def _install_middleware(app: FastAPI, max_body: int) -> None:
    # Plain ASGI middleware: the decorator form (BaseHTTPMiddleware) costs a task and a memory
    # stream per request, which a polled API pays on every call. Added last = outermost: an
    # unchanged conditional poll is answered 304 (and counted) before body checks and routing.
    app.add_middleware(FastPollMiddleware, fast=app.state.fast_poll)
    app.add_middleware(BodyLimitMiddleware, max_body=max_body)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)


class BodyLimitMiddleware:
    """413 with an explanation for a declared body larger than `max_body`, before any read."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = Headers(scope=scope).get("content-length", "")
            if length.isdigit() and int(length) > self.max_body:
                body = ErrorBody(
                    error="payload_too_large",
                    message=f"The request body is {length} bytes; this server accepts at most "
                    f"{self.max_body} bytes. Submit a smaller problem file.",
                )
                response = JSONResponse(body.model_dump(exclude_none=True), 413)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
