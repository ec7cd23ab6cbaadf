"""Liveness, readiness and metrics: the only endpoints without a team token."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from services.api.errors import ApiError
from services.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", description="200 while the process serves requests.")
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="Readiness",
    description="200 when the database answers; 503 with the reason otherwise.",
    responses={503: {"model": Health, "description": "The database is not reachable."}},
)
def readyz(request: Request) -> Response:
    factory = request.app.state.session_factory
    if factory is None:
        return JSONResponse(Health(status="starting", detail="database not opened yet").model_dump(), 503)
    try:
        with factory() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:  # any failure means not ready; the reason goes to the operator
        detail = f"database unreachable: {type(exc).__name__}; check KERNELBAND_DATABASE_URL"
        return JSONResponse(Health(status="unavailable", detail=detail).model_dump(), 503)
    return JSONResponse(Health(status="ok").model_dump())


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description="Open unless the operator set KERNELBAND_METRICS_TOKEN; then only "
    "`Authorization: Bearer <that token>` is answered (401 otherwise).",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Text exposition."}},
)
def metrics(request: Request) -> Response:
    expected = request.app.state.settings.metrics_token.get_secret_value()
    if expected and not _metrics_token_ok(request, expected):
        raise ApiError(401, "metrics_token_required", "This server's /metrics needs "
                       "'Authorization: Bearer <KERNELBAND_METRICS_TOKEN>'; ask the operator "
                       "for the scrape token (docs/deploy.md).", headers={"WWW-Authenticate": "Bearer"})
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _metrics_token_ok(request: Request, expected: str) -> bool:
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip(), expected)
