"""Job results: tracks with labelled best, candidates, best download, bandit arms, events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Attempt
from kernelband.db.session import session_scope
from tests.utils.public_ids import row_id

Body = Callable[..., dict[str, Any]]
Seed = Callable[[int | str], dict[str, Any]]


@pytest.fixture
def job_id(client: TestClient, auth: dict[str, str], job_body: Body) -> str:
    return str(client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"])


def test_job_shows_best_speedup_with_label(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed
) -> None:
    ids = seed_results(job_id)
    job = client.get(f"/v1/jobs/{job_id}", headers=auth).json()
    h100, cpu = job["tracks"]
    assert h100["status"] == "running" and h100["iterations_done"] == 2
    assert h100["best"] == {"candidate_id": ids["child"], "speedup": 4.0, "time_ms": 0.5,
                            "label": "measured", "method": "cuda_events", "device": "NVIDIA H100",
                            "speedup_low": 3.8, "speedup_high": 4.2, "significant": True,
                            "speedup_method": "interleaved ABBA rounds, bootstrap 95%",
                            "speedup_text": "4.00x [3.80, 4.20]", "speedup_final": False}
    assert h100["held_out"] == "passed"
    assert cpu == {**cpu, "target": "cpu", "status": "pending", "best": None}
    assert job["spend"]["iterations"] == 2


def test_candidates_have_lineage_reasons_and_labelled_measurements(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed
) -> None:
    ids = seed_results(job_id)
    cands = client.get(f"/v1/jobs/{job_id}/candidates", headers=auth).json()["candidates"]
    by_id = {c["id"]: c for c in cands}
    assert list(by_id) == [ids["original"], ids["child"], ids["bad"]]
    child = by_id[ids["child"]]
    assert child["parent_id"] == ids["original"] and child["strategy"] == "tiling"
    assert child["measurements"][0]["label"] == "measured"
    assert child["measurements"][0]["speedup"] == pytest.approx(4.0)
    assert child["measurements"][0]["signature"] == {
        "sm_pct": 30.25, "dram_pct": 88.0, "l2_pct": 51.5, "source": "ncu", "note": ""}
    original = by_id[ids["original"]]["measurements"][0]["signature"]
    assert original["source"] == "estimate" and "ERR_NVGPUCTRPERM" in original["note"]
    assert by_id[ids["bad"]]["reason"] == "wrong_result:case=2,max_abs_err=0.5"
    rejected = client.get(f"/v1/jobs/{job_id}/candidates", params={"status": "rejected"},
                          headers=auth).json()["candidates"]
    assert [c["id"] for c in rejected] == [ids["bad"]]
    assert client.get(f"/v1/jobs/{job_id}/candidates", params={"target": "cpu"},
                      headers=auth).json()["candidates"] == []


def test_best_download_splices_region_under_a_provenance_header(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed
) -> None:
    ids = seed_results(job_id)
    resp = client.get(f"/v1/jobs/{job_id}/best", params={"target": "h100"}, headers=auth)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/x-python")
    assert f"vector_add.h100.{job_id}.py" in resp.headers["content-disposition"]
    text = resp.text
    assert text.startswith("# KernelBand best kernel for target h100")
    assert f"job {job_id}," in text and f"candidate {ids['child']}" in text and "lineage: original -> tiling" in text
    assert "speedup 4.00x [3.80, 4.20]" in text and "measured (cuda_events on NVIDIA H100)" in text
    assert "pass  # the faster child" in text and "def reference(" in text  # spliced module
    compile(text, "best.py", "exec")


def test_best_download_before_any_result_is_404_with_advice(
    client: TestClient, auth: dict[str, str], job_id: str
) -> None:
    resp = client.get(f"/v1/jobs/{job_id}/best", params={"target": "h100"}, headers=auth)
    assert resp.status_code == 404 and resp.json()["error"] == "no_best_kernel"
    other = client.get(f"/v1/jobs/{job_id}/best", params={"target": "a100"}, headers=auth)
    assert other.status_code == 404 and "its targets are h100, cpu" in other.json()["message"]


def test_bandit_arms(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed
) -> None:
    seed_results(job_id)
    out = client.get(f"/v1/jobs/{job_id}/tracks/h100/bandit", headers=auth).json()
    assert out["total_pulls"] == 3.0
    assert out["arms"] == [
        {"cluster": 0, "strategy": "pipeline", "pulls": 1.0, "mean_reward": 0.5, "masked": True,
         "ucb_score": None},
        {"cluster": 0, "strategy": "tiling", "pulls": 2.0, "mean_reward": 0.75, "masked": False,
         "ucb_score": 1.9},
    ]
    empty = client.get(f"/v1/jobs/{job_id}/tracks/cpu/bandit", headers=auth).json()
    assert empty["arms"] == [] and empty["total_pulls"] == 0


def test_events_paginate_with_after_and_limit(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed
) -> None:
    seed_results(job_id)
    seen: list[int] = []
    after, more = 0, True
    while more:
        page = client.get(f"/v1/jobs/{job_id}/events", params={"after": after, "limit": 3},
                          headers=auth).json()
        seen += [e["seq"] for e in page["events"]]
        after, more = page["next_after"], page["has_more"]
    assert seen == list(range(1, 8))
    tail = client.get(f"/v1/jobs/{job_id}/events", params={"after": 7}, headers=auth).json()
    assert tail == {"events": [], "next_after": 7, "has_more": False}
    bad = client.get(f"/v1/jobs/{job_id}/events", params={"limit": 0}, headers=auth)
    assert bad.status_code == 422 and "'limit'" in bad.json()["message"]


def test_candidate_detail_includes_its_region(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed
) -> None:
    ids = seed_results(job_id)
    out = client.get(f"/v1/jobs/{job_id}/candidates/{ids['child']}", headers=auth).json()
    assert out["strategy"] == "tiling" and "the faster child" in out["editable"]
    assert out["measurements"][0]["label"] == "measured"
    for other in ("99999", "cand_0000000000000", ids["child"][:-1], job_id):
        missing = client.get(f"/v1/jobs/{job_id}/candidates/{other}", headers=auth)
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_stages_say_where_the_job_time_goes(
    client: TestClient, auth: dict[str, str], job_id: str, seed_results: Seed,
    factory: sessionmaker[Session],
) -> None:
    ids = seed_results(job_id)
    add_profile_attempts(factory, row_id(factory, job_id), ids["track"])
    stages = client.get(f"/v1/jobs/{job_id}/stages", headers=auth).json()
    assert stages == [{"kind": "profile", "finished": 2, "failed": 0, "work_median_s": 3.0,
                       "work_p90_s": 4.0, "work_total_s": 6.0, "wait_median_s": 1.0,
                       "parts": {"check": 2.5}, "parts_total_s": {"check": 5.0}}]
    other = client.get("/v1/jobs/999999/stages", headers=auth)
    assert other.status_code == 404


def add_profile_attempts(factory: sessionmaker[Session], job_id: int, track_id: int) -> None:
    """Two finished profile attempts: 2 s and 4 s of worker time after 1 s in the queue."""
    t0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    with session_scope(factory) as s:
        for work in (2.0, 4.0):
            s.add(Attempt(job_id=job_id, track_id=track_id, kind="profile", state="done",
                          dispatched_at=t0, started_at=t0 + timedelta(seconds=1),
                          finished_at=t0 + timedelta(seconds=1 + work),
                          result={"ok": True, "timings": {"check": work - 0.5}}))
