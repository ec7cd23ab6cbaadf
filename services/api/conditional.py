"""Conditional GETs: an ETag per representation, 304 Not Modified while the client's copy is current.

A job's ETags come from `jobs.version`, which the scheduler bumps in every transaction that
appends an event to the job (every change the job detail, events or bandit view show comes
with one) and the API bumps on a cancel request. Answering 304 therefore reads one small row
and never the tracks, measurements or event payloads. Times computed at response time (a
running job's `spend.wall_s`) are not part of the version: a client shows elapsed time from
`started_at` instead of re-fetching it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from fastapi import Request, Response

from kernelband.public_ids import public

# Private: the answer depends on the bearer token. no-cache: store it, but ask every time.
CACHE_CONTROL = "private, no-cache"
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the `ETag` sent in `If-None-Match` is still current."}}


def etag(*parts: object) -> str:
    """A strong ETag naming a representation's version, e.g. `"job-12-v40"`."""
    return '"' + "-".join(str(part) for part in parts) + '"'


def digest_etag(kind: str, content: object) -> str:
    """An ETag from a digest of the values a representation is built from."""
    return etag(kind, hashlib.sha256(repr(content).encode()).hexdigest()[:20])


def matches(header: str | None, tag: str) -> bool:
    """True when an `If-None-Match` value names `tag` (weak or strong) or is `*`."""
    if not header:
        return False
    sent = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in sent or tag in sent


def is_current(request: Request, tag: str) -> bool:
    """True when the request's `If-None-Match` names `tag` (weak or strong) or is `*`."""
    return matches(request.headers.get("if-none-match"), tag)


def instant_key(moment: datetime | None) -> str:
    """One spelling of an instant whatever the driver returned (SQLite: naive UTC)."""
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def fleet_tag(workers: tuple[int, int, datetime | None], depths: Sequence[tuple[str, int, str]],
              local: Sequence[dict[str, Any]] = ()) -> str:
    """The fleet view's ETag from what it shows, heartbeat ages aside: worker count, newest
    worker id and heartbeat, each queue's (name, depth, source) and any in-process workers.
    The fast path (services/api/fastpoll.py) and the endpoint both build it here."""
    count, newest_id, newest_beat = workers
    return digest_etag("fleet", (int(count), int(newest_id), instant_key(newest_beat),
                                 [tuple(d) for d in depths], list(local)))


def job_etag(job_id: int, version: int) -> str:
    """The ETag of a job's detail (`GET /v1/jobs/{id}`) at `version`."""
    return etag("job", public("job", job_id), version)


def events_etag(job_id: int, version: int, after: int, limit: int) -> str:
    """The ETag of a page of a job's events (`?after=&limit=`) at the job's `version`."""
    return etag("events", public("job", job_id), version, after, limit)


def not_modified(tag: str) -> Response:
    """The 304 answer: no body, the current ETag."""
    return Response(status_code=304, headers={"ETag": tag, "Cache-Control": CACHE_CONTROL})


def tag_response(response: Response, tag: str) -> None:
    """Send the ETag with a full answer so the client can ask conditionally next time."""
    response.headers["ETag"] = tag
    response.headers["Cache-Control"] = CACHE_CONTROL


__all__ = ["CACHE_CONTROL", "NOT_MODIFIED", "digest_etag", "etag", "events_etag", "fleet_tag",
           "instant_key", "is_current", "job_etag", "matches", "not_modified", "tag_response"]
