"""One error body for every failure: {"error": code, "message": what was wrong and what to do}."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from kernelband.db import ConflictError, DatabaseError


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx response."""

    error: str
    message: str
    details: list[dict[str, Any]] | None = None


class ApiError(Exception):
    """An error the API reports to the client as-is."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.headers = headers


def not_found(what: str, ident: object) -> ApiError:
    """404 that does not reveal whether the object exists for another team."""
    return ApiError(
        404, "not_found", f"No {what} {ident!s} is visible to your team; check the id and token."
    )


# Codes for the statuses Starlette raises itself (unknown route, wrong method, ...).
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
}

_STATUS_HINTS = {
    404: "No such endpoint; see /docs for the API reference.",
    405: "This endpoint does not accept that HTTP method; see /docs for the API reference.",
}


def _field_path(loc: Sequence[Any]) -> str:
    """`("body", "budget", "iterations")` -> `budget.iterations`."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or str(loc[0] if loc else "request")


def _error_field(err: dict[str, Any]) -> str:
    """The field an error is about; a body that is not JSON at all is about the body (its
    location otherwise ends in the character offset of the syntax error, e.g. "11")."""
    if err.get("type") in ("json_invalid", "json_type"):
        return "body"
    return _field_path(err.get("loc", ()))


def _reword(err: dict[str, Any]) -> str:
    """One readable sentence for one pydantic error."""
    where = _field_path(err.get("loc", ()))
    kind = str(err.get("type", ""))
    msg = str(err.get("msg", "is invalid"))
    if kind == "missing":
        return f"'{where}' is required; add it to the request."
    if kind == "extra_forbidden":
        return f"'{where}' is not a known field; remove it (see /docs for the schema)."
    if kind in ("json_invalid", "json_type"):
        where = str((err.get("ctx") or {}).get("error", "")).strip()
        return (f"The request body is not valid JSON ({where}); send a JSON object."
                if where else "The request body is not valid JSON; send a JSON object.")
    if kind == "enum" or kind == "literal_error":
        return f"'{where}': {msg[0].lower() + msg[1:]}."
    if msg.startswith("Value error, "):
        msg = msg.removeprefix("Value error, ")
    return f"'{where}': {msg[0].lower() + msg[1:] if msg else msg}."


def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    body = ErrorBody(error=exc.code, message=exc.message)
    return JSONResponse(body.model_dump(exclude_none=True), exc.status_code, headers=exc.headers)


def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, "http_error")
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    message = _STATUS_HINTS.get(exc.status_code, detail) if detail in ("Not Found", "Method Not Allowed") else detail
    body = ErrorBody(error=code, message=message)
    return JSONResponse(body.model_dump(exclude_none=True), exc.status_code, headers=exc.headers)


def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    sentences = [_reword(e) for e in errors]
    details = [{"field": _error_field(e), "problem": s} for e, s in zip(errors, sentences, strict=True)]
    body = ErrorBody(error="invalid_request", message=" ".join(sentences), details=details)
    return JSONResponse(body.model_dump(exclude_none=True), 422)


def _database_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, ConflictError):
        body = ErrorBody(error="conflict", message=f"{exc}; retry the request.")
        return JSONResponse(body.model_dump(exclude_none=True), 409)
    body = ErrorBody(error="database_unavailable", message=f"{exc}; retry in a moment.")
    return JSONResponse(body.model_dump(exclude_none=True), 503)


def _pool_exhausted(_: Request, exc: Exception) -> JSONResponse:
    # Every pooled database connection stayed busy for the whole pool timeout: overload, so
    # answer at once with a hint instead of letting requests pile up behind the pool.
    body = ErrorBody(error="database_busy", message="The server's database connections are all "
                     "busy (overloaded); retry in a few seconds, with backoff.")
    return JSONResponse(body.model_dump(exclude_none=True), 503, headers={"Retry-After": "2"})


def database_failure(exc: Exception) -> JSONResponse:
    """The answer to a database error met outside a route (a middleware's read)."""
    if isinstance(exc, PoolTimeoutError):
        return _pool_exhausted(None, exc)  # type: ignore[arg-type]
    return _database_error(None, exc)  # type: ignore[arg-type]


def install_error_handlers(app: FastAPI) -> None:
    """Route every error through the one body shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(DatabaseError, _database_error)
    app.add_exception_handler(PoolTimeoutError, _pool_exhausted)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked token."},
    404: {"model": ErrorBody, "description": "Not found, or owned by another team."},
    422: {"model": ErrorBody, "description": "The request is not valid; the message says why."},
}
