"""The 304 fast path: a conditional poll answered before routing, from one small read.

Most dashboard polls (`GET /v1/jobs/{id}`, `GET /v1/jobs/{id}/events`, `GET /v1/fleet` with
`If-None-Match`) find nothing new. The ordinary endpoints answer those with 304 too, but only
after routing, dependency injection, a worker-thread hop and an ORM session, which cost a
few milliseconds of CPU per poll. This middleware answers them on the event loop instead:

- one prepared query (services/api/pgasync.py) reads the token row by its sha256 (the unique
  index) together with the job's `team_id` and `version` (the statement the endpoint runs,
  `TOKEN_AND_JOB` in services/api/auth.py), or the workers' fingerprint;
- it answers 304 only when the endpoint's own decision on that row (`job_access`) finds the
  token live and the job its team's, the token's `last_used_at` is recent (else the endpoint
  records the use), and the ETag the endpoint would send now (built by the same functions)
  is among those the client sent.

Everything else (no ETag, a changed job, another team's job, a bad or revoked token, odd
query parameters, SQLite, a busy or failing fast-path connection) goes to the endpoint
unchanged, so the fast path can only ever say "not modified" when the endpoint would say it
too: the version is read when the request arrives, after every commit that preceded it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from starlette.types import ASGIApp, Receive, Scope, Send

from kernelband.auth_tokens import hash_token, token_prefix
from kernelband.public_ids import internal
from services.api.auth import TOKEN_AND_JOB, job_access, needs_touch, token_and_job_params
from services.api.conditional import CACHE_CONTROL, events_etag, fleet_tag, job_etag, matches
from services.api.deps import EVENTS_LIMIT_DEFAULT, EVENTS_LIMIT_MAX, MAX_ID
from services.api.errors import ApiError
from services.api.fleet import broker_depths_async, pending_depths
from services.api.pgasync import AsyncPgPool

log = logging.getLogger(__name__)

_JOB_PATH = re.compile(r"/v1/jobs/(job_[0-9a-z]{13})(/events)?")
_DIGITS = re.compile(r"[0-9]{1,10}")


def _prepared(statement: ClauseElement) -> tuple[str, str, tuple[str, ...]]:
    """A Core statement as `AsyncPgPool` prepares it: its parameter types and its SQL with
    $1.. placeholders, and the parameters' names in that order."""
    dialect = postgresql.psycopg2.dialect(paramstyle="numeric_dollar")
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    names = tuple(compiled.positiontup or ())
    types = ", ".join(compiled.binds[name].type.compile(dialect=dialect) for name in names)
    return types, str(compiled), names


_JOB_TYPES, _JOB_SQL, _JOB_PARAMS = _prepared(TOKEN_AND_JOB)
_TOKEN = "SELECT t.team_id, t.revoked_at, t.last_used_at"
# An expired token finds no row here, so the endpoint answers it (401 expired_token).
_LIVE = " AND (t.expires_at IS NULL OR t.expires_at > now())"
STATEMENTS = {
    "kb_poll_job": (_JOB_TYPES, _JOB_SQL),
    "kb_poll_fleet": ("text", f"{_TOKEN}, w.n, w.newest_id, w.newest_beat FROM api_tokens t "
                      "CROSS JOIN (SELECT count(id) AS n, max(id) AS newest_id, "
                      "max(last_heartbeat) AS newest_beat FROM workers) w "
                      "WHERE t.token_hash = $1" + _LIVE),
    "kb_poll_pending": ("text, text", "SELECT queue, count(*) FROM attempts "
                        "WHERE state IN ($1, $2) GROUP BY queue"),
}
ROUTES = {"job": "/v1/jobs/{job_id}", "events": "/v1/jobs/{job_id}/events",
          "fleet": "/v1/fleet"}


@dataclass(frozen=True)
class Poll:
    """A conditional GET the fast path may answer: what it asks for and what it sent."""

    kind: str  # job | events | fleet
    token: str
    if_none_match: str
    job_id: int = 0
    after: int = 0
    limit: int = EVENTS_LIMIT_DEFAULT


