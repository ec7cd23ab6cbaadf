"""Submission through the real sandboxed loader: the user's module runs in a child process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from services.api.app import create_app
from services.api.problems import sandboxed_loader

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


@pytest.fixture
def sandbox_client(tmp_path: Path, factory: sessionmaker[Session]) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path), session_factory=factory,
                     problem_loader=sandboxed_loader, embedded=True)
    with TestClient(app) as c:
        yield c


def test_real_loader_accepts_example_and_rejects_with_its_reason(
    sandbox_client: TestClient, auth: dict[str, str]
) -> None:
    good = {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"}, "targets": ["cpu"]}
    resp = sandbox_client.post("/v1/jobs", json=good, headers=auth)
    assert resp.status_code == 201, resp.text
    bad = {"problem": {"source": "x = 1\n", "name": "bad"}, "targets": ["cpu"]}
    resp = sandbox_client.post("/v1/jobs", json=bad, headers=auth)
    assert resp.status_code == 422 and resp.json()["error"] == "invalid_problem"
    assert "no editable region" in resp.json()["message"]
