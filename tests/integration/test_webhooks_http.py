"""Webhooks end to end on Postgres: registered over HTTP, delivered by the deliverer process
(`kernelband webhooks deliver`), signed, retried with backoff and logged."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from kernelband.auth_tokens import mint_token
from kernelband.webhooks import verify_signature
from tests.utils.api_process import api_process
from tests.utils.processes import ManagedProcess, service_env, start_process, wait_for

pytestmark = pytest.mark.integration

ADMIN_TOKEN = mint_token().secret
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"


class Receiver(BaseHTTPRequestHandler):
    """/ok answers 204; /flaky 500 twice, then 200; /down always 500."""

    received: list[tuple[str, dict[str, str], bytes]] = []
    flaky_left = 2

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Receiver.received.append((self.path, dict(self.headers), body))
        code = 204
        if self.path == "/down":
            code = 500
        elif self.path == "/flaky" and Receiver.flaky_left > 0:
            Receiver.flaky_left -= 1
            code = 500
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.received, Receiver.flaky_left = [], 2
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def deployment(postgres_url: str, tmp_path: Path) -> Iterator[tuple[str, ManagedProcess]]:
    """The API and the webhook deliverer, each started by its documented command."""
    env = {"KERNELBAND_WEBHOOK_MAX_TRIES": "3", "KERNELBAND_WEBHOOK_TIMEOUT_S": "5"}
    with api_process(postgres_url, tmp_path, KERNELBAND_BOOTSTRAP_TOKEN=ADMIN_TOKEN) as (url, _):
        deliverer = start_process(
            "deliverer", [sys.executable, "-m", "kernelband.cli", "webhooks", "deliver",
                          "--interval-s", "0.2", "--backoff-s", "0.3"],
            service_env(postgres_url, "", "", **env), tmp_path)
        try:
            yield url, deliverer
        finally:
            deliverer.terminate()


def _finish_job(postgres_url: str, job: str) -> None:
    """What the scheduler writes when a job ends: its status and the job_finished event."""
    from sqlalchemy import func, select, update

    from kernelband.db import make_engine, make_session_factory, session_scope
    from kernelband.db.models import Event, Job
    from tests.utils.public_ids import row_id

    engine = make_engine(postgres_url)
    with session_scope(make_session_factory(engine)) as s:
        job_id = row_id(s, job)
        seq = (s.scalar(select(func.max(Event.seq)).where(Event.job_id == job_id)) or 0) + 1
        s.execute(update(Job).where(Job.id == job_id).values(status="completed",
                                                              version=Job.version + 1))
        s.add(Event(job_id=job_id, seq=seq, kind="job_finished", payload={"status": "completed"}))
    engine.dispose()


def test_signed_deliveries_verify_and_failures_are_retried_and_logged(
    deployment: tuple[str, ManagedProcess], receiver: str, postgres_url: str
) -> None:
    url, deliverer = deployment
    with httpx.Client(base_url=url, timeout=60) as http:
        hooks = {}
        for path in ("/ok", "/flaky", "/down"):
            made = http.post("/v1/webhooks", json={"url": receiver + path,
                                                   "events": ["job.finished"]}, headers=ADMIN)
            assert made.status_code == 201, made.text
            hooks[path] = made.json()
        body = {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"},
                "targets": ["cpu"], "budget": {"iterations": 1}}
        job_id = http.post("/v1/jobs", json=body, headers=ADMIN).json()["id"]
        _finish_job(postgres_url, job_id)

        def log(path: str) -> list[dict[str, object]]:
            hook_id = hooks[path]["id"]
            return http.get(f"/v1/webhooks/{hook_id}/deliveries", headers=ADMIN).json()["deliveries"]

        wait_for(lambda: [d["state"] for d in log("/flaky")] == ["delivered"]
                 and [d["state"] for d in log("/down")] == ["failed"], 60,
                 "the deliveries to settle", processes=(deliverer,))
        (flaky,), (down,) = log("/flaky"), log("/down")
    (ok,) = [r for r in Receiver.received if r[0] == "/ok"]
    headers = {k.lower(): v for k, v in ok[1].items()}
    assert headers["x-kernelband-event"] == "job.finished"
    assert verify_signature(hooks["/ok"]["secret"], headers["x-kernelband-timestamp"], ok[2],
                            headers["x-kernelband-signature"])
    assert not verify_signature("whsec_wrong", headers["x-kernelband-timestamp"], ok[2],
                                headers["x-kernelband-signature"])
    assert f'"job_id":"{job_id}"' in ok[2].decode()
    assert headers["x-kernelband-delivery"].startswith("dlv_")
    assert (flaky["tries"], flaky["last_status"], flaky["last_error"]) == (3, 204, None)
    assert len([r for r in Receiver.received if r[0] == "/flaky"]) == 3
    assert (down["tries"], down["last_status"]) == (3, 500) and "HTTP 500" in down["last_error"]
    assert len([r for r in Receiver.received if r[0] == "/down"]) == 3  # max tries, no more
