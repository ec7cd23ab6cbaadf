"""One API, one set of habits: times end in Z, names stay as submitted, errors name the field,
unknown fields are refused, every $ref of the OpenAPI document resolves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db import session_scope
from kernelband.db.models import Job
from services.api.app import create_app

Body = Callable[..., dict[str, Any]]


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_ref_of_the_openapi_document_resolves(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    refs = set(_refs(doc))
    assert "#/components/schemas/SuiteCreate" in refs
    for ref in refs:
        node: Any = doc
        for part in ref.removeprefix("#/").split("/"):
            assert part in node, f"{ref} does not resolve"
            node = node[part]
    suite = doc["components"]["schemas"]["SuiteCreate"]
    assert suite["properties"]["budget"]["$ref"] == "#/components/schemas/SuiteBudgetIn"


def test_times_end_in_z_on_post_and_get(client: TestClient, auth: dict[str, str],
                                        job_body: Body) -> None:
    posted = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    got = client.get(f"/v1/jobs/{posted['id']}", headers=auth).json()
    listed = client.get("/v1/jobs", headers=auth).json()["jobs"][0]
    assert posted["created_at"].endswith("Z")
    assert got["created_at"] == posted["created_at"] == listed["created_at"]


def test_a_problem_keeps_the_name_it_was_submitted_with(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    first = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    body = job_body()
    body["problem"]["name"] = "va"
    second = client.post("/v1/jobs", json=body, headers=auth).json()
    assert first["problem"]["id"] == second["problem"]["id"]  # stored once
    assert (first["problem"]["name"], second["problem"]["name"]) == ("vector_add", "va")
    again = client.get(f"/v1/jobs/{second['id']}", headers=auth).json()
    assert again["problem"]["name"] == "va"
    names = {j["id"]: j["problem_name"] for j in client.get("/v1/jobs", headers=auth).json()["jobs"]}
    assert names == {first["id"]: "vector_add", second["id"]: "va"}


def test_best_needs_no_target_when_the_job_has_one(
    client: TestClient, auth: dict[str, str], job_body: Body,
    seed_results: Callable[[int | str], dict[str, Any]], factory: sessionmaker[Session],
) -> None:
    one = client.post("/v1/jobs", json=job_body(targets=["h100"]), headers=auth).json()
    seed_results(one["id"])
    resp = client.get(f"/v1/jobs/{one['id']}/best", headers=auth)
    assert resp.status_code == 200, resp.text
    assert "vector_add.h100" in resp.headers["content-disposition"]
    two = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    ambiguous = client.get(f"/v1/jobs/{two['id']}/best", headers=auth)
    assert ambiguous.status_code == 422
    assert "h100, cpu" in ambiguous.json()["message"] and "?target=" in ambiguous.json()["message"]


def test_a_candidate_of_another_own_job_is_named_as_such(
    client: TestClient, auth: dict[str, str], job_body: Body,
    seed_results: Callable[[int | str], dict[str, Any]],
) -> None:
    a = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    b = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    ids = seed_results(a["id"])
    resp = client.get(f"/v1/jobs/{b['id']}/candidates/{ids['child']}", headers=auth)
    assert resp.status_code == 404
    assert resp.json()["message"].startswith(f"Job {b['id']} has no candidate {ids['child']}")


def test_invalid_json_names_the_body_not_a_character_offset(
    client: TestClient, auth: dict[str, str]
) -> None:
    resp = client.post("/v1/jobs", content=b'{"problem": {', headers={
        **auth, "Content-Type": "application/json"})
    assert resp.status_code == 422
    assert [d["field"] for d in resp.json()["details"]] == ["body"]
    assert "not valid JSON" in resp.json()["message"]


def test_unknown_fields_are_refused_on_skill_settings(
    client: TestClient, auth: dict[str, str]
) -> None:
    resp = client.put("/v1/skills/settings", json={"enabled": False, "enable": True}, headers=auth)
    assert resp.status_code == 422
    assert resp.json()["details"][0]["field"] == "enable"


def test_a_suite_budget_has_the_job_shape_and_the_old_integer_still_reads(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    problem = {"name": "va", "source": job_body()["problem"]["source"]}
    for budget in ({"iterations": 3}, 3):
        resp = client.post("/v1/suites", json={"problems": [problem], "budget": budget},
                           headers=auth)
        assert resp.status_code == 201, resp.text
        assert resp.json()["created_at"].endswith("Z")
    with session_scope(factory) as session:
        assert {j.budget_iterations for j in session.query(Job)} == {3}
    bad = client.post("/v1/suites", json={"problems": [problem], "budget": {"iters": 3}},
                      headers=auth)
    assert bad.status_code == 422 and "iters" in bad.json()["message"]


@pytest.fixture
def metrics_app(settings: Settings, factory: sessionmaker[Session]) -> FastAPI:
    guarded = settings.model_copy(update={"metrics_token": SecretStr("scrape-secret")})
    return create_app(guarded, session_factory=factory, embedded=True)


def test_metrics_can_require_a_token(client: TestClient, metrics_app: FastAPI) -> None:
    assert client.get("/metrics").status_code == 200  # open unless configured
    with TestClient(metrics_app) as guarded:
        refused = guarded.get("/metrics")
        assert refused.status_code == 401 and "KERNELBAND_METRICS_TOKEN" in refused.json()["message"]
        assert guarded.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        ok = guarded.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
        assert ok.status_code == 200 and "kernelband_jobs" in ok.text


def test_dashboard_job_page_is_404_for_no_such_job_and_pulls_are_whole(
    client: TestClient, auth: dict[str, str], job_body: Body,
    seed_results: Callable[[int | str], dict[str, Any]],
) -> None:
    for text in ("999", "job_0000000000000", "cand_0000000000000"):
        missing = client.get(f"/ui/jobs/{text}")
        assert missing.status_code == 404 and f"There is no job {text}" in missing.text
    job = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    assert client.get(f"/ui/jobs/{job['id']}").status_code == 200
    ids = seed_results(job["id"])
    bandit = client.get(f"/v1/jobs/{job['id']}/tracks/h100/bandit", headers=auth).json()
    assert (bandit["pulls_done"], bandit["pulls_dispatched"]) == (2, 3)
    source = client.get(f"/ui/api/jobs/{job['id']}/candidates/{ids['child']}/source",
                        headers=auth).json()
    assert (source["status"], source["label"]) == ("measured", "measured")


def test_suite_body_errors_name_the_field_like_job_bodies(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    source = job_body()["problem"]["source"]
    resp = client.post("/v1/suites", headers=auth, json={
        "problems": [{"name": "bad name!", "source": source}], "targets": ["cpu"]})
    assert resp.status_code == 422 and resp.json()["error"] == "invalid_request"
    assert [d["field"] for d in resp.json()["details"]] == ["problems.0.name"]
    broken = client.post("/v1/suites", content=b'{"problems": [', headers={
        **auth, "Content-Type": "application/json"})
    assert broken.status_code == 422 and broken.json()["details"][0]["field"] == "body"
    upload = client.post("/v1/suites", headers=auth, files={"archive": ("a.zip", b"x")},
                         data={"settings": '{"budget": {"iters": 2}}'})
    assert upload.status_code == 422 and upload.json()["details"][0]["field"] == "budget.iters"
