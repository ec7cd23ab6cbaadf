"""A job whose generator model cannot work: refused at submission when that is knowable, else
the job ends `failed` with the generator's error (never `completed`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings, get_settings
from kernelband.generate.model_check import model_refusal
from services.api.app import create_app
from services.api.embedded import EmbeddedScheduler
from services.api.problems import sandboxed_loader
from tests.utils.fake_llm import free_port

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


def _body(model: str) -> dict[str, object]:
    return {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"},
            "targets": ["cpu"], "budget": {"iterations": 1}, "parallelism": 1,
            "generator": {"model": model, "repair_turns": 0}}


def test_a_model_without_a_known_provider_is_refused_at_submission(
    client: TestClient, auth: dict[str, str]
) -> None:
    resp = client.post("/v1/jobs", json=_body("nonexistent/model-x"), headers=auth)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "unknown_model"
    assert "'nonexistent/model-x'" in body["message"] and "openai/gpt-4o-mini" in body["message"]
    suite = client.post("/v1/suites", headers=auth, json={
        "problems": [{"name": "va", "source": EXAMPLE.read_text()}],
        "generator": {"model": "nonexistent/model-x"}})
    assert suite.status_code == 422 and suite.json()["error"] == "unknown_model"


def test_known_provider_names_pass_the_submission_check() -> None:
    assert model_refusal("openai/gpt-4o-mini") is None
    assert model_refusal("hosted_vllm/my-model", "http://127.0.0.1:9/v1") is None
    assert model_refusal("") is None


@pytest.fixture
def unreachable_llm(monkeypatch: pytest.MonkeyPatch) -> str:
    """The workers' LLM settings point at a port where nothing listens."""
    monkeypatch.setenv("KERNELBAND_LLM_API_BASE", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", "test-key")
    monkeypatch.setenv("KERNELBAND_LLM_MAX_RETRIES", "0")
    get_settings.cache_clear()
    yield "openai/no-such-model"
    get_settings.cache_clear()


def test_a_model_that_cannot_be_reached_ends_the_job_failed_with_its_error(
    tmp_path: Path, factory: sessionmaker[Session], auth: dict[str, str], unreachable_llm: str
) -> None:
    settings = Settings(data_dir=tmp_path, poll_interval_s=0.05)
    loop = EmbeddedScheduler(factory, settings, workers=2)
    app = create_app(settings, session_factory=factory, problem_loader=sandboxed_loader,
                     embedded=True)
    loop.start()
    try:
        with TestClient(app) as client:
            created = client.post("/v1/jobs", json=_body(unreachable_llm), headers=auth)
            assert created.status_code == 201, created.text
            job_id, deadline = created.json()["id"], time.monotonic() + 150
            while time.monotonic() < deadline:
                job = client.get(f"/v1/jobs/{job_id}", headers=auth).json()
                if job["status"] in ("completed", "failed", "cancelled"):
                    break
                time.sleep(0.2)
    finally:
        loop.stop()
    assert job["status"] == "failed", job
    assert "the generator could not be used with model 'openai/no-such-model'" in job["reason"]
    assert "Connection error" in job["reason"]  # the provider client's own words
