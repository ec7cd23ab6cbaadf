"""`kernelband tokens` and the embedded scheduler behind `kernelband serve`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from kernelband.auth_tokens import mint_token
from kernelband.commands import serve, tokens
from kernelband.config import Settings, get_settings
from services.api.app import create_app
from services.api.embedded import EmbeddedScheduler, register_bootstrap_token
from services.api.problems import sandboxed_loader

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[typer.Typer]:
    monkeypatch.setenv("KERNELBAND_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KERNELBAND_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    app = typer.Typer()
    tokens.register(app)
    serve.register(app)
    yield app
    get_settings.cache_clear()


def test_tokens_create_list_revoke(cli: typer.Typer) -> None:
    runner = CliRunner()
    created = runner.invoke(cli, ["tokens", "create", "--team", "research"])
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip().splitlines()[0]
    assert secret.startswith("kb_")
    listed = runner.invoke(cli, ["tokens", "list"])
    assert secret[:11] in listed.stdout and "research" in listed.stdout
    assert secret not in listed.stdout  # the secret is printed once, at creation only
    assert "active" in listed.stdout
    revoked = runner.invoke(cli, ["tokens", "revoke", secret[:11]])
    assert revoked.exit_code == 0 and "Revoked 1" in revoked.stdout
    assert "revoked" in runner.invoke(cli, ["tokens", "list", "--team", "research"]).stdout
    again = runner.invoke(cli, ["tokens", "revoke", secret[:11]])
    assert again.exit_code == 1 and "No active token" in again.output
    empty = runner.invoke(cli, ["tokens", "create", "--team", " "])
    assert empty.exit_code == 2 and "--team must name a team" in empty.output


def test_bootstrap_token_is_registered_once(factory: sessionmaker[Session]) -> None:
    secret = mint_token().secret
    assert register_bootstrap_token(factory, secret, "default") is True
    assert register_bootstrap_token(factory, secret, "default") is False
    with pytest.raises(ValueError, match="not a KernelBand token"):
        register_bootstrap_token(factory, "hunter2", "default")


def test_embedded_scheduler_drives_a_submitted_job_to_a_final_state(
    tmp_path: Path, factory: sessionmaker[Session], auth: dict[str, str]
) -> None:
    settings = Settings(data_dir=tmp_path, poll_interval_s=0.05)
    loop = EmbeddedScheduler(factory, settings, workers=2)
    app = create_app(settings, session_factory=factory, problem_loader=sandboxed_loader,
                     embedded=True, local_workers=loop.describe)
    body = {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"},
            "targets": ["cpu"], "budget": {"iterations": 1}, "parallelism": 1}
    loop.start()
    try:
        with TestClient(app) as client:
            job_id = client.post("/v1/jobs", json=body, headers=auth).json()["id"]
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:
                job = client.get(f"/v1/jobs/{job_id}", headers=auth).json()
                if job["status"] in ("completed", "failed", "cancelled"):
                    break
                time.sleep(0.2)
            events = client.get(f"/v1/jobs/{job_id}/events", headers=auth).json()["events"]
            fleet = client.get("/v1/fleet", headers=auth).json()
    finally:
        loop.stop()
    assert job["status"] in ("completed", "failed"), job
    assert loop.steps > 0 and job["started_at"] is not None
    assert events[0]["seq"] == 1 and events[-1]["kind"] == "job_finished"
    (worker,) = fleet["workers"]
    assert worker["queue"] == "embedded" and worker["heartbeat_age_s"] < 30
