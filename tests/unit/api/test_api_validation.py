"""Readable 4xx messages: validation, size limits, loader rejections, policy params."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

Body = Callable[..., dict[str, Any]]


def test_missing_and_unknown_fields_are_reworded(client: TestClient, auth: dict[str, str]) -> None:
    resp = client.post("/v1/jobs", json={"targets": ["h100"], "colour": "red"}, headers=auth)
    assert resp.status_code == 422
    body = resp.json()
    assert body["error"] == "invalid_request"
    assert "'problem' is required" in body["message"]
    assert "'colour' is not a known field" in body["message"]
    assert {d["field"] for d in body["details"]} == {"problem", "colour"}


def test_bad_target_names_the_allowed_values(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    resp = client.post("/v1/jobs", json=job_body(targets=["v100"]), headers=auth)
    assert resp.status_code == 422
    assert "'targets.0'" in resp.json()["message"] and "h100" in resp.json()["message"]


def test_duplicate_targets_and_out_of_range_budget(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    dup = client.post("/v1/jobs", json=job_body(targets=["h100", "h100"]), headers=auth)
    assert dup.status_code == 422 and "each target may appear once" in dup.json()["message"]
    big = client.post("/v1/jobs", json=job_body(budget={"iterations": 10**6}), headers=auth)
    assert big.status_code == 422
    assert "'budget.iterations'" in big.json()["message"] and "1000" in big.json()["message"]


def test_invalid_json_body(client: TestClient, auth: dict[str, str]) -> None:
    resp = client.post(
        "/v1/jobs", content=b"{not json", headers={**auth, "Content-Type": "application/json"}
    )
    assert resp.status_code == 422 and "not valid JSON" in resp.json()["message"]


def test_source_over_the_limit_is_413(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    source = "x = 1\n" * 1000  # 6000 bytes > the fixture's 4096
    body = job_body(problem={"source": source, "format": "native", "name": "big"})
    resp = client.post("/v1/jobs", json=body, headers=auth)
    assert resp.status_code == 413
    assert resp.json()["error"] == "source_too_large"
    assert "6000 bytes" in resp.json()["message"] and "4096" in resp.json()["message"]


def test_huge_body_is_refused_before_parsing(client: TestClient, auth: dict[str, str]) -> None:
    resp = client.post(
        "/v1/jobs", content=b" " * 200_000, headers={**auth, "Content-Type": "application/json"}
    )
    assert resp.status_code == 413 and resp.json()["error"] == "payload_too_large"


def test_invalid_problem_carries_the_loader_reason(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    body = job_body(problem={"source": "def f(:\n", "format": "native", "name": "broken"})
    resp = client.post("/v1/jobs", json=body, headers=auth)
    assert resp.status_code == 422
    assert resp.json()["error"] == "invalid_problem"
    assert "syntax error" in resp.json()["message"] and "(line 1)" in resp.json()["message"]
    no_entry = job_body(problem={"source": "x = 1\n", "format": "native", "name": "noentry"})
    resp = client.post("/v1/jobs", json=no_entry, headers=auth)
    assert "no entry function" in resp.json()["message"]


def test_unknown_route_and_method_use_the_error_body(client: TestClient, auth: dict[str, str]) -> None:
    resp = client.get("/v1/nothing", headers=auth)
    assert resp.status_code == 404 and "/docs" in resp.json()["message"]
    resp = client.delete("/v1/jobs", headers=auth)
    assert resp.status_code == 405 and resp.json()["error"] == "method_not_allowed"


def test_a_malformed_or_out_of_range_job_id_is_404_not_a_crash(
        client: TestClient, auth: dict[str, str]) -> None:
    for text in ("9223372036854775808", "1", "job_", "job_zzzzzzzzzzzzzz", "x" * 500):
        resp = client.get(f"/v1/jobs/{text}", headers=auth)
        assert resp.status_code == 404 and resp.json()["error"] == "not_found", text
