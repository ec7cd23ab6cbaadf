"""API under fire: 1,000+ schema-generated authenticated requests, auth on every path, team
isolation, quotas, the tokens CLI."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck
from hypothesis import settings as hsettings

from kernelband.config import Settings
from kernelband.db import Base, make_engine, make_session_factory, session_scope
from services.api.app import create_app
from services.api.teams import create_token
from tests.reliability.conftest import TALLY
from tests.utils.faults import subprocess_ok

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "api"))
from api_doubles import parsing_loader  # noqa: E402  (the API tests' parsing loader, reused)

REPO = Path(__file__).resolve().parents[2]
PUBLIC = {"/healthz", "/readyz", "/metrics"}
EXAMPLES_PER_OPERATION = 70  # 19 operations: well over 1,000 requests in total
SOURCE = (REPO / "examples" / "vector_add.py").read_text()

# schemathesis needs the schema at collection time: the app is built here on its own SQLite.
_DIR = Path(tempfile.mkdtemp(prefix="kb-reliability-fuzz-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
_ENGINE = make_engine(f"sqlite:///{_DIR / 'fuzz.sqlite'}")
Base.metadata.create_all(_ENGINE)
_FACTORY = make_session_factory(_ENGINE)
with session_scope(_FACTORY) as _session:
    TOKEN = create_token(_session, "fuzz")
_SETTINGS = Settings(data_dir=_DIR, broker_url="", max_source_bytes=64 * 1024,
                     max_concurrent_jobs_per_team=3)
_APP = create_app(_SETTINGS, session_factory=_FACTORY, problem_loader=parsing_loader,
                  embedded=True)
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)


@schema.parametrize()
@hsettings(max_examples=EXAMPLES_PER_OPERATION, deadline=None,
           suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_never_5xx_and_4xx_explain_themselves(case: schemathesis.Case) -> None:
    response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
    TALLY["fuzz_requests"] += 1
    TALLY["fuzz_5xx"] += int(response.status_code >= 500)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
    if 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body.get("error"), str) and body["error"], body
        assert isinstance(body.get("message"), str) and len(body["message"]) > 10, body


def test_fuzz_sent_over_a_thousand_requests() -> None:
    """Runs after the fuzz test in file order; the count is printed in the tally."""
    if TALLY["fuzz_requests"] == 0:
        pytest.skip("run together with the fuzz test to count its requests")
    print(f"fuzz: {TALLY['fuzz_requests']} requests, {TALLY['fuzz_5xx']} with a 5xx")
    assert TALLY["fuzz_requests"] >= 1000 and TALLY["fuzz_5xx"] == 0


def _fill(path: str) -> str:
    return path.replace("{target}", "cpu").replace("{suite_id}", "s1").replace(
        "{job_id}", "1").replace("{candidate_id}", "1")


def test_every_endpoint_but_health_needs_a_token(tmp_path: Path) -> None:
    client = TestClient(_APP)
    paths = _APP.openapi()["paths"]
    checked = 0
    for path, operations in paths.items():
        for method in operations:
            for headers in ({}, {"Authorization": "Bearer kb_not-a-real-token"}):
                response = client.request(method.upper(), _fill(path), headers=headers,
                                          json={} if method == "post" else None)
                if path in PUBLIC:
                    assert response.status_code < 400, (method, path, response.text)
                    continue
                assert response.status_code == 401, (method, path, response.status_code)
                assert response.json()["error"] and response.json()["message"]
                checked += 1
    print(f"auth: {checked} unauthenticated requests refused with 401")
    assert checked >= 2 * (sum(len(v) for v in paths.values()) - len(PUBLIC))


def _job_body(source: str = SOURCE) -> dict[str, object]:
    return {"problem": {"source": source, "name": "vector_add"}, "targets": ["cpu"]}


def test_teams_are_isolated_and_limited(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'teams.sqlite'}")
    Base.metadata.create_all(engine)
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        alice, bob = create_token(session, "alice"), create_token(session, "bob")
    settings = Settings(data_dir=tmp_path, broker_url="", max_source_bytes=16 * 1024,
                        max_concurrent_jobs_per_team=2)
    app = create_app(settings, session_factory=factory, problem_loader=parsing_loader,
                     embedded=True)
    as_alice = {"Authorization": f"Bearer {alice}"}
    as_bob = {"Authorization": f"Bearer {bob}"}
    with TestClient(app) as client:
        created = client.post("/v1/jobs", json=_job_body(), headers=as_alice)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        for method, path in (("GET", f"/v1/jobs/{job_id}"), ("POST", f"/v1/jobs/{job_id}/cancel"),
                             ("GET", f"/v1/jobs/{job_id}/events"),
                             ("GET", f"/v1/jobs/{job_id}/best?target=cpu")):
            response = client.request(method, path, headers=as_bob)
            assert response.status_code == 404, (method, path, response.text)
        assert job_id not in [j["id"] for j in client.get("/v1/jobs", headers=as_bob).json()["jobs"]]
        assert client.post("/v1/jobs", json=_job_body(), headers=as_alice).status_code == 201
        third = client.post("/v1/jobs", json=_job_body(), headers=as_alice)
        assert third.status_code == 429 and third.json()["error"] == "too_many_jobs", third.text
        assert client.post("/v1/jobs", json=_job_body(), headers=as_bob).status_code == 201
        huge = SOURCE + "\n# padding\n" + "#" * (20 * 1024)
        too_big = client.post("/v1/jobs", json=_job_body(huge), headers=as_bob)
        assert too_big.status_code == 413 and too_big.json()["message"], too_big.text
    engine.dispose()


def test_tokens_cli_create_list_revoke(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELBAND_")}
    env.update({"KERNELBAND_DATA_DIR": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    cli = [sys.executable, "-m", "kernelband.cli", "tokens"]
    secret = subprocess_ok([*cli, "create", "--team", "ops", "--name", "ci"], env,
                           REPO).splitlines()[0].strip()
    prefix = secret[:11]
    listing = subprocess_ok([*cli, "list"], env, REPO)
    assert "ops" in listing and secret not in listing  # the secret is shown once, never listed
    assert "revoked 1" in subprocess_ok([*cli, "revoke", prefix], env, REPO).lower()
    engine = make_engine(f"sqlite:///{tmp_path / 'kernelband.sqlite'}")
    app = create_app(Settings(data_dir=tmp_path, broker_url=""),
                     session_factory=make_session_factory(engine),
                     problem_loader=parsing_loader, embedded=True)
    with TestClient(app) as client:
        response = client.get("/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
        assert response.status_code == 401, response.text
    engine.dispose()
    TALLY["tokens_revoked"] += 1
