"""The 304 fast path: unchanged polls answered before routing, never for a changed job,
never across teams, never for a bad token; everything else reaches the endpoint."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text, update
from sqlalchemy.orm import Session, sessionmaker

from kernelband import public_ids
from kernelband.auth_tokens import token_prefix
from kernelband.config import Settings
from kernelband.db.models import ApiToken, Attempt, Track, Worker, utcnow
from kernelband.db.session import session_scope
from kernelband.public_ids import PublicIds
from kernelband.scheduling.events import append_event
from services.api.app import create_app
from services.api.fastpoll import parse_poll
from services.api.teams import revoke_tokens
from tests.utils.public_ids import row_id

Body = Callable[..., dict[str, Any]]
Seed = Callable[[int | str], dict[str, Any]]


@pytest.fixture(params=["postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    """The fast path reads Postgres; SQLite is covered by `test_sqlite_...` below."""
    return str(request.param)


@pytest.fixture
def job_id(client: TestClient, auth: dict[str, str], job_body: Body, seed_results: Seed) -> str:
    created = str(client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"])
    seed_results(created)
    return created


def answered_fast(app: FastAPI) -> int:
    return int(app.state.fast_poll.answered)


def poll(client: TestClient, path: str, auth: dict[str, str], tag: str) -> Any:
    return client.get(path, headers={**auth, "If-None-Match": tag})


def bump(factory: sessionmaker[Session], job_id: str) -> None:
    """What a scheduler transaction that changes the job does: append an event."""
    with session_scope(factory) as session:
        append_event(session, row_id(session, job_id), "pull_finished", {"reward": 0.5})


PATHS = ["/v1/jobs/{id}", "/v1/jobs/{id}/events?after=7", "/v1/jobs/{id}/events?limit=5&after=0"]


@pytest.mark.parametrize("path", PATHS)
def test_unchanged_polls_are_answered_on_the_fast_path_and_a_bump_makes_the_next_one_200(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
    factory: sessionmaker[Session], path: str,
) -> None:
    url = path.format(id=job_id)
    tag = client.get(url, headers=auth).headers["ETag"]  # the endpoint; records the token use
    before = answered_fast(app)
    again = poll(client, url, auth, tag)
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == tag and again.headers["Cache-Control"] == "private, no-cache"
    assert poll(client, url, auth, f'"other", W/{tag}').status_code == 304
    assert answered_fast(app) == before + 2
    bump(factory, job_id)
    changed = poll(client, url, auth, tag)
    assert changed.status_code == 200 and changed.headers["ETag"] != tag
    assert answered_fast(app) == before + 2  # the changed poll went to the endpoint
    assert poll(client, url, auth, changed.headers["ETag"]).status_code == 304


def test_the_fast_path_never_serves_a_stale_version(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
    factory: sessionmaker[Session],
) -> None:
    url = f"/v1/jobs/{job_id}/events?after=7"
    tag = client.get(url, headers=auth).headers["ETag"]
    for n in range(8):
        assert poll(client, url, auth, tag).status_code == 304  # warm: fast path answering
        bump(factory, job_id)
        page = poll(client, url, auth, tag)
        assert page.status_code == 200, f"round {n}: a poll after a bump got {page.status_code}"
        assert page.json()["events"][-1]["seq"] == 8 + n
        tag = page.headers["ETag"]
    assert answered_fast(app) >= 8


def test_a_cancel_request_is_seen_by_the_very_next_poll(
    client: TestClient, auth: dict[str, str], job_id: str,
) -> None:
    tag = client.get(f"/v1/jobs/{job_id}", headers=auth).headers["ETag"]
    assert poll(client, f"/v1/jobs/{job_id}", auth, tag).status_code == 304
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=auth).status_code == 200
    changed = poll(client, f"/v1/jobs/{job_id}", auth, tag)
    assert changed.status_code == 200 and changed.json()["cancel_requested"] is True


@pytest.mark.parametrize("path", PATHS)
def test_another_team_with_the_current_etag_gets_404_not_304(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
    make_token: Callable[[str], str], path: str,
) -> None:
    url = path.format(id=job_id)
    tag = client.get(url, headers=auth).headers["ETag"]
    other = {"Authorization": f"Bearer {make_token('other-team')}"}
    client.get("/v1/fleet", headers=other)  # the other token is in use (fast path eligible)
    before = answered_fast(app)
    for _ in range(2):
        answer = poll(client, url, other, tag)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found"
    assert answered_fast(app) == before


def test_revoked_unknown_and_malformed_tokens_never_get_304(
    client: TestClient, app: FastAPI, auth: dict[str, str], token: str, job_id: str,
    factory: sessionmaker[Session],
) -> None:
    url = f"/v1/jobs/{job_id}"
    tag = client.get(url, headers=auth).headers["ETag"]
    assert poll(client, url, auth, tag).status_code == 304
    forged = token[:-4] + ("aaaa" if not token.endswith("aaaa") else "bbbb")
    for bad in (forged, "kb_nothex_x", ""):
        assert poll(client, url, {"Authorization": f"Bearer {bad}"}, tag).status_code == 401
    assert poll(client, url, {"Authorization": f"Basic {token}"}, tag).status_code == 401
    with session_scope(factory) as session:
        assert len(revoke_tokens(session, str(token_prefix(token)))) == 1
    before = answered_fast(app)
    revoked = poll(client, url, auth, tag)
    assert revoked.status_code == 401 and revoked.json()["error"] == "revoked_token"
    assert answered_fast(app) == before


def test_a_token_due_a_last_used_update_goes_to_the_endpoint_once(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
    factory: sessionmaker[Session],
) -> None:
    url = f"/v1/jobs/{job_id}"
    tag = client.get(url, headers=auth).headers["ETag"]
    with session_scope(factory) as session:
        session.execute(update(ApiToken).values(last_used_at=utcnow() - timedelta(hours=1)))
    before = answered_fast(app)
    assert poll(client, url, auth, tag).status_code == 304  # the endpoint, which records use
    assert answered_fast(app) == before
    with session_scope(factory) as session:
        used = session.query(ApiToken).one().last_used_at
    assert used is not None and utcnow() - used < timedelta(minutes=1)
    assert poll(client, url, auth, tag).status_code == 304
    assert answered_fast(app) == before + 1


def test_odd_event_queries_reach_the_endpoint(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
) -> None:
    base = f"/v1/jobs/{job_id}/events"
    tag = client.get(base + "?after=7", headers=auth).headers["ETag"]
    before = answered_fast(app)
    assert poll(client, base + "?after=-1", auth, tag).status_code == 422
    assert poll(client, base + "?after=7&limit=5000", auth, tag).status_code == 422
    assert poll(client, base + "?after=7&after=8", auth, tag).status_code in (200, 304)
    assert poll(client, base + "?after=8", auth, tag).status_code == 200  # another page
    assert answered_fast(app) == before


def test_fleet_polls_are_answered_fast_until_a_heartbeat_or_a_queue_changes(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
    factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as session:
        session.add(Worker(name="gpu-1", queue="gpu.h100", target="h100",
                           last_heartbeat=utcnow() - timedelta(seconds=30)))
    tag = client.get("/v1/fleet", headers=auth).headers["ETag"]
    before = answered_fast(app)
    assert poll(client, "/v1/fleet", auth, tag).status_code == 304
    assert answered_fast(app) == before + 1
    with session_scope(factory) as session:
        session.query(Worker).filter_by(name="gpu-1").one().last_heartbeat = utcnow()
    beat = poll(client, "/v1/fleet", auth, tag)
    assert beat.status_code == 200
    tag = beat.headers["ETag"]
    assert poll(client, "/v1/fleet", auth, tag).status_code == 304
    with session_scope(factory) as session:  # no broker in these tests: pending attempts
        row = row_id(session, job_id)
        track = session.query(Track).filter_by(job_id=row).first()
        assert track is not None
        session.add(Attempt(job_id=row, track_id=track.id, kind="profile",
                            state="pending", queue="gpu.h100"))
    queued = poll(client, "/v1/fleet", auth, tag)
    assert queued.status_code == 200
    depths = {q["queue"]: q["depth"] for q in queued.json()["queues"]}
    assert depths["gpu.h100"] == 1


def test_a_lost_database_connection_falls_back_to_the_endpoint(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
    factory: sessionmaker[Session],
) -> None:
    url = f"/v1/jobs/{job_id}"
    tag = client.get(url, headers=auth).headers["ETag"]
    assert poll(client, url, auth, tag).status_code == 304
    with session_scope(factory) as session:  # end the fast path's connections
        session.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                             "AND query LIKE 'EXECUTE kb_poll%'"))
    assert poll(client, url, auth, tag).status_code == 304  # the endpoint, or a new connection
    before = answered_fast(app)
    assert poll(client, url, auth, tag).status_code == 304
    assert answered_fast(app) == before + 1  # the fast path reconnected


def scope(path: str, query: bytes = b"", /, **headers: str) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "query_string": query,
            "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]}


TOKEN = "kb_0123abcd_" + "x" * 30


def test_parse_poll_takes_only_plain_conditional_polls() -> None:
    codec = PublicIds(b"a test key of 32 bytes, or more!")
    token = public_ids.activate(codec)  # the app's middleware does this for each request
    try:
        check_parse_poll(codec.encode("job", 12), codec.encode("job", 1), codec)
    finally:
        public_ids.deactivate(token)


def check_parse_poll(j12: str, j1: str, codec: PublicIds) -> None:
    auth = {"authorization": f"Bearer {TOKEN}", "if_none_match": '"job-1-2"'}
    job = parse_poll(scope(f"/v1/jobs/{j12}", **auth))
    assert job is not None and (job.kind, job.job_id, job.token) == ("job", 12, TOKEN)
    events = parse_poll(scope(f"/v1/jobs/{j12}/events", b"after=7&limit=1000", **auth))
    assert events is not None and (events.kind, events.after, events.limit) == ("events", 7, 1000)
    fleet = parse_poll(scope("/v1/fleet", **auth))
    assert fleet is not None and fleet.kind == "fleet"
    lower = parse_poll(scope("/v1/fleet", authorization=f"bearer {TOKEN}", if_none_match="*"))
    assert lower is not None
    forged = j1[:-1] + ("0" if j1[-1] != "0" else "1")
    for path, query in (("/v1/jobs/1", b""), ("/v1/jobs/12", b""), (f"/v1/jobs/{forged}", b""),
                        (f"/v1/jobs/{codec.encode('cand', 1)}", b""),
                        ("/v1/jobs/job_0000000000000", b""), (f"/v1/jobs/{j1}/", b""),
                        (f"/v1/jobs/{j1}/candidates", b""), (f"/v1/jobs/{j1}", b"x=1"),
                        (f"/v1/jobs/{j1}/events", b"after=-1"), (f"/v1/jobs/{j1}/events", b"limit=0"),
                        (f"/v1/jobs/{j1}/events", b"after=1&after=2"),
                        (f"/v1/jobs/{j1}/events", b"since=3")):
        assert parse_poll(scope(path, query, **auth)) is None, (path, query)
    assert parse_poll(scope(f"/v1/jobs/{j1}", authorization=f"Bearer {TOKEN}")) is None
    assert parse_poll(scope(f"/v1/jobs/{j1}", if_none_match='"x"')) is None
    assert parse_poll(scope(f"/v1/jobs/{j1}", authorization="Bearer nope",
                            if_none_match='"x"')) is None
    post = {**scope(f"/v1/jobs/{j1}", **auth), "method": "POST"}
    assert parse_poll(post) is None


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_sqlite_keeps_the_endpoints_304_without_a_fast_path(
    client: TestClient, app: FastAPI, auth: dict[str, str], job_id: str,
) -> None:
    tag = client.get(f"/v1/jobs/{job_id}", headers=auth).headers["ETag"]
    assert poll(client, f"/v1/jobs/{job_id}", auth, tag).status_code == 304
    assert app.state.fast_poll.enabled is False and answered_fast(app) == 0


def test_fleet_polls_with_a_broker_see_every_queue_change(
    factory: sessionmaker[Session], settings: Settings, token: str, redis_url: str,
) -> None:
    broker = redis.Redis.from_url(redis_url)
    app = create_app(settings.model_copy(update={"broker_url": redis_url}),
                     session_factory=factory)
    auth = {"Authorization": f"Bearer {token}"}
    marker = uuid.uuid4().hex
    with TestClient(app) as client:
        tag = client.get("/v1/fleet", headers=auth).headers["ETag"]
        assert poll(client, "/v1/fleet", auth, tag).status_code == 304
        assert answered_fast(app) == 1  # LLENs over services/api/redisllen.py
        broker.rpush("gpu.h100", marker)
        try:
            queued = poll(client, "/v1/fleet", auth, tag)
            assert queued.status_code == 200
            assert poll(client, "/v1/fleet", auth, queued.headers["ETag"]).status_code == 304
        finally:
            broker.lrem("gpu.h100", 0, marker)
            broker.close()
        assert poll(client, "/v1/fleet", auth, queued.headers["ETag"]).status_code == 200
        assert answered_fast(app) == 2


def test_an_unreachable_broker_leaves_fleet_polls_to_the_endpoint(
    factory: sessionmaker[Session], settings: Settings, token: str,
) -> None:
    app = create_app(settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"}),
                     session_factory=factory)
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as client:
        first = client.get("/v1/fleet", headers=auth)
        assert {q["source"] for q in first.json()["queues"]} == {"pending_attempts"}
        for _ in range(3):  # the endpoint's fallback answers, and its ETag still holds
            assert poll(client, "/v1/fleet", auth, first.headers["ETag"]).status_code == 304
        assert answered_fast(app) == 0
        assert app.state.fast_poll._pool._open == 1  # its database connection was kept
