"""Health, readiness, metrics, fleet and policy validation."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import make_engine, make_session_factory, session_scope
from kernelband.db.models import Attempt, Track, Worker, utcnow
from services.api.app import create_app
from services.api.fleet import queue_depths
from tests.utils.public_ids import public_id, row_id

Body = Callable[..., dict[str, Any]]


def test_health_readiness_and_metrics_need_no_token(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "detail": None}
    assert client.get("/readyz").status_code == 200
    client.post("/v1/jobs", json=job_body(), headers=auth)
    text = client.get("/metrics").text
    assert 'kernelband_jobs{status="queued"} 1.0' in text
    assert 'route="/v1/jobs",status="201"' in text


def test_readyz_is_503_when_the_database_is_gone(tmp_path: Path) -> None:
    # A SQLite path inside a missing directory cannot be opened: a real unreachable database.
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    (tmp_path / "db.sqlite").mkdir()  # a directory where the file should be
    app = create_app(Settings(data_dir=tmp_path), session_factory=make_session_factory(engine))
    with TestClient(app) as c:
        resp = c.get("/readyz")
    assert resp.status_code == 503 and "database unreachable" in resp.json()["detail"]


def test_invalid_policy_params_are_rejected_with_the_policy_message(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    resp = client.post("/v1/jobs", json=job_body(policy="nope"), headers=auth)
    assert resp.status_code == 422 and resp.json()["error"] == "invalid_policy"
    assert "unknown policy 'nope'" in resp.json()["message"]
    resp = client.post("/v1/jobs", json=job_body(policy_params={"c": -1}), headers=auth)
    assert "c must be > 0" in resp.json()["message"]
    ok = client.post("/v1/jobs", json=job_body(policy="ucb1", policy_params={"c": 1.0}), headers=auth)
    assert ok.status_code == 201


def _seed_fleet(factory: sessionmaker[Session], job_id: int) -> None:
    with session_scope(factory) as s:
        track = Track(job_id=job_id, target="h100")
        s.add(track)
        s.flush()
        s.add_all([
            Attempt(job_id=job_id, track_id=track.id, kind="generate", queue="llm", state="pending"),
            Attempt(job_id=job_id, track_id=track.id, kind="profile", queue="gpu.h100",
                    state="dispatched"),
            Attempt(job_id=job_id, track_id=track.id, kind="compile", queue="cpu", state="done"),
            Worker(name="gpu-1", queue="gpu.h100", target="h100", gpu_name="NVIDIA H100",
                   last_heartbeat=utcnow() - timedelta(seconds=30), current_attempt_id=2),
        ])


def test_fleet_lists_workers_and_pending_attempt_depths(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    _seed_fleet(factory, row_id(factory, job_id))
    fleet = client.get("/v1/fleet", headers=auth).json()
    (worker,) = fleet["workers"]
    assert worker["name"] == "gpu-1" and worker["current_attempt_id"] == public_id(factory, "att", 2)
    assert 29 <= worker["heartbeat_age_s"] < 120
    depths = {q["queue"]: (q["depth"], q["source"]) for q in fleet["queues"]}
    assert depths["llm"] == (1, "pending_attempts") and depths["gpu.h100"] == (1, "pending_attempts")
    assert depths["cpu"] == (0, "pending_attempts")


def test_queue_depths_come_from_redis_when_a_broker_is_configured(
    factory: sessionmaker[Session], redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    marker = uuid.uuid4().hex
    client.rpush("gpu.a100", marker, marker)
    try:
        with factory() as session:
            depths = {q.queue: q for q in queue_depths(session, redis_url)}
        assert depths["gpu.a100"].source == "broker" and depths["gpu.a100"].depth >= 2
    finally:
        client.lrem("gpu.a100", 0, marker)
        client.close()
    with factory() as session:  # an unreachable broker falls back to the database
        down = queue_depths(session, "redis://127.0.0.1:1/0")
    assert {q.source for q in down} == {"pending_attempts"}


def test_openapi_documents_every_endpoint(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for op in ops.values():
            assert op.get("summary"), path
    assert "bearer" in str(spec["components"]["securitySchemes"]).lower()
