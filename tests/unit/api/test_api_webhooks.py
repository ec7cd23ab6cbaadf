"""Webhook registration (admin only, per team) and what the deliverer turns events into."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from kernelband import webhooks
from kernelband.db import session_scope
from kernelband.db.models import Event, Job
from tests.utils.public_ids import row_id

Body = Callable[..., dict[str, Any]]


def _event(factory: sessionmaker[Session], job: str, seq: int, kind: str,
           status: str | None = None) -> None:
    job_id = row_id(factory, job)
    with session_scope(factory) as s:
        if status:
            s.execute(update(Job).where(Job.id == job_id).values(status=status))
        s.add(Event(job_id=job_id, seq=seq, kind=kind, payload={}))


def test_registration_is_admin_only_per_team_and_strict(
    client: TestClient, auth: dict[str, str], make_token: Callable[[str], str]
) -> None:
    read = client.post("/v1/tokens", json={"scope": "read"}, headers=auth).json()["token"]
    body = {"url": "https://example.test/hook"}
    assert client.post("/v1/webhooks", json=body,
                       headers={"Authorization": f"Bearer {read}"}).status_code == 403
    made = client.post("/v1/webhooks", json=body, headers=auth)
    assert made.status_code == 201 and made.json()["secret"].startswith("whsec_")
    assert made.json()["events"] == ["job.finished", "suite.finished"]
    listed = client.get("/v1/webhooks", headers=auth).json()["webhooks"]
    assert [h["id"] for h in listed] == [made.json()["id"]] and "secret" not in listed[0]
    beta = {"Authorization": f"Bearer {make_token('beta')}"}
    assert client.get(f"/v1/webhooks/{made.json()['id']}/deliveries", headers=beta).status_code == 404
    bad = client.post("/v1/webhooks", json={**body, "events": ["job.done"]}, headers=auth)
    assert bad.status_code == 422 and bad.json()["details"][0]["field"].startswith("events")
    typo = client.post("/v1/webhooks", json={**body, "secret": "mine"}, headers=auth)
    assert typo.status_code == 422
    assert client.post("/v1/webhooks", json={"url": "ftp://x"}, headers=auth).status_code == 422
    gone = client.delete(f"/v1/webhooks/{made.json()['id']}", headers=auth)
    assert gone.status_code == 200 and gone.json()["active"] is False


def test_events_become_job_suite_and_best_deliveries_once(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    a = client.post("/v1/jobs", json=job_body(suite="s1"), headers=auth).json()["id"]
    b = client.post("/v1/jobs", json=job_body(suite="s1"), headers=auth).json()["id"]
    _event(factory, a, 1, "job_started")  # before the hook: never delivered
    hook = client.post("/v1/webhooks", json={"url": "http://receiver.test/h", "events": [
        "job.finished", "suite.finished", "job.new_best"]}, headers=auth).json()
    _event(factory, a, 2, "new_best")
    _event(factory, a, 3, "job_finished", status="completed")
    _event(factory, b, 1, "job_cancelled", status="cancelled")  # the suite's last job
    sent: list[dict[str, Any]] = []

    def receive(request: httpx.Request) -> httpx.Response:
        stamp = request.headers["x-kernelband-timestamp"]
        assert webhooks.verify_signature(hook["secret"], stamp, request.content,
                                         request.headers["x-kernelband-signature"])
        sent.append(json.loads(request.content))
        return httpx.Response(200)

    with httpx.Client(transport=httpx.MockTransport(receive)) as http:
        for _ in range(2):  # a second pass finds nothing new
            webhooks.deliver_once(factory, http, max_tries=3, base_s=0.01, timeout_s=1)
    kinds = [(m["kind"], m["data"].get("job_id")) for m in sent]
    assert kinds == [("job.new_best", a), ("job.finished", a), ("job.finished", b),
                     ("suite.finished", None)]
    assert sent[-1]["data"] == {"suite_id": "s1", "last_job_id": b}
    log = client.get(f"/v1/webhooks/{hook['id']}/deliveries", headers=auth).json()["deliveries"]
    assert [d["state"] for d in log] == ["delivered"] * 4


def test_backoff_grows_exponentially() -> None:
    assert [webhooks.backoff_s(t, 1.0) for t in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert webhooks.backoff_s(30, 1.0, max_s=60) == 60
