"""POST/GET /v1/suites and export on a real SQLite database with the sandboxed loader."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Job, Track
from kernelband.db.session import session_scope
from services.api.app import create_app
from services.api.teams import create_token
from tests.utils.public_ids import row_id

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BROKEN = "import torch\n\ndef nothing():\n    return 1\n"


@pytest.fixture
def client(settings: Settings, sqlite_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    with TestClient(create_app(settings, session_factory=sqlite_factory)) as test_client:
        yield test_client


def _token(factory: sessionmaker[Session], team: str) -> dict[str, str]:
    with session_scope(factory) as session:
        plaintext = create_token(session, team)
    return {"Authorization": f"Bearer {plaintext}"}


def _body() -> dict[str, object]:
    problems = [{"name": n, "source": (EXAMPLES / f"{n}.py").read_text()}
                for n in ("vector_add", "row_sum")]
    return {"name": "mini", "format": "native", "targets": ["cpu"],
            "policies": ["kernelband", "random"], "budget": 2,
            "problems": [*problems, {"name": "broken", "source": BROKEN}]}


def _finish(factory: sessionmaker[Session], speedups: dict[str, float | None]) -> None:
    """Write finished tracks as the scheduler would (speedup None: the original failed);
    `speedups` is keyed by the public job ids the API answered with."""
    with session_scope(factory) as session:
        for public_job_id, speedup in speedups.items():
            job_id = row_id(session, public_job_id)
            job = session.get_one(Job, job_id)
            job.status = "completed" if speedup else "failed"
            session.add(Track(job_id=job_id, target="cpu",
                              status="completed" if speedup else "failed",
                              best_speedup=speedup, best_label="estimated",
                              held_out="passed" if speedup else None,
                              reason=None if speedup else "original kernel failed on cpu"))


def test_suite_lifecycle(client: TestClient, sqlite_factory: sessionmaker[Session]) -> None:
    auth = _token(sqlite_factory, "alpha")
    created = client.post("/v1/suites", json=_body(), headers=auth)
    assert created.status_code == 201, created.text
    data = created.json()
    assert data["jobs"] == 4 and data["finished"] is False  # 2 loaded problems x 2 policies
    assert [f["name"] for f in data["load_failures"]] == ["broken"]
    assert "editable region" in data["load_failures"][0]["reason"]
    with session_scope(sqlite_factory) as session:
        jobs = list(session.scalars(select(Job).where(Job.suite_id == data["suite_id"])))
        assert sorted(j.policy for j in jobs) == ["kernelband", "kernelband", "random", "random"]
        assert {j.budget_iterations for j in jobs} == {2}
    ids = sorted(data["job_ids"])
    _finish(sqlite_factory, {ids[0]: 2.0, ids[1]: 0.5, ids[2]: 1.0, ids[3]: None})

    report = client.get(f"/v1/suites/{data['suite_id']}", headers=auth).json()
    assert report["finished"] is True
    metrics = {m["policy"]: m for m in report["metrics"]}
    assert set(metrics) == {"kernelband", "random"}
    assert sum(m["problems"] for m in metrics.values()) == 4
    assert all(m["label"] == "estimated" for m in metrics.values())
    assert all("fast1_point_pct" in m for m in metrics.values())
    texts = sorted(p["speedup_text"] for p in report["problems"])
    assert texts == ["0.50x estimated", "1.00x estimated", "2.00x estimated", "not measured"]

    exported = client.get(f"/v1/suites/{data['suite_id']}/export?format=csv", headers=auth)
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert exported.headers["content-type"].startswith("text/csv")
    assert len(rows) == 4 + 2  # problem rows + the broken file once per policy
    assert {r["status"] for r in rows} >= {"completed", "failed", "load_failed"}
    as_json = client.get(f"/v1/suites/{data['suite_id']}/export?format=json", headers=auth)
    assert json.loads(as_json.text)["suite_id"] == data["suite_id"]


def test_other_team_gets_404(client: TestClient, sqlite_factory: sessionmaker[Session]) -> None:
    body = {**_body(), "policies": ["kernelband"], "problems": _body()["problems"][:1]}  # type: ignore[index]
    created = client.post("/v1/suites", json=body, headers=_token(sqlite_factory, "alpha"))
    suite_id = created.json()["suite_id"]
    other = _token(sqlite_factory, "beta")
    assert client.get(f"/v1/suites/{suite_id}", headers=other).status_code == 404
    assert client.get(f"/v1/suites/{suite_id}/export", headers=other).status_code == 404
    assert client.get(f"/v1/suites/{suite_id}").status_code == 401


def test_archive_upload_and_bad_settings(client: TestClient,
                                         sqlite_factory: sessionmaker[Session]) -> None:
    auth = _token(sqlite_factory, "alpha")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("tb/relu.py", (EXAMPLES / "tritonbench" / "relu.py").read_text())
    settings = json.dumps({"format": "tritonbench", "policies": ["bon", "ucb1"], "budget": 1})
    created = client.post("/v1/suites", headers=auth, data={"settings": settings},
                          files={"archive": ("tb.zip", buffer.getvalue(), "application/zip")})
    assert created.status_code == 201, created.text
    assert created.json()["jobs"] == 2 and created.json()["load_failures"] == []
    bad = client.post("/v1/suites", headers=auth, json={**_body(), "policies": ["nope"]})
    assert bad.status_code == 422 and "policy" in bad.json()["message"].lower()
    junk = client.post("/v1/suites", headers=auth, data={"settings": "{}"},
                       files={"archive": ("x.zip", b"junk", "application/zip")})
    assert junk.status_code == 422 and "zip" in junk.json()["message"]


def test_a_suites_limits_reach_every_job(client: TestClient,
                                         sqlite_factory: sessionmaker[Session]) -> None:
    from kernelband.suite import SuiteSettings
    from kernelband.suite.remote import suite_body

    auth = _token(sqlite_factory, "limits-team")
    body = {**_body(), "limits": {"compile_s": 900, "config_compile_s": 60}}
    created = client.post("/v1/suites", json=body, headers=auth)
    assert created.status_code == 201, created.text
    with session_scope(sqlite_factory) as session:
        jobs = list(session.scalars(select(Job).where(Job.suite_id == created.json()["suite_id"])))
        assert jobs and all(j.limits == {"compile_s": 900.0, "config_compile_s": 60.0} for j in jobs)
    settings = SuiteSettings(limits={"run_s": 30.0})
    assert SuiteSettings.from_dict(settings.to_dict()) == settings
    assert SuiteSettings.from_dict({"targets": ["cpu"], "policies": ["random"], "budget": 2}).limits == {}
    assert suite_body("s", "native", [], settings)["limits"] == {"run_s": 30.0}
