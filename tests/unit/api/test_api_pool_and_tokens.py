"""Load-safety of the API's database use, the one token format, and unbounded response budgets."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from kernelband.auth_tokens import token_prefix
from kernelband.config import Settings
from kernelband.db import Base, make_engine, make_session_factory, repository, session_scope
from kernelband.db.session import POOL_MAX_OVERFLOW, POOL_SIZE, POOL_TIMEOUT_S
from services.api.app import create_app
from services.api.auth import TeamRef, authenticate
from services.api.deps import API_WORKER_THREADS
from services.api.teams import create_token
from tests.utils.public_ids import public_id

SOURCE = "def entry(x):\n    return x\n"


def _repository_job(factory: sessionmaker[Session], team: str,
                    **options: object) -> tuple[str, str]:
    """A job and a token made only through the repository (no API call); (job id, token)."""
    with session_scope(factory) as session:
        owner = repository.get_or_create_team(session, team)
        problem = repository.get_or_create_problem(
            session, owner.id, "p", "native", SOURCE, {}, content_hash=f"h-{team}")
        job = repository.create_job(session, owner.id, problem.id, ["cpu"], **options)
        _, token = repository.create_api_token(session, owner.id, "repo")
        return public_id(session, "job", job.id), token


def test_repository_token_has_the_api_format_and_authenticates(
    client: TestClient, factory: sessionmaker[Session],
) -> None:
    job_id, token = _repository_job(factory, "repo-team")
    assert token_prefix(token) is not None  # kb_<8 hex>_<secret>
    answer = client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    with session_scope(factory) as session:
        team = authenticate(session, token)
    assert isinstance(team, TeamRef) and team.name == "repo-team"


def test_api_token_is_found_by_the_repository(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as session:
        token = create_token(session, "alpha", "cli")
        row = repository.find_token(session, token)
        assert row is not None and row.prefix == token_prefix(token)


def test_large_repository_budget_is_returned_not_rejected(
    client: TestClient, factory: sessionmaker[Session],
) -> None:
    job_id, token = _repository_job(factory, "big", budget_iterations=50_000,
                                    budget_wall_s=5.0)
    answer = client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["budget"]["iterations"] == 50_000
    assert answer.json()["budget"]["wall_s"] == 5
    listed = client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200, listed.text


def test_request_budget_is_still_bounded(client: TestClient, auth: dict[str, str],
                                         job_body: object) -> None:
    body = job_body()  # type: ignore[operator]
    body["budget"] = {"iterations": 50_000}
    answer = client.post("/v1/jobs", json=body, headers=auth)
    assert answer.status_code == 422 and "iterations" in answer.text


def _small_pool_app(tmp_path: Path, settings: Settings, size: int,
                    timeout_s: float) -> tuple[FastAPI, Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'pool.sqlite'}", pool_size=size,
                         max_overflow=0, pool_timeout=timeout_s)
    Base.metadata.create_all(engine)
    app = create_app(settings, session_factory=make_session_factory(engine), embedded=True)
    return app, engine


async def _burst(app: FastAPI, path: str, token: str, count: int) -> list[int]:
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        answers = await asyncio.gather(*(c.get(path) for _ in range(count)))
    return [a.status_code for a in answers]


def test_many_concurrent_requests_on_a_tiny_pool_do_not_stall(
    tmp_path: Path, settings: Settings,
) -> None:
    # Far more threads (API_WORKER_THREADS) than connections: with a connection held across
    # thread hops this deadlocks until the pool timeout; now every request succeeds quickly.
    app, engine = _small_pool_app(tmp_path, settings, size=2, timeout_s=3.0)
    job_id, token = _repository_job(make_session_factory(engine), "load")
    statuses = asyncio.run(_burst(app, f"/v1/jobs/{job_id}", token, 120))
    assert statuses == [200] * 120  # a request that waited out the pool timeout would be a 503
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    engine.dispose()


def test_exhausted_pool_answers_503_quickly(tmp_path: Path, settings: Settings) -> None:
    app, engine = _small_pool_app(tmp_path, settings, size=1, timeout_s=0.2)
    job_id, token = _repository_job(make_session_factory(engine), "busy")
    with engine.connect(), TestClient(app) as client:  # the only connection is taken
        started = time.perf_counter()
        answer = client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 503
    assert answer.json()["error"] == "database_busy" and "retry" in answer.json()["message"]
    assert time.perf_counter() - started < 10.0  # refused, not queued behind the held connection
    engine.dispose()


def test_postgres_engines_get_the_sized_pool() -> None:
    engine = make_engine("postgresql://nobody@127.0.0.1:1/none")  # nothing connects yet
    pool = engine.pool
    assert pool.size() == POOL_SIZE  # type: ignore[attr-defined]
    assert pool._max_overflow == POOL_MAX_OVERFLOW  # type: ignore[attr-defined]
    assert pool.timeout() == POOL_TIMEOUT_S  # type: ignore[attr-defined]
    assert API_WORKER_THREADS <= POOL_SIZE + POOL_MAX_OVERFLOW
    assert isinstance(make_engine("postgresql://x@127.0.0.1:1/y", poolclass=NullPool).pool,
                      NullPool)


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/fleet"])
def test_endpoints_leave_no_connection_checked_out(
    client: TestClient, auth: dict[str, str], engine: Engine, path: str,
) -> None:
    assert client.get(path, headers=auth).status_code == 200
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
