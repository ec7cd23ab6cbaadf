"""The polled reads' query shapes on Postgres: an events poll reads event numbers from the
(job_id, seq) index alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from services.api.queries import _EVENT_SEQS
from tests.utils.public_ids import row_id


@pytest.fixture(params=["postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_event_numbers_of_a_poll_come_from_an_index_only_scan(
    client: TestClient, auth: dict[str, str], job_body: Callable[..., dict[str, Any]],
    seed_results: Callable[[int | str], dict[str, Any]], engine: Engine,
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    seed_results(job_id)
    sql = str(_EVENT_SEQS.compile(engine))
    with engine.connect() as conn:
        conn.execute(text("SET enable_seqscan = off"))  # a tiny table would be scanned whole
        plan = "\n".join(row[0] for row in conn.exec_driver_sql(
            "EXPLAIN " + sql, {"job_id": row_id(conn, job_id), "after": 3, "limit": 101}))
    assert "Index Only Scan using uq_events_job_seq" in plan, plan
