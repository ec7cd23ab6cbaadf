"""Server-sent events of a suite's progress, and the stream's framing rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import session_scope
from kernelband.db.models import Job
from services.api.sse import frame, last_event_id, wants_stream

Body = Callable[..., dict[str, Any]]


def test_frames_and_resume_points() -> None:
    assert frame(7, "candidate", {"seq": 7}) == 'id: 7\nevent: candidate\ndata: {"seq":7}\n\n'
    assert last_event_id("12", 0) == 12 and last_event_id(None, 3) == 3
    assert last_event_id("x; drop", 3) == 3  # anything but a number is ignored
    assert wants_stream("text/event-stream") and not wants_stream("application/json")


def test_a_suites_progress_reads_once_or_streams_to_its_end(
    client: TestClient, auth: dict[str, str], job_body: Body, factory: sessionmaker[Session]
) -> None:
    source = job_body()["problem"]["source"]
    suite = client.post("/v1/suites", headers=auth, json={
        "problems": [{"name": "a", "source": source}, {"name": "b", "source": source + "\n"}],
        "budget": {"iterations": 1}}).json()
    path = f"/v1/suites/{suite['suite_id']}/events"
    now = client.get(path, headers=auth).json()
    assert (now["jobs"], now["jobs_finished"], now["finished"]) == (2, 0, False)
    with session_scope(factory) as session:
        session.execute(update(Job).values(status="completed", version=Job.version + 1))
    stream = client.get(path, headers={**auth, "Accept": "text/event-stream"})
    assert stream.headers["content-type"].startswith("text/event-stream")
    blocks = [b for b in stream.text.split("\n\n") if b.startswith("id: ")]
    assert len(blocks) == 1 and "event: progress" in blocks[0]
    assert '"finished":true' in blocks[0] and '"jobs_finished":2' in blocks[0]
    assert client.get("/v1/suites/suite-nope/events", headers=auth).status_code == 404
