"""A client generated from /openapi.json by openapi-python-client submits a job and reads it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.utils.live_server import serve_in_thread

VENV_BIN = Path(sys.executable).parent
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


def _generate(doc: dict[str, object], into: Path) -> None:
    spec = into / "openapi.json"
    spec.write_text(json.dumps(doc))
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [str(VENV_BIN / "openapi-python-client"), "generate", "--path", str(spec),
         "--meta", "none", "--output-path", str(into / "kb_generated_client")],
        capture_output=True, text=True, env=env, cwd=into, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_a_generated_client_submits_a_job_and_reads_its_result(
    app: FastAPI, token: str, tmp_path: Path
) -> None:
    with TestClient(app) as local:
        _generate(local.get("/openapi.json").json(), tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        kb = importlib.import_module("kb_generated_client")
        create = importlib.import_module("kb_generated_client.api.jobs.create_job_v1_jobs_post")
        get = importlib.import_module("kb_generated_client.api.jobs.get_job_v1_jobs_job_id_get")
        events = importlib.import_module(
            "kb_generated_client.api.results.list_events_v1_jobs_job_id_events_get")
        models = importlib.import_module("kb_generated_client.models")
        with serve_in_thread(app) as url:
            client = kb.AuthenticatedClient(base_url=url, token=token)
            body = models.JobCreate.from_dict({
                "problem": {"source": EXAMPLE.read_text(), "name": "va"},
                "targets": ["cpu"], "budget": {"iterations": 2}})
            created = create.sync_detailed(client=client, body=body)
            assert created.status_code == 201, created.content
            job = get.sync(job_id=created.parsed.id, client=client)
            page = events.sync(job_id=created.parsed.id, client=client)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("kb_generated_client")]:
            del sys.modules[name]
    assert isinstance(job, models.JobOut)
    assert (job.status, job.problem.name, job.targets) == ("queued", "va", ["cpu"])
    assert job.created_at.tzinfo is not None  # "...Z" parses as an aware UTC time
    assert job.budget.iterations == 2 and page.events == []
