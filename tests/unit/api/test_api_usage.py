"""GET /v1/usage sums the attempts' recorded times and the LLM calls; quotas give 429."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband import usage
from kernelband.db import session_scope
from kernelband.db.models import Attempt, LlmUsage, Team, Track
from tests.utils.public_ids import row_id

Body = Callable[..., dict[str, Any]]


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _seed_spend(factory: sessionmaker[Session], job: str,
                now: datetime) -> dict[str, float]:
    """Attempts as the scheduler records them (started by a worker, then finished), and LLM
    calls; returns what the sums must be."""
    job_id = row_id(factory, job)
    yesterday = now - timedelta(days=1)
    rows = [("gpu.h100", now - timedelta(seconds=40), 12.5), ("gpu.h100", now, 7.25),
            ("gpu.a100", now, 3.0), ("cpu", now, 4.0), ("llm", now, 30.0),
            ("gpu.h100", yesterday, 100.0)]
    with session_scope(factory) as s:
        track = Track(job_id=job_id, target="h100", status="running")
        s.add(track)
        s.flush()
        for queue, finished, seconds in rows:
            s.add(Attempt(job_id=job_id, track_id=track.id, kind="profile", state="done",
                          queue=queue, started_at=finished - timedelta(seconds=seconds),
                          finished_at=finished))
        s.add_all([LlmUsage(job_id=job_id, model="m", tokens=1200, usd=0.012, created_at=now),
                   LlmUsage(job_id=job_id, model="m", tokens=800, usd=0.008, created_at=now),
                   LlmUsage(job_id=job_id, model="m", tokens=5, usd=1.0, created_at=yesterday)])
    return {"h100_today": 19.75, "a100_today": 3.0, "cpu_today": 4.0, "tokens_today": 2000,
            "usd_today": 0.02, "h100_yesterday": 100.0}


def test_usage_sums_match_the_attempts_recorded_times_and_tokens(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    now = datetime.now(UTC).replace(hour=12)  # both seeded days stay whole UTC days
    if now > datetime.now(UTC):
        now -= timedelta(days=1)
    want = _seed_spend(factory, job_id, now)
    body = client.get("/v1/usage", params={"days": 3}, headers=auth).json()
    days = {d["day"]: d for d in body["days"]}
    today, before = days[now.date().isoformat()], days[(now - timedelta(days=1)).date().isoformat()]
    assert today["gpu_s"] == {"a100": want["a100_today"], "h100": want["h100_today"]}
    assert today["cpu_s"] == want["cpu_today"]  # llm-queue time is counted as tokens, not seconds
    assert today["llm_tokens"] == want["tokens_today"] and today["usd"] == pytest.approx(0.02)
    assert before["gpu_s"] == {"h100": want["h100_yesterday"]} and before["llm_tokens"] == 5
    (job,) = body["jobs"]
    assert job["job_id"] == job_id and job["gpu_s_total"] == pytest.approx(122.75)
    assert job["llm_tokens"] == 2005 and job["usd"] == pytest.approx(1.02)
    assert body["since"].endswith("Z") and body["today"]["resets_at"].endswith("T00:00:00Z")


def test_a_daily_quota_stops_a_submission_with_429_naming_it(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    _seed_spend(factory, job_id, datetime.now(UTC))
    with session_scope(factory) as s:
        alpha = s.query(Team).filter_by(name="alpha").one().id
        usage.set_quotas(s, alpha, gpu_s_per_day=30.0)
    assert usage.teams_over_quota(factory()) == {}  # 22.75 GPU-seconds today, of 30
    with session_scope(factory) as s:
        usage.set_quotas(s, alpha, gpu_s_per_day=10.0)
    over = usage.teams_over_quota(factory())
    assert over[alpha].limit == "gpu_s_per_day" and over[alpha].used == pytest.approx(22.75, abs=1e-3)
    resp = client.post("/v1/jobs", json=job_body(), headers=auth)
    assert resp.status_code == 429 and resp.json()["error"] == "quota_exceeded"
    assert "gpu_s_per_day (10)" in resp.json()["message"]
    assert "resets at" in resp.json()["message"] and "T00:00:00Z" in resp.json()["message"]
    assert 0 < int(resp.headers["retry-after"]) <= 86400
    assert resp.headers["x-kernelband-quota"] == "gpu_s_per_day"
    assert client.get("/v1/usage", headers=auth).json()["today"]["over_quota"] == "gpu_s_per_day"


def test_a_teams_concurrency_quota_overrides_the_service_limit(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    assert client.post("/v1/jobs", json=job_body(), headers=auth).status_code == 201
    with session_scope(factory) as s:
        usage.set_quotas(s, s.query(Team).filter_by(name="alpha").one().id, concurrent_jobs=1)
    resp = client.post("/v1/jobs", json=job_body(), headers=auth)
    assert resp.status_code == 429 and resp.json()["error"] == "too_many_jobs"
    assert "limit is 1" in resp.json()["message"]
    assert client.get("/v1/usage", headers=auth).json()["quotas"]["concurrent_jobs"] == 1
