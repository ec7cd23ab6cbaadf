"""Conditional polling: job detail, events and fleet answer 304 while nothing changed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Worker, utcnow
from kernelband.db.session import session_scope
from kernelband.scheduling.events import append_event
from tests.utils.public_ids import row_id

Body = Callable[..., dict[str, Any]]
Seed = Callable[[int | str], dict[str, Any]]


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    """Both databases: on Postgres unchanged polls take the fast path (services/api/fastpoll.py)."""
    return str(request.param)


@pytest.fixture
def job_id(client: TestClient, auth: dict[str, str], job_body: Body, seed_results: Seed) -> str:
    created = str(client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"])
    seed_results(created)
    return created


def scheduler_appends_event(factory: sessionmaker[Session], job_id: str) -> None:
    """What every scheduler transaction that changes a job does: append an event."""
    with session_scope(factory) as session:
        append_event(session, row_id(session, job_id), "pull_finished", {"reward": 0.5})


def poll(client: TestClient, path: str, auth: dict[str, str], tag: str) -> Any:
    return client.get(path, headers={**auth, "If-None-Match": tag})


@pytest.mark.parametrize("path", ["/v1/jobs/{id}", "/v1/jobs/{id}/events?after=7"])
def test_an_unchanged_job_answers_304_until_the_scheduler_changes_it(
    client: TestClient, auth: dict[str, str], job_id: str, factory: sessionmaker[Session],
    path: str,
) -> None:
    url = path.format(id=job_id)
    first = client.get(url, headers=auth)
    tag = first.headers["ETag"]
    assert first.status_code == 200 and first.headers["Cache-Control"] == "private, no-cache"
    again = poll(client, url, auth, tag)
    assert again.status_code == 304 and again.content == b"" and again.headers["ETag"] == tag
    assert poll(client, url, auth, f"W/{tag}").status_code == 304  # weak form accepted
    scheduler_appends_event(factory, job_id)
    changed = poll(client, url, auth, tag)
    assert changed.status_code == 200 and changed.headers["ETag"] != tag
    assert poll(client, url, auth, changed.headers["ETag"]).status_code == 304


def test_the_new_event_arrives_with_the_changed_answer(
    client: TestClient, auth: dict[str, str], job_id: str, factory: sessionmaker[Session],
) -> None:
    url = f"/v1/jobs/{job_id}/events?after=7"
    tag = client.get(url, headers=auth).headers["ETag"]
    scheduler_appends_event(factory, job_id)
    page = poll(client, url, auth, tag).json()
    assert [e["seq"] for e in page["events"]] == [8] and page["next_after"] == 8


def test_a_cancel_request_changes_the_job_etag(
    client: TestClient, auth: dict[str, str], job_id: str,
) -> None:
    tag = client.get(f"/v1/jobs/{job_id}", headers=auth).headers["ETag"]
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=auth).status_code == 200
    changed = poll(client, f"/v1/jobs/{job_id}", auth, tag)
    assert changed.status_code == 200 and changed.json()["cancel_requested"] is True


def test_another_teams_etag_gets_404_not_304(
    client: TestClient, auth: dict[str, str], job_id: str, make_token: Callable[[str], str],
) -> None:
    tag = client.get(f"/v1/jobs/{job_id}", headers=auth).headers["ETag"]
    other = {"Authorization": f"Bearer {make_token('other-team')}"}
    assert poll(client, f"/v1/jobs/{job_id}", other, tag).status_code == 404


def test_fleet_answers_304_until_a_heartbeat_arrives(
    client: TestClient, auth: dict[str, str], factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as session:
        session.add(Worker(name="gpu-1", queue="gpu.h100", target="h100",
                           last_heartbeat=utcnow() - timedelta(seconds=30)))
    first = client.get("/v1/fleet", headers=auth)
    (worker,) = first.json()["workers"]
    assert worker["last_heartbeat"] is not None and worker["heartbeat_age_s"] >= 29
    tag = first.headers["ETag"]
    assert poll(client, "/v1/fleet", auth, tag).status_code == 304
    with session_scope(factory) as session:
        row = session.query(Worker).filter_by(name="gpu-1").one()
        row.last_heartbeat = utcnow()
    assert poll(client, "/v1/fleet", auth, tag).status_code == 200
