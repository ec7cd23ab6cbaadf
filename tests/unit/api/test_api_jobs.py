"""POST/GET /v1/jobs and cancel, against a real SQLite file database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Job, Problem
from tests.utils.public_ids import row_id

Body = Callable[..., dict[str, Any]]


def test_create_job_returns_queued_job_with_pending_tracks(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    resp = client.post("/v1/jobs", json=job_body(), headers=auth)
    assert resp.status_code == 201, resp.text
    job = resp.json()
    assert resp.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] == "queued"
    assert job["generator"] == "rules"
    assert [t["target"] for t in job["tracks"]] == ["h100", "cpu"]
    assert all(t["status"] == "pending" and t["best"] is None for t in job["tracks"])
    assert len(job["problem"]["content_hash"]) == 64
    assert job["budget"]["iterations"] == 5


def test_same_source_is_stored_once_per_team(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    first = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    second = client.post("/v1/jobs", json=job_body(targets=["a100"]), headers=auth).json()
    assert first["problem"]["id"] == second["problem"]["id"]
    with factory() as session:
        assert session.query(Problem).count() == 1
        assert session.query(Job).count() == 2


def test_list_jobs_filters_by_status_target_and_suite(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    a = client.post("/v1/jobs", json=job_body(targets=["h100"], suite="s1"), headers=auth).json()
    b = client.post("/v1/jobs", json=job_body(targets=["a100"]), headers=auth).json()
    listed = client.get("/v1/jobs", headers=auth).json()
    assert listed["total"] == 2 and [j["id"] for j in listed["jobs"]] == [b["id"], a["id"]]
    by_target = client.get("/v1/jobs", params={"target": "a100"}, headers=auth).json()
    assert [j["id"] for j in by_target["jobs"]] == [b["id"]]
    by_suite = client.get("/v1/jobs", params={"suite": "s1"}, headers=auth).json()
    assert [j["id"] for j in by_suite["jobs"]] == [a["id"]]
    assert client.get("/v1/jobs", params={"status": "running"}, headers=auth).json()["total"] == 0
    bad = client.get("/v1/jobs", params={"status": "bogus"}, headers=auth)
    assert bad.status_code == 422 and "must be one of" in bad.json()["message"]


def test_cancel_sets_flag_and_refuses_finished_jobs(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    resp = client.post(f"/v1/jobs/{job_id}/cancel", headers=auth)
    assert resp.status_code == 200 and resp.json()["cancel_requested"] is True
    with factory() as session, session.begin():
        job = session.get(Job, row_id(session, job_id))
        assert job is not None and job.cancel_requested
        job.status = "completed"
    again = client.post(f"/v1/jobs/{job_id}/cancel", headers=auth)
    assert again.status_code == 409
    assert again.json() == {"error": "job_finished",
                            "message": f"Job {job_id} is already completed; there is nothing to cancel."}


def test_concurrent_job_limit_is_429_with_message(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    for _ in range(3):  # the fixture's limit
        assert client.post("/v1/jobs", json=job_body(), headers=auth).status_code == 201
    resp = client.post("/v1/jobs", json=job_body(), headers=auth)
    assert resp.status_code == 429
    assert resp.json()["error"] == "too_many_jobs"
    assert "limit is 3" in resp.json()["message"]


def test_unknown_job_is_404(client: TestClient, auth: dict[str, str]) -> None:
    resp = client.get("/v1/jobs/999", headers=auth)
    assert resp.status_code == 404 and resp.json()["error"] == "not_found"


def test_a_job_detail_costs_three_queries_whatever_its_tracks(
    client: TestClient, auth: dict[str, str], job_body: Body, engine: Engine,
    seed_results: Callable[[int | str], dict[str, Any]],
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    seed_results(job_id)  # the h100 track with a best candidate and its measurements
    client.get(f"/v1/jobs/{job_id}", headers=auth)  # records the token's use (one update)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]).split()[0])

    event.listen(engine, "before_cursor_execute", count)
    try:
        job = client.get(f"/v1/jobs/{job_id}", headers=auth).json()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert job["tracks"][0]["best"]["method"] == "cuda_events"  # the newest measurement's
    # token with the job's version, the job with its problem, the tracks with their best
    assert statements == ["SELECT"] * 3, statements


def test_a_job_keeps_its_own_sandbox_limits(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    limits = {"compile_s": 900, "config_compile_s": 0}
    resp = client.post("/v1/jobs", json=job_body(limits=limits), headers=auth)
    assert resp.status_code == 201, resp.text
    job = resp.json()
    assert job["limits"] == {"compile_s": 900.0, "config_compile_s": 0.0}
    assert client.get(f"/v1/jobs/{job['id']}", headers=auth).json()["limits"] == job["limits"]
    plain = client.post("/v1/jobs", json=job_body(targets=["a100"]), headers=auth).json()
    assert plain["limits"] == {}  # the node's settings
    with factory() as session:
        assert session.get_one(Job, row_id(session, job["id"])).limits == {"compile_s": 900.0, "config_compile_s": 0.0}


def test_bad_limits_are_refused_naming_the_field(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    for limits, field in (({"compile_s": -1}, "compile_s"), ({"run_s": 10**6}, "run_s"),
                          ({"compile": 5}, "compile")):
        resp = client.post("/v1/jobs", json=job_body(limits=limits), headers=auth)
        assert resp.status_code == 422, resp.text
        assert field in resp.text


def test_the_problem_loads_under_the_jobs_limits(
    settings: Any, factory: sessionmaker[Session], auth: dict[str, str], job_body: Body,
) -> None:
    from api_doubles import parsing_loader

    from kernelband.sandbox import SandboxLimits
    from services.api.app import create_app

    seen: list[SandboxLimits] = []

    def loader(source: str, format: str, name: str) -> Any:
        seen.append(SandboxLimits.from_settings())
        return parsing_loader(source, format, name)

    app = create_app(settings, session_factory=factory, problem_loader=loader, embedded=True)
    with TestClient(app) as client:
        resp = client.post("/v1/jobs", json=job_body(limits={"compile_s": 777, "run_s": 33}),
                           headers=auth)
    assert resp.status_code == 201, resp.text
    assert len(seen) == 1 and seen[0].compile_s == 777 and seen[0].wall_s == 33
    assert SandboxLimits.from_settings().compile_s != 777  # only inside the submission
