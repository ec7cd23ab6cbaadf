"""The main API flows on both databases: SQLite and a throw-away Postgres database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

Body = Callable[..., dict[str, Any]]


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_submit_inspect_poll_and_cancel(
    client: TestClient, auth: dict[str, str], job_body: Body,
    seed_results: Callable[[int | str], dict[str, Any]], make_token: Callable[[str], str],
) -> None:
    created = client.post("/v1/jobs", json=job_body(suite="pg"), headers=auth)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    ids = seed_results(job_id)
    job = client.get(f"/v1/jobs/{job_id}", headers=auth).json()
    assert job["tracks"][0]["best"]["label"] == "measured"
    listed = client.get("/v1/jobs", params={"target": "h100", "suite": "pg"}, headers=auth).json()
    assert [j["id"] for j in listed["jobs"]] == [job_id]
    cands = client.get(f"/v1/jobs/{job_id}/candidates", headers=auth).json()["candidates"]
    assert {c["id"] for c in cands} == {ids["original"], ids["child"], ids["bad"]}
    page = client.get(f"/v1/jobs/{job_id}/events", params={"after": 5}, headers=auth).json()
    assert [e["seq"] for e in page["events"]] == [6, 7]
    best = client.get(f"/v1/jobs/{job_id}/best", params={"target": "h100"}, headers=auth)
    assert best.status_code == 200 and "lineage: original -> tiling" in best.text
    assert client.get("/v1/fleet", headers=auth).status_code == 200
    other = {"Authorization": f"Bearer {make_token('beta')}"}
    assert client.get(f"/v1/jobs/{job_id}", headers=other).status_code == 404
    cancel = client.post(f"/v1/jobs/{job_id}/cancel", headers=auth)
    assert cancel.status_code == 200 and cancel.json()["cancel_requested"] is True
    assert client.get("/readyz").status_code == 200