def parse_poll(scope: Scope) -> Poll | None:
    """The poll a request makes, or None when the fast path must leave it to the endpoint."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    path = scope["path"]
    if path == "/v1/fleet":
        kind, job_id = "fleet", 0
    else:
        match = _JOB_PATH.fullmatch(path)
        if match is None:
            return None
        kind, found = ("events" if match.group(2) else "job"), internal("job", match.group(1))
        if found is None:
            return None  # not a job id: the endpoint answers 404
        job_id = found
    authorization = if_none_match = None
    for name, value in scope["headers"]:  # the first of each, as the endpoint reads them
        if name == b"authorization" and authorization is None:
            authorization = value.decode("latin-1")
        elif name == b"if-none-match" and if_none_match is None:
            if_none_match = value.decode("latin-1")
    if not authorization or not if_none_match:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or token_prefix(token) is None:
        return None
    if kind != "events":
        return None if scope.get("query_string") else Poll(kind, token, if_none_match, job_id)
    query = _events_query(scope.get("query_string", b""))
    return None if query is None else Poll(kind, token, if_none_match, job_id, *query)


def _events_query(raw: bytes) -> tuple[int, int] | None:
    """`after` and `limit` of an events poll when both are plain in-range numbers."""
    values = {"after": 0, "limit": EVENTS_LIMIT_DEFAULT}
    seen: set[str] = set()
    for key, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if key not in values or key in seen or not _DIGITS.fullmatch(value):
            return None
        seen.add(key)
        values[key] = int(value)
    if values["after"] > MAX_ID or not 1 <= values["limit"] <= EVENTS_LIMIT_MAX:
        return None
    return values["after"], values["limit"]


class FastPollMiddleware:
    """Answers unchanged conditional polls with 304 on the loop; passes everything else on."""

    def __init__(self, app: ASGIApp, fast: FastPoll) -> None:
        self.app = app
        self.fast = fast

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        poll = parse_poll(scope) if self.fast.enabled is not False else None
        if poll is not None:
            try:
                tag = await self.fast.current_tag(poll)
            except Exception as exc:  # the endpoint answers instead; it reports real failures
                log.debug("fast poll fell back to the endpoint: %r", exc)
                tag = None
            if tag is not None:
                self.fast.answered += 1
                scope["route"] = self.fast.routes.get(poll.kind)  # metrics label: the route
                await send({"type": "http.response.start", "status": 304,
                            "headers": [(b"etag", tag.encode()),
                                        (b"cache-control", CACHE_CONTROL.encode())]})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


class FastPoll:
    """The fast path's reads. `owner` is the FastAPI app: its state holds the session factory
    (read at the first poll, to reach the same Postgres database), the broker URL and any
    in-process workers (the embedded fleet view, which always goes to the endpoint)."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self._pool: AsyncPgPool | None = None
        self.enabled: bool | None = None  # None: not decided until the first poll
        self.routes: dict[str, Any] = {}
        self.answered = 0  # polls this process answered 304 here

    def _start(self) -> AsyncPgPool | None:
        """The pool on the app's Postgres database; None (fast path off) on SQLite."""
        if self.enabled is None:
            factory = self.owner.state.session_factory
            engine = getattr(factory, "kw", {}).get("bind") if factory is not None else None
            if engine is None:
                return None  # not started yet: decide at a later poll
            self.enabled = engine.dialect.name == "postgresql"
            if self.enabled:
                args, kwargs = engine.dialect.create_connect_args(engine.url)
                self._pool = AsyncPgPool(args, kwargs, STATEMENTS)
            self.routes = {kind: route for route in self.owner.routes
                            for kind, path in ROUTES.items() if getattr(route, "path", "") == path}
        return self._pool

    async def current_tag(self, poll: Poll) -> str | None:
        """The ETag the endpoint would send now, when it is one the client sent; else None."""
        pool = self._start()
        if pool is None or (poll.kind == "fleet" and self.owner.state.local_workers):
            return None
        if poll.kind == "fleet":
            tag = await self._fleet_tag(pool, poll.token)
        else:
            async with pool.acquire() as conn:
                if conn is None:
                    return None
                params = token_and_job_params(poll.token, poll.job_id)
                rows = await pool.fetch(conn, "kb_poll_job", [params[n] for n in _JOB_PARAMS])
            tag = _job_tag(poll, rows)
        return tag if tag is not None and matches(poll.if_none_match, tag) else None

    async def _fleet_tag(self, pool: AsyncPgPool, token: str) -> str | None:
        """The fleet view's ETag for a live token that needs no `last_used_at` update."""
        broker = str(self.owner.state.broker_url or "")
        from_broker = broker.startswith(("redis://", "rediss://"))
        if broker.startswith("rediss://"):
            return None  # TLS: the endpoint reads the depths (services/api/redisllen.py has none)
        pending: dict[str, int] = {}
        async with pool.acquire() as conn:  # released before any Redis round trip
            if conn is None:
                return None
            rows = await pool.fetch(conn, "kb_poll_fleet", (hash_token(token),))
            if rows and not from_broker:
                pending = dict(await pool.fetch(conn, "kb_poll_pending",
                                                ("pending", "dispatched")))
        if not rows:
            return None  # unknown token: the endpoint answers 401
        _, revoked_at, last_used_at, count, newest_id, newest_beat = rows[0]
        if revoked_at is not None or needs_touch(last_used_at):
            return None
        if from_broker:
            depths = [(q, n, "broker") for q, n in (await broker_depths_async(broker)).items()]
        else:
            depths = [(d.queue, d.depth, d.source) for d in pending_depths(pending)]
        return fleet_tag((count or 0, newest_id or 0, newest_beat), depths)

    def close(self) -> None:
        """Close the fast path's idle connections."""
        if self._pool is not None:
            self._pool.close()


def _job_tag(poll: Poll, rows: list[tuple[Any, ...]]) -> str | None:
    """The job's ETag when the endpoint would answer the poll from `rows` without a write;
    None when the endpoint must answer (401, 404, or a token due a new `last_used_at`)."""
    try:
        access = job_access(poll.token, rows)
    except ApiError:
        return None
    if access.version is None or needs_touch(access.last_used_at):
        return None
    if poll.kind == "job":
        return job_etag(poll.job_id, access.version)
    return events_etag(poll.job_id, access.version, poll.after, poll.limit)


__all__ = ["FastPoll", "FastPollMiddleware", "Poll", "STATEMENTS", "parse_poll"]
