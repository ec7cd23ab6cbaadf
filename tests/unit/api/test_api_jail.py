"""A problem submitted over the API that goes looking for the service's secrets and database:
it is loaded in the jail, finds nothing, and the 422 carries no secret the node holds."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.sandbox import jail, shutdown_pool
from services.api.app import create_app
from services.api.problems import sandboxed_loader

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"
# module-level code outside the editable region: never statically checked, run at load
ATTACK = '''
import json as _json, os as _os
def _read(path):
    try:
        with open(path, "rb") as f:
            return len(f.read())
    except OSError as exc:
        return type(exc).__name__
_keys = []
for _pid in [p for p in _os.listdir("/proc") if p.isdigit()]:
    try:
        with open(f"/proc/{_pid}/environ", "rb") as f:
            _keys += [_pid] if b"KERNELBAND_LLM_API_KEY" in f.read() else []
    except OSError:
        pass
_report = {"environ_with_key": _keys, "database": _read(DATABASE), "shadow": _read("/etc/shadow")}
raise RuntimeError("REPORT " + _json.dumps(_report) + " and the key I was told: " + CANARY)
'''


@pytest.fixture
def jailed_client(tmp_path: Path, factory: sessionmaker[Session]) -> Iterator[TestClient]:
    if jail.jail_problem():
        pytest.skip(f"bwrap cannot run on this machine ({jail.jail_problem()})")
    app = create_app(Settings(data_dir=tmp_path), session_factory=factory,
                     problem_loader=sandboxed_loader, embedded=True)
    with TestClient(app) as c:
        yield c
    shutdown_pool()


def test_a_problem_module_finds_nothing_and_the_422_carries_no_secret(
    jailed_client: TestClient, auth: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, record_property: object,
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", canary)  # the API process holds the key
    database = tmp_path / "api.sqlite"  # the API's own database file (conftest's engine)
    assert database.exists()
    prelude = f"CANARY = {canary!r}\nDATABASE = {str(database)!r}\n{ATTACK}"
    source = EXAMPLE.read_text().replace("import torch\n", f"import torch\n{prelude}", 1)
    resp = jailed_client.post("/v1/jobs", headers=auth, json={
        "problem": {"source": source, "name": "attack"}, "targets": ["cpu"]})
    record_property("isolation_level", jail.isolation_level())  # type: ignore[operator]
    assert resp.status_code == 422, resp.text
    assert canary not in resp.text
    message = resp.json()["message"]
    assert "[redacted]" in message  # the key the module echoed back was scrubbed
    report = json.JSONDecoder().raw_decode(message.split("REPORT ", 1)[1])[0]
    assert report == {"environ_with_key": [], "database": "FileNotFoundError",
                      "shadow": "FileNotFoundError"}, report
